// baton/validate.h — the input rules every entry point applies
// (docs/contract.md#rule-16), for callers that check input before they
// open a client: the baton CLI and config loaders. baton::Client applies
// the same checks itself; a refusal is invalid_argument naming the problem
// and the value, e.g. "TTL 0ms is out of range (1ms .. 7d)".
//
// Thread safety: pure functions.
#ifndef BATON_VALIDATE_H_
#define BATON_VALIDATE_H_

#include <chrono>
#include <cstdint>
#include <string_view>

#include "baton/error.h"

namespace baton {

// 1..512 bytes, no NUL. `what` names the thing ("lock name", "group name").
Status validate_lock_name(std::string_view name,
                          std::string_view what = "lock name");
// 1 ms .. 7 days.
Status validate_ttl(std::chrono::milliseconds ttl);
// 0 (try) .. 7 days, or milliseconds::max() (forever).
Status validate_wait(std::chrono::milliseconds wait);
// At least 1.
Status validate_capacity(std::uint64_t capacity);
// At most 256 bytes, no NUL (empty = the client's default label).
Status validate_label(std::string_view label);

}  // namespace baton

#endif  // BATON_VALIDATE_H_
