// core/jitter.h — the one source of jitter: random pauses that keep many
// waiters, retries and re-checks from moving in lockstep.
//
// Thread safety: each thread draws from its own generator.
#ifndef BATON_CORE_JITTER_H_
#define BATON_CORE_JITTER_H_

#include <chrono>
#include <cstdint>

namespace baton::core {

// A uniformly random whole number in [lo, hi] (lo when hi <= lo).
std::int64_t random_between(std::int64_t lo, std::int64_t hi);

// `base` scaled by a random factor in [lo_factor, hi_factor], at least 1 ms
// when base > 0.
template <typename Rep, typename Period>
std::chrono::milliseconds jittered(std::chrono::duration<Rep, Period> base,
                                   double lo_factor, double hi_factor) {
  const auto us =
      std::chrono::duration_cast<std::chrono::microseconds>(base).count();
  if (us <= 0) return std::chrono::milliseconds::zero();
  const auto lo =
      static_cast<std::int64_t>(static_cast<double>(us) * lo_factor);
  const auto hi =
      static_cast<std::int64_t>(static_cast<double>(us) * hi_factor);
  const auto ms = random_between(lo, hi) / 1000;
  return std::chrono::milliseconds(ms < 1 ? 1 : ms);
}

}  // namespace baton::core

#endif  // BATON_CORE_JITTER_H_
