// stores/redis/redis_store.h — the redis:// store: one Redis server (7.0+).
//
//   redis://[user:password@]host[:port][/db][?password=...&prefix=baton:&timeout=5000]
//   rediss://...?ca=ca.pem[&cert=client.pem&key=client.key]   (TLS, tls.h)
//
// Every Store call is one Lua script (a function of one library: FCALL,
// FUNCTION LOAD when missing; EVALSHA/EVAL where functions are refused)
// that implements the contract exactly as core::LockTable does: FIFO queues
// with no overtaking, fixed capacity while a lock exists, reentrancy by key
// with aliases, idempotent acquire by (name, token), acquire_some /
// acquire_all reservations, guarded counters. All time comes from the Redis
// server (TIME inside the scripts), never from the client. Keys live under
// `prefix` (default "baton:") so operators can scope ACLs to it. See
// docs/stores/redis.md for the key layout and each script.
//
// Blocking acquire: the request is queued with a per-waiter heartbeat
// (2 s, refreshed by the waiting thread's re-checks, so a dead client's
// waiter leaves within 2 s). Only then does the thread SUBSCRIBE to the
// lock's channel (one connection per store, per-lock channels kept 2 s
// after the last waiter); the grant's PUBLISH carries the grant, so the
// woken waiter returns it with no further round trip. A jittered 50–200 ms
// re-check (or the holder's expiry, if sooner) covers a missed message. At
// the wait deadline the request is withdrawn; if it was granted meanwhile,
// the grant is returned.
//
// Thread safety: safe for concurrent use (Store contract).
#ifndef BATON_STORES_REDIS_REDIS_STORE_H_
#define BATON_STORES_REDIS_REDIS_STORE_H_

#include <memory>

#include "baton/error.h"
#include "core/url.h"
#include "stores/store.h"

namespace baton::store {

Result<std::unique_ptr<Store>> open_redis_store(const core::Url& url);

}  // namespace baton::store

#endif  // BATON_STORES_REDIS_REDIS_STORE_H_
