// stores/baton/baton_store.h — the baton:// store: a client of batond.
//
//   baton://[user:password@]host[:port][?request_timeout=5s&...]
//   batons://host[:port]?ca=ca.pem[&cert=client.pem&key=client.key]
//
// Each primitive is one batond command (proto/commands.h) on a pooled RESP
// connection (stores/baton/conn.h). batond parks a waiting LOCK.ACQUIRE
// (and ACQUIRE_SOME/ALL) and answers it once it is decided, so ask(wait)
// sends the wait left and returns only with batond's answer: granted, or
// `-timeout` when batond's wait ran out (expired, nothing left of the
// request). That parked reply is the request's wake-up source: the engine
// never has to look again. With QUEUED (sent with every wait) batond
// first answers a request that queues `+queued <place>`: ask() then
// answers `queued` (the engine's wait-started event, no try first) and
// keeps the connection, and look() reads the final answer on it. A stop
// interrupts the ask by withdrawing the request by its owner token
// (LOCK.RELEASE), repeated until the ask returns, since the release may
// overtake the acquire on another connection; batond then answers the parked
// ask at once.
//
// Connect and I/O failures are `unavailable` (a deadline that passed with
// no answer: `timeout`); the engine repeats with the same owner token,
// which batond answers idempotently (docs/contract.md#rule-17). New
// connections back off after failures (50 ms doubling to 1 s).
//
// Thread safety: safe for concurrent use (Store contract).
#ifndef BATON_STORES_BATON_BATON_STORE_H_
#define BATON_STORES_BATON_BATON_STORE_H_

#include "baton/store_descriptor.h"

namespace baton::store {

// baton:// and batons://, their options and their open function.
const StoreDescriptor& baton_descriptor();

}  // namespace baton::store

#endif  // BATON_STORES_BATON_BATON_STORE_H_
