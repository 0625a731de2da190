// core/ended_tokens.cc — see ended_tokens.h.
#include "core/ended_tokens.h"

#include <algorithm>
#include <functional>

#include "core/hash.h"

namespace baton::core {

namespace {
// The index holds ring positions + 1 in 32 bits.
constexpr std::size_t kMaxEntries = std::size_t{1} << 30;
constexpr std::size_t kFirstCapacity = 64;

std::uint64_t name_hash64(std::string_view name) {
  return std::hash<std::string_view>{}(name);
}
}  // namespace

EndedTokens::EndedTokens(std::size_t max_entries, Nanos window)
    : max_entries_(std::min(max_entries, kMaxEntries)), window_(window) {}

std::uint64_t EndedTokens::key_hash(std::uint64_t name_hash,
                                    const OwnerToken& token) {
  return mix64(name_hash ^ mix64(token.hi) ^
               (token.lo * 0x9E3779B97F4A7C15ull));
}

std::size_t EndedTokens::memory_bytes() const {
  return ring_.capacity() * sizeof(Entry) +
         index_.capacity() * sizeof(std::uint32_t);
}

void EndedTokens::add(std::string_view name, const OwnerToken& token,
                      Instant now) {
  if (max_entries_ == 0 || window_ <= Nanos::zero()) return;
  while (count_ > 0 && ring_[head_].ended + window_ <= now) pop_oldest();
  if (count_ == max_entries_) pop_oldest();
  if (count_ == ring_.size()) grow();
  const std::size_t pos = (head_ + count_) % ring_.size();
  ring_[pos] = Entry{token, name_hash64(name), now};
  ++count_;
  const std::size_t mask = index_.size() - 1;
  std::size_t i = key_hash(ring_[pos].name_hash, token) & mask;
  while (index_[i] != 0) i = (i + 1) & mask;
  index_[i] = static_cast<std::uint32_t>(pos + 1);
}

bool EndedTokens::contains(std::string_view name, const OwnerToken& token,
                           Instant now) const {
  if (count_ == 0) return false;
  const std::uint64_t h = name_hash64(name);
  const std::size_t mask = index_.size() - 1;
  for (std::size_t i = key_hash(h, token) & mask; index_[i] != 0;
       i = (i + 1) & mask) {
    const Entry& e = ring_[index_[i] - 1];
    if (e.token == token && e.name_hash == h && now < e.ended + window_) {
      return true;
    }
  }
  return false;
}

std::size_t EndedTokens::slot_of(std::size_t pos) const {
  const std::size_t mask = index_.size() - 1;
  std::size_t i = key_hash(ring_[pos].name_hash, ring_[pos].token) & mask;
  while (index_[i] != pos + 1) i = (i + 1) & mask;
  return i;
}

// Removes the oldest entry; its index slot is freed by backward-shift
// deletion (no tombstones, so lookups stay short).
void EndedTokens::pop_oldest() {
  const std::size_t mask = index_.size() - 1;
  std::size_t hole = slot_of(head_);
  std::size_t j = hole;
  for (;;) {
    j = (j + 1) & mask;
    if (index_[j] == 0) break;
    const Entry& e = ring_[index_[j] - 1];
    const std::size_t home = key_hash(e.name_hash, e.token) & mask;
    // The entry at j may move to the hole unless its home lies cyclically
    // in (hole, j].
    const bool stays =
        hole <= j ? (hole < home && home <= j) : (hole < home || home <= j);
    if (stays) continue;
    index_[hole] = index_[j];
    hole = j;
  }
  index_[hole] = 0;
  head_ = (head_ + 1) % ring_.size();
  --count_;
}

void EndedTokens::grow() {
  const std::size_t capacity =
      std::min(std::max(kFirstCapacity, ring_.size() * 2), max_entries_);
  std::vector<Entry> ring(capacity);
  for (std::size_t k = 0; k < count_; ++k) {
    ring[k] = ring_[(head_ + k) % ring_.size()];
  }
  ring_.swap(ring);
  head_ = 0;
  std::size_t slots = 1;
  while (slots < 2 * capacity) slots *= 2;
  index_.assign(slots, 0);
  const std::size_t mask = slots - 1;
  for (std::size_t pos = 0; pos < count_; ++pos) {
    std::size_t i = key_hash(ring_[pos].name_hash, ring_[pos].token) & mask;
    while (index_[i] != 0) i = (i + 1) & mask;
    index_[i] = static_cast<std::uint32_t>(pos + 1);
  }
}

}  // namespace baton::core
