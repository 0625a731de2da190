// baton/lease.h — owner tokens, leases and lock descriptions (plain values).
//
// A Lease is one holder's right to a lock (docs/contract.md#words). It is a
// value: copying it copies the right's *identity*, not the right itself;
// whether it is still held is decided by the store (store time), and locally by
// `local_deadline` (docs/contract.md#rule-14).
//
// Thread safety: plain values; no internal synchronization.
#ifndef BATON_LEASE_H_
#define BATON_LEASE_H_

#include <array>
#include <chrono>
#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "baton/error.h"

namespace baton {

// 128 random bits chosen by the client for each acquisition. It is a secret
// (whoever knows it can release the lease) and the request id: repeating an
// acquire with the same token is idempotent (rule 17).
struct OwnerToken {
  std::uint64_t hi = 0;
  std::uint64_t lo = 0;

  // 128 bits from getrandom(2) (fetched for 16 tokens at a time per thread;
  // refetched after fork). Never fails in practice; aborts if the kernel
  // cannot supply randomness (no safe fallback exists).
  static OwnerToken random();
  // Parses exactly 32 hex digits (either case).
  static Result<OwnerToken> parse(std::string_view hex);
  // 32 lowercase hex digits.
  std::string to_string() const;
  bool is_zero() const noexcept { return hi == 0 && lo == 0; }

  friend auto operator<=>(const OwnerToken&, const OwnerToken&) = default;
};

struct OwnerTokenHash {
  std::size_t operator()(const OwnerToken& t) const noexcept {
    return static_cast<std::size_t>(t.hi ^ (t.lo * 0x9E3779B97F4A7C15ull));
  }
};

struct Lease {
  std::string name;                  // lock name
  OwnerToken token;                  // owner token (secret)
  std::uint64_t fencing_token = 0;   // strictly increasing per name (rule 2)
  std::chrono::milliseconds ttl{0};  // TTL granted (or of the last extend)
  std::uint32_t holds = 1;           // reentrant hold count (rule 12)
  std::uint32_t capacity = 1;        // the lock's capacity
  bool shared = false;  // granted by acquire_shared (rule 18), else exclusive
  // Rule 14: local time when the request was sent + time the store
  // reported valid from receipt − drift allowance. Treat the lease as held
  // only before this instant.
  std::chrono::steady_clock::time_point local_deadline{};
  // Local time (the client's clock) the grant arrived: hold times are
  // measured from it. Kept by extend; unset in a lease built by hand.
  std::chrono::steady_clock::time_point granted_at{};
  // The store's own idea of expiry, in milliseconds since the Unix epoch on
  // the store's clock (informational: never compare it with local time).
  std::int64_t store_expires_at_ms = 0;

  // True while now < local_deadline.
  bool valid_now() const noexcept {
    return std::chrono::steady_clock::now() < local_deadline;
  }
  // Time until local_deadline (zero if passed).
  std::chrono::milliseconds time_left() const noexcept;
};

struct WaiterInfo {
  std::string label;                    // human-readable owner label
  std::chrono::milliseconds waited{0};  // time in the queue so far
  bool all_or_nothing = false;          // part of an acquire_all
  bool shared = false;                  // waits for a shared lease
};

// What describe() reports (rule 15). Owner tokens are never included.
struct LockInfo {
  std::string name;
  std::uint32_t capacity = 1;       // 1 when the lock is free and unknown
  std::vector<HolderInfo> holders;  // in grant order
  std::vector<WaiterInfo> waiters;  // in queue order
  // >= every fencing token granted on this name so far, held or free.
  std::uint64_t last_fencing_token = 0;
  bool free() const noexcept { return holders.size() < capacity; }
};

}  // namespace baton

#endif  // BATON_LEASE_H_
