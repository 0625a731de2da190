// stores/redis/redis_store.h — the redis:// store: one Redis server (7.0+).
//
//   redis://[user:password@]host[:port][/db][?prefix=baton:&request_timeout=5s]
//   rediss://...?ca=ca.pem[&cert=client.pem&key=client.key]   (TLS)
//
// Every primitive is one Lua script (a function of one library: FCALL,
// FUNCTION LOAD when missing; EVALSHA/EVAL where functions are refused)
// that implements the contract exactly as core::LockTable does: FIFO queues
// with no overtaking, fixed capacity while a lock exists, reentrancy by key
// with aliases, idempotent acquire by (name, token), acquire_some /
// acquire_all reservations, guarded counters. All time comes from the Redis
// server (TIME inside the scripts), never from the client. Keys live under
// `prefix` (default "baton:") so operators can scope ACLs to it. See
// docs/stores/redis.md for the key layout and each script.
//
// Waiting: `ask` grants or queues the request with a per-waiter heartbeat
// (2 s, renewed by each `look`, so a dead client's waiter leaves within
// 2 s). Only a queued request subscribes to its store's inbox (see
// inbox.h); the grant's PUBLISH carries the grant, so `wait_change`
// returns it with no further round trip. A holder's expiry is the
// answer's look_at. `withdraw` removes the request, or returns the grant
// that came in.
//
// Thread safety: safe for concurrent use (Store contract).
#ifndef BATON_STORES_REDIS_REDIS_STORE_H_
#define BATON_STORES_REDIS_REDIS_STORE_H_

#include "baton/store_descriptor.h"

namespace baton::store {

// redis:// and rediss://.
const StoreDescriptor& redis_descriptor();

}  // namespace baton::store

#endif  // BATON_STORES_REDIS_REDIS_STORE_H_
