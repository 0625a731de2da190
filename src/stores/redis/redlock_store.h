// stores/redis/redlock_store.h — the redlock:// store: Redlock over N
// independent Redis masters (N >= 3, odd recommended).
//
//   redlock://h1:p1,h2:p2,h3:p3[?prefix=baton:&request_timeout=250ms]
//   redlock://...?tls=1&ca=ca.pem[&cert=...&key=...]   (TLS to every one)
//
// Each instance runs the same per-instance scripts as redis:// (one script
// per call, store time from each instance's TIME). A round goes to every
// instance in parallel with a short per-instance timeout
// (`request_timeout`, default 250 ms; lower it on quiet networks). A grant
// needs a quorum — a majority (N/2 + 1) for a mutex; for a semaphore of
// capacity c, q > N·c/(c+1), else c+1 holders could each hold a majority —
// within its validity (min(TTL, the quorum's remaining lease) − elapsed −
// drift, drift = 1% of TTL + 2 ms, measured on steady_clock); otherwise the
// request is released on every instance and the caller gets not_acquired,
// or unavailable naming the instances that did not answer. Extend and
// release go to every instance and need a majority.
//
// Fencing: the grant's token is the maximum of the majority's per-instance
// counters; each instance's counter (and its copy of the lease) is then
// raised to it, and a majority must confirm before the grant is returned.
// Tokens therefore increase as long as majorities overlap and instances keep
// their data (appendonly yes + appendfsync always; see docs/stores/redis.md).
//
// Order: each instance orders its queue by ticket (docs/stores/redis.md,
// "Order"). A request holding grants on only a minority for longer than a
// jittered split timeout (0.3–0.9 s) gives them back but keeps its ticket
// (`yield`), so the lowest ticket gets the quorum: splits neither deadlock
// nor reorder the queue. The ticket, the round numbers and the split live
// in the request (RedlockRequest); the engine knows nothing of them.
// Counters are not offered (no atomic read-modify-write across independent
// masters): invalid_argument.
//
// Thread safety: safe for concurrent use (Store contract).
#ifndef BATON_STORES_REDIS_REDLOCK_STORE_H_
#define BATON_STORES_REDIS_REDLOCK_STORE_H_

#include "baton/store_descriptor.h"

namespace baton::store {

const StoreDescriptor& redlock_descriptor();

}  // namespace baton::store

#endif  // BATON_STORES_REDIS_REDLOCK_STORE_H_
