// stores/redis/common.h — what the redis:// and redlock:// stores share
// besides the connection layer (internal): the steady clock of their own
// measurements, the re-check interval, and test hooks.
#ifndef BATON_STORES_REDIS_COMMON_H_
#define BATON_STORES_REDIS_COMMON_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <utility>

#include "baton/store.h"

namespace baton::store::redis {

using Steady = std::chrono::steady_clock;
using std::chrono::microseconds;
using std::chrono::milliseconds;

// Test hooks: a fixed re-check interval, dropped wake-up messages, and
// counts of what the wake-ups did.
struct TestHooks {
  std::atomic<int> recheck_ms{0};  // > 0: the stores' recheck_interval()
  std::atomic<bool> drop_messages{false};
  std::atomic<std::uint64_t> delivered{0};      // messages passed to a Notifier
  std::atomic<std::uint64_t> dropped{0};        // messages dropped by the hook
  std::atomic<std::uint64_t> pushed_grants{0};  // grants taken from a push
};
TestHooks& test_hooks();

// How long a waiter goes without a look when no message wakes it (the
// engine looks after 1x..3x this: 60-180 ms). A missed message costs at
// most that; each look also renews the waiter's 2 s heartbeat, which
// 3 x 60 ms keeps far from.
inline milliseconds recheck_interval() {
  if (const int fixed = test_hooks().recheck_ms.load(); fixed > 0) {
    return milliseconds(fixed);
  }
  return milliseconds(60);
}

// `t` on ctx's clock as a steady_clock instant (the connection layer and
// the subscriber wait on steady_clock).
inline Steady::time_point steady_at(const CallContext& ctx,
                                    Clock::time_point t) {
  if (t == Clock::time_point::max()) return Steady::time_point::max();
  return Steady::now() + (t - ctx.now());
}

// The store ended the request on its side and left no trace of it.
inline Answer expired_answer() {
  Answer a;
  a.kind = Answer::Kind::expired;
  a.gone = true;
  return a;
}
inline MultiAnswer expired_multi() {
  MultiAnswer a;
  a.kind = MultiAnswer::Kind::expired;
  a.gone = true;
  return a;
}
inline MultiAnswer refused_multi(Error e) {
  MultiAnswer a;
  a.kind = MultiAnswer::Kind::refused;
  a.error = std::move(e);
  a.gone = true;
  return a;
}

}  // namespace baton::store::redis

#endif  // BATON_STORES_REDIS_COMMON_H_
