// core/hash.h — small hash helpers shared by the core and the stores.
#ifndef BATON_CORE_HASH_H_
#define BATON_CORE_HASH_H_

#include <cstdint>

namespace baton::core {

// The splitmix64 finalizer: spreads every input bit over the whole word
// (used after FNV, whose low bits are weak, and to combine token halves).
constexpr std::uint64_t mix64(std::uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

}  // namespace baton::core

#endif  // BATON_CORE_HASH_H_
