// core/request.h — the one request/grant vocabulary of every layer: the
// client builds an AcquireSpec, a store (or batond, through the wire)
// answers a Grant; core::LockTable's CoreGrant becomes a Grant through
// to_grant() only. One input check per request kind (validate() and the
// checks below it), called where a request enters: the client before
// anything reaches a store, and batond's command layer on every decoded
// request (docs/contract.md#rule-16). Stores trust what they receive.
//
// Thread safety: plain values and pure functions.
#ifndef BATON_CORE_REQUEST_H_
#define BATON_CORE_REQUEST_H_

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "baton/error.h"
#include "baton/lease.h"
#include "baton/store.h"
#include "core/clock.h"

namespace baton::core {

using std::chrono::milliseconds;

// Waits at least this long mean "forever" (so that no deadline arithmetic
// overflows); a store never receives a wait over 7 days (the client splits
// longer ones into several calls with the same owner token).
inline constexpr milliseconds kForeverWait{std::chrono::hours(24 * 365 * 100)};
inline bool is_forever(milliseconds wait) { return wait >= kForeverWait; }

// The request vocabulary is public (baton/store.h): the client builds an
// AcquireSpec, a store answers a Grant.
using baton::AcquireSpec;
using baton::Grant;
using baton::MultiSpec;
using baton::ReleaseResult;

// The fields every acquire carries (AcquireSpec, and LockTable's own
// request, which holds them as views).
Status validate_acquire_fields(std::string_view name, Nanos ttl,
                               std::uint64_t capacity, std::string_view label,
                               std::string_view reentrancy_key);
// Rule 18: shared mode only with capacity 1 and without a reentrancy key.
Status validate_shared(bool shared, std::uint64_t capacity,
                       std::string_view reentrancy_key);
// The one check of each request kind; `wait` 0 = try.
Status validate(const AcquireSpec& spec, milliseconds wait);
Status validate(const MultiSpec& spec, milliseconds wait);
// extend(name, token, ttl) and release(name, token); ttl is not checked
// for release (pass 1ms).
Status validate_lease_call(std::string_view name, const OwnerToken& token,
                           milliseconds ttl = milliseconds{1});
// list(prefix): empty (every lock), or a valid name prefix.
Status validate_prefix(std::string_view prefix);

// A grant whose lease ends at `expiry` on a table clock that reads
// `table_now`, reported with a wall-clock expiry for people to read
// (`wall_now_ms`: Unix epoch ms now).
Grant make_grant(std::string name, const OwnerToken& token,
                 std::uint64_t fencing, Nanos ttl, std::uint32_t holds,
                 std::uint32_t capacity, Nanos valid_for, Instant expiry,
                 Instant table_now, std::int64_t wall_now_ms);

}  // namespace baton::core

#endif  // BATON_CORE_REQUEST_H_
