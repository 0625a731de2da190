// core/duration.cc — parse and format human durations.
#include "core/duration.h"

#include <cstdint>
#include <limits>

namespace baton {

namespace {

Error bad(std::string_view text, std::string_view why) {
  std::string msg = "duration \"";
  msg.append(text.substr(0, 64));
  if (text.size() > 64) msg += "...";
  msg += "\" ";
  msg.append(why);
  return Error(Errc::invalid_argument, std::move(msg));
}

// Microseconds per unit, or 0 if unknown.
std::int64_t unit_us(std::string_view unit) {
  if (unit == "us") return 1;
  if (unit == "ms") return 1'000;
  if (unit == "s") return 1'000'000;
  if (unit == "m") return 60'000'000;
  if (unit == "h") return 3'600'000'000;
  if (unit == "d") return 86'400'000'000;
  return 0;
}

}  // namespace

Result<std::chrono::milliseconds> parse_duration(std::string_view text) {
  if (text.empty()) return bad(text, "is empty");
  if (text.front() == '-') return bad(text, "is negative");
  std::int64_t total_us = 0;
  std::size_t i = 0;
  const bool bare =
      text.find_first_not_of("0123456789") == std::string_view::npos;
  while (i < text.size()) {
    if (text[i] < '0' || text[i] > '9') {
      return bad(text, "has no number before its unit");
    }
    std::int64_t value = 0;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
      if (__builtin_mul_overflow(value, 10, &value) ||
          __builtin_add_overflow(value, text[i] - '0', &value)) {
        return bad(text, "is too large");
      }
      ++i;
    }
    std::size_t unit_start = i;
    while (i < text.size() && !(text[i] >= '0' && text[i] <= '9')) ++i;
    std::string_view unit = text.substr(unit_start, i - unit_start);
    std::int64_t per = 1'000;
    if (unit.empty()) {
      if (!bare) return bad(text, "mixes a bare number with units");
      // A bare number is ambiguous (etcdctl --ttl=10 means seconds, a
      // PX argument milliseconds); only 0 means the same in every unit.
      if (value != 0) {
        const std::string n = text.size() <= 12 ? std::string(text) : "10";
        return bad(text, "has no unit: write e.g. " + n + "s, " + n +
                             "ms or 1m30s (units us, ms, s, m, h, d; only 0 "
                             "may go without one)");
      }
    } else {
      per = unit_us(unit);
      if (per == 0) {
        return bad(text, "has an unknown unit \"" + std::string(unit) +
                             "\" (use us, ms, s, m, h, d)");
      }
    }
    std::int64_t part = 0;
    if (__builtin_mul_overflow(value, per, &part) ||
        __builtin_add_overflow(total_us, part, &total_us)) {
      return bad(text, "is too large");
    }
  }
  if (total_us % 1000 != 0) {
    return bad(text, "is not a whole number of milliseconds");
  }
  return std::chrono::milliseconds{total_us / 1000};
}

std::string format_duration(std::chrono::milliseconds d) {
  std::int64_t ms = d.count();
  if (ms == 0) return "0ms";
  std::string sign;
  std::uint64_t v;
  if (ms < 0) {
    sign = "-";
    v = static_cast<std::uint64_t>(-(ms + 1)) + 1;
  } else {
    v = static_cast<std::uint64_t>(ms);
  }
  struct Unit {
    std::uint64_t ms;
    const char* name;
  };
  static constexpr Unit kUnits[] = {
      {86'400'000, "d"}, {3'600'000, "h"}, {60'000, "m"}, {1'000, "s"}};
  for (const Unit& u : kUnits) {
    if (v % u.ms == 0) return sign + std::to_string(v / u.ms) + u.name;
  }
  return sign + std::to_string(v) + "ms";
}

}  // namespace baton
