// baton/duration.h — human durations, as the CLI, the YAML config files and
// the store URLs write them: "500ms", "30s", "2m", "1h", "7d", "1m30s",
// "250us".
//
//   auto ttl = baton::parse_duration("1m30s");   // 90000ms
//   baton::format_duration(*ttl);                // "90s"
//
// Thread safety: pure functions.
#ifndef BATON_DURATION_H_
#define BATON_DURATION_H_

#include <chrono>
#include <string>
#include <string_view>

#include "baton/error.h"

namespace baton {

// Units: us, ms, s, m, h, d. Components may be concatenated ("1m30s"). A
// number without a unit is refused (is "10" seconds or milliseconds?),
// except 0. Negative values, overflow, empty input and unknown units are
// invalid_argument naming the input. Microsecond parts are accepted only
// if they make whole milliseconds.
Result<std::chrono::milliseconds> parse_duration(std::string_view text);

// Exact rendering in the largest unit that divides evenly:
// 90000ms -> "90s", 120000ms -> "2m", 1500ms -> "1500ms", 0 -> "0ms".
std::string format_duration(std::chrono::milliseconds d);

}  // namespace baton

#endif  // BATON_DURATION_H_
