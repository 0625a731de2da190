// core/duration.h — human durations: "500ms", "30s", "2m", "1h", "7d",
// "1m30s", "250us". Used by the CLI, config files and the server protocol.
//
// Thread safety: pure functions.
#ifndef BATON_CORE_DURATION_H_
#define BATON_CORE_DURATION_H_

#include <chrono>
#include <string>
#include <string_view>

#include "baton/error.h"

namespace baton::core {

// Units: us, ms, s, m, h, d. Components may be concatenated ("1m30s"). A
// number without a unit is refused (is "10" seconds or milliseconds?),
// except 0. Negative values, overflow, empty input and
// unknown units are invalid_argument naming the input. Microsecond parts
// are truncated to whole milliseconds only if they divide evenly; otherwise
// invalid_argument.
Result<std::chrono::milliseconds> parse_duration(std::string_view text);

// Exact rendering in the largest unit that divides evenly:
// 90000ms -> "90s", 120000ms -> "2m", 1500ms -> "1500ms", 0 -> "0ms".
std::string format_duration(std::chrono::milliseconds d);

}  // namespace baton::core

#endif  // BATON_CORE_DURATION_H_
