// stores/memory/memory_store.h — the in-process `memory:` store.
//
// Runs the reference state machine (core::LockTable) under one mutex with a
// steady clock. Blocking calls park on a condition variable and wake when the
// table reports their outcome (grant or wait timeout) or at the table's next
// deadline, so expiries and wait timeouts fire without a timer thread.
//
// URLs: `memory:` opens a private store; `memory:<name>` opens the store of
// that name shared by everyone in the process who opens the same URL while
// it is open (tests use it to give two Clients one store).
//
// Thread safety: safe for concurrent use (Store contract).
#ifndef BATON_STORES_MEMORY_MEMORY_STORE_H_
#define BATON_STORES_MEMORY_MEMORY_STORE_H_

#include <memory>
#include <string>

#include "baton/clock.h"
#include "baton/error.h"
#include "core/url.h"
#include "stores/store.h"

namespace baton::store {

// A new private memory store. Its time is `clock` (null = the steady
// clock); tests pass the ManualClock their client reads.
std::unique_ptr<Store> make_memory_store(
    std::string url = "memory:",
    std::shared_ptr<const baton::Clock> clock = nullptr);

// The factory behind the `memory:` scheme (see header comment).
Result<std::unique_ptr<Store>> open_memory_store(const core::Url& url);

}  // namespace baton::store

#endif  // BATON_STORES_MEMORY_MEMORY_STORE_H_
