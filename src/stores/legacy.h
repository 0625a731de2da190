// stores/legacy.h — runs a store written to the old blocking interface
// (stores/store.h: acquire(spec, wait) waits inside the store) under the
// engine, while the stores move to the primitives of baton/store.h one by
// one.
//
// The adapter's ask(wait) is the old blocking acquire under a call
// deadline scope; its answer is granted, refused, or expired with
// gone = true (an old store withdraws by itself when its wait ends). A
// stop interrupts it the old way: a helper thread releases the request by
// owner token every 50 ms until the ask returns.
//
// Thread safety: as the wrapped store.
#ifndef BATON_STORES_LEGACY_H_
#define BATON_STORES_LEGACY_H_

#include <memory>

#include "baton/store.h"
#include "stores/store.h"

namespace baton::store {

std::unique_ptr<baton::Store> adapt_legacy(std::shared_ptr<Store> old);

}  // namespace baton::store

#endif  // BATON_STORES_LEGACY_H_
