// stores/memory/memory_store.h — the in-process `memory:` store.
//
// Runs the reference state machine (core::LockTable) under one mutex. A
// waiting request parks in the table; the table's events (a grant, a wait
// that timed out) wake it, carrying the grant, and expiries fire at the
// table's next deadline without a timer thread.
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
#include "baton/store.h"
#include "baton/store_descriptor.h"

namespace baton::store {

// A new private memory store. Its time is `clock` (null = the steady
// clock); tests pass the ManualClock their client reads.
std::unique_ptr<baton::Store> make_memory_store(
    std::string url = "memory:",
    std::shared_ptr<const baton::Clock> clock = nullptr);

const StoreDescriptor& memory_descriptor();

}  // namespace baton::store

#endif  // BATON_STORES_MEMORY_MEMORY_STORE_H_
