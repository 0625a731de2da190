// core/jitter.cc — see jitter.h.
#include "core/jitter.h"

#include <random>

namespace baton::core {

std::int64_t random_between(std::int64_t lo, std::int64_t hi) {
  if (hi <= lo) return lo;
  thread_local std::mt19937_64 rng{std::random_device{}()};
  return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
}

}  // namespace baton::core
