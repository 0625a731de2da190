// stores/redis/common.h — input checks and wait helpers shared by the
// redis:// and redlock:// stores (internal).
#ifndef BATON_STORES_REDIS_COMMON_H_
#define BATON_STORES_REDIS_COMMON_H_

#include <algorithm>
#include <atomic>
#include <chrono>
#include <random>
#include <string_view>
#include <vector>

#include "core/request.h"
#include "core/validate.h"
#include "stores/store.h"

namespace baton::store::redis {

using Steady = std::chrono::steady_clock;

// Waits at least this long are "forever" (no overflow in deadlines).
inline constexpr milliseconds kForever = core::kForeverWait;

inline Status check_acquire(const AcquireSpec& s, milliseconds wait) {
  return core::validate(s, wait);
}

inline Status check_multi(const MultiSpec& s, milliseconds wait) {
  return core::validate(s, wait);
}

inline Steady::time_point wait_end(milliseconds wait) {
  if (wait >= kForever) return Steady::now() + kForever;
  return Steady::now() + wait;
}

// Milliseconds left until `end`, rounded up (0 if passed).
inline std::int64_t ms_left(Steady::time_point end) {
  const auto now = Steady::now();
  if (now >= end) return 0;
  return std::chrono::ceil<milliseconds>(end - now).count();
}

// Test hooks: a fixed re-check period, dropped wake-up messages.
struct TestHooks {
  std::atomic<int> recheck_ms{0};  // > 0: re-check every that many ms
  std::atomic<bool> drop_messages{false};
  std::atomic<std::uint64_t> delivered{0};      // messages passed to a Notifier
  std::atomic<std::uint64_t> dropped{0};        // messages dropped by the hook
  std::atomic<std::uint64_t> pushed_grants{0};  // grants taken from a push
};
TestHooks& test_hooks();

// The jittered re-check period of a waiter (a missed wake-up costs at most
// this): uniform in [50, 200] ms.
inline milliseconds recheck_period() {
  if (const int fixed = test_hooks().recheck_ms.load(); fixed > 0) {
    return milliseconds(fixed);
  }
  thread_local std::mt19937_64 rng{std::random_device{}()};
  return milliseconds(std::uniform_int_distribution<int>(50, 200)(rng));
}

}  // namespace baton::store::redis

#endif  // BATON_STORES_REDIS_COMMON_H_
