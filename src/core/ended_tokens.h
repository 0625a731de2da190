// core/ended_tokens.h — the owner tokens of leases that ended recently
// (released, expired, freed with their session), so that LockTable can
// answer a late duplicate of the acquire that created one with lock_lost
// instead of granting a new lease (docs/design.md, "A late duplicate of an
// ended lease is refused").
//
// Bounded: at most `max_entries` tokens (oldest forgotten first), each for
// at most `window`. An entry is the owner token, a 64-bit hash of the lock
// name and the instant it ended: 32 bytes in a FIFO ring plus 4–8 bytes of
// open-addressing index (load <= 0.5). Both grow on demand, so a table
// whose leases never end pays nothing. A false match would need the same
// 128-bit random token and a 64-bit name-hash collision.
//
// Thread safety: none (owned by one LockTable).
#ifndef BATON_CORE_ENDED_TOKENS_H_
#define BATON_CORE_ENDED_TOKENS_H_

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "baton/lease.h"
#include "core/clock.h"

namespace baton::core {

class EndedTokens {
 public:
  EndedTokens(std::size_t max_entries, Nanos window);

  // Remembers that the lease of `token` on `name` ended at `now` (forgets
  // what is older than the window, and the oldest entry when full).
  void add(std::string_view name, const OwnerToken& token, Instant now);
  // Whether it ended less than `window` before `now`.
  bool contains(std::string_view name, const OwnerToken& token,
                Instant now) const;

  std::size_t size() const { return count_; }
  // Bytes held by the ring and the index.
  std::size_t memory_bytes() const;

 private:
  struct Entry {
    OwnerToken token;
    std::uint64_t name_hash = 0;
    Instant ended{};
  };
  static std::uint64_t key_hash(std::uint64_t name_hash,
                                const OwnerToken& token);
  // The index slot holding ring position `pos` (it must be there).
  std::size_t slot_of(std::size_t pos) const;
  void pop_oldest();
  void grow();

  std::size_t max_entries_;
  Nanos window_;
  std::vector<Entry> ring_;  // capacity = ring_.size(); oldest at head_
  std::size_t head_ = 0, count_ = 0;
  // Ring position + 1 of each entry (0 = empty), linear probing.
  std::vector<std::uint32_t> index_;
};

}  // namespace baton::core

#endif  // BATON_CORE_ENDED_TOKENS_H_
