// core/validate.h — input validation shared by every entry point (rule 16).
//
// Each function returns OK or invalid_argument whose message names the
// problem and the offending value (names truncated to 64 bytes, with NULs
// shown as \0), e.g.
//   invalid_argument: lock name is 600 bytes; the limit is 512
//   invalid_argument: TTL 0ms is out of range (1ms .. 7d)
//
// Thread safety: pure functions.
#ifndef BATON_CORE_VALIDATE_H_
#define BATON_CORE_VALIDATE_H_

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "baton/error.h"

namespace baton::core {

// An invalid_argument error with `message`.
inline Error invalid(std::string message) {
  return Error(Errc::invalid_argument, std::move(message));
}

// 1..512 bytes, no NUL. `what` names the thing ("lock name", "counter name").
Status validate_name(std::string_view name,
                     std::string_view what = "lock name");
// 1 ms .. 7 days.
Status validate_ttl(std::chrono::nanoseconds ttl);
// The same check, and the same words, for a TTL given as a whole number of
// milliseconds (the wire form), any int64.
Status validate_ttl_ms(std::int64_t ms);
// The error for a TTL written `rendered` ("0ms", "-1ms", ...) that is out
// of range: "TTL <rendered> is out of range (1ms .. 7d)".
Error ttl_out_of_range(std::string_view rendered);
// >= 1.
Status validate_capacity(std::uint64_t capacity);
// <= 256 bytes, no NUL (may be empty).
Status validate_label(std::string_view label);
// <= 512 bytes, no NUL (may be empty = not reentrant).
Status validate_reentrancy_key(std::string_view key);
// 1..1024 names, each valid, no duplicates.
Status validate_names(const std::vector<std::string_view>& names);
// Wait durations: 0 .. 7 days, or milliseconds::max() = forever (the
// client splits forever into store calls of at most 7 days).
Status validate_wait(std::chrono::milliseconds wait);

// A printable, truncated rendering of a possibly hostile name for messages.
std::string quote_name(std::string_view name);

}  // namespace baton::core

#endif  // BATON_CORE_VALIDATE_H_
