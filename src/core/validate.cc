// core/validate.cc — input validation shared by every entry point.
#include "core/validate.h"

#include <limits>
#include <string>
#include <unordered_set>

#include "baton/options.h"
#include "core/duration.h"

namespace baton::core {

namespace {

// Renders a nanosecond count exactly ("0ms", "500us", "7d", "1ns").
std::string render_nanos(std::chrono::nanoseconds d) {
  long long ns = d.count();
  if (ns % 1'000'000 == 0) {
    return format_duration(std::chrono::milliseconds{ns / 1'000'000});
  }
  if (ns % 1'000 == 0) return std::to_string(ns / 1'000) + "us";
  return std::to_string(ns) + "ns";
}

Status check_text(std::string_view text, std::string_view what,
                  std::size_t limit) {
  if (text.size() > limit) {
    return invalid(std::string(what) + " is " + std::to_string(text.size()) +
                   " bytes; the limit is " + std::to_string(limit));
  }
  if (text.find('\0') != std::string_view::npos) {
    return invalid(std::string(what) +
                   " contains a NUL byte: " + quote_name(text));
  }
  return {};
}

}  // namespace

std::string quote_name(std::string_view name) {
  std::string out = "\"";
  std::size_t n = name.size() < 64 ? name.size() : 64;
  for (std::size_t i = 0; i < n; ++i) {
    char c = name[i];
    if (c == '\0') {
      out += "\\0";
    } else if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else {
      out += c;
    }
  }
  out += '"';
  if (name.size() > 64) out += "...";
  return out;
}

Status validate_name(std::string_view name, std::string_view what) {
  if (name.empty()) return invalid(std::string(what) + " is empty");
  return check_text(name, what, kMaxNameBytes);
}

Error ttl_out_of_range(std::string_view rendered) {
  return invalid("TTL " + std::string(rendered) + " is out of range (" +
                 format_duration(kMinTtl) + " .. " + format_duration(kMaxTtl) +
                 ")");
}

Status validate_ttl(std::chrono::nanoseconds ttl) {
  if (ttl < kMinTtl || ttl > kMaxTtl)
    return ttl_out_of_range(render_nanos(ttl));
  return {};
}

Status validate_ttl_ms(std::int64_t ms) {
  if (ms < kMinTtl.count() || ms > kMaxTtl.count()) {
    return ttl_out_of_range(format_duration(std::chrono::milliseconds{ms}));
  }
  return {};
}

Status validate_capacity(std::uint64_t capacity) {
  if (capacity < 1) return invalid("capacity must be at least 1 (got 0)");
  if (capacity > std::numeric_limits<std::uint32_t>::max()) {
    return invalid("capacity " + std::to_string(capacity) +
                   " is too large; the limit is " +
                   std::to_string(std::numeric_limits<std::uint32_t>::max()));
  }
  return {};
}

Status validate_label(std::string_view label) {
  return check_text(label, "owner label", kMaxLabelBytes);
}

Status validate_reentrancy_key(std::string_view key) {
  return check_text(key, "reentrancy key", kMaxNameBytes);
}

Status validate_names(const std::vector<std::string_view>& names) {
  if (names.empty()) return invalid("the list of lock names is empty");
  if (names.size() > kMaxNamesPerRequest) {
    return invalid("request names " + std::to_string(names.size()) +
                   " locks; the limit is " +
                   std::to_string(kMaxNamesPerRequest));
  }
  std::unordered_set<std::string_view> seen;
  seen.reserve(names.size());
  for (std::string_view name : names) {
    if (Status s = validate_name(name); !s.ok()) return s;
    if (!seen.insert(name).second) {
      return invalid("lock name " + quote_name(name) +
                     " appears more than once in the request");
    }
  }
  return {};
}

Status validate_wait(std::chrono::milliseconds wait) {
  if (wait == std::chrono::milliseconds::max()) return {};
  if (wait < std::chrono::milliseconds::zero()) {
    return invalid("wait " + render_nanos(wait) + " is negative");
  }
  if (wait > kMaxTtl) {
    return invalid("wait " + render_nanos(wait) +
                   " is out of range (0ms .. 7d, or forever)");
  }
  return {};
}

}  // namespace baton::core
