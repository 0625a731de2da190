// cli/cli.cc — shared helpers of the `baton` command-line tool.
#include "cli/cli.h"

#include <cstdio>
#include <iostream>
#include <string>

#include "core/duration.h"
#include "core/validate.h"

namespace baton::cli {

using std::chrono::milliseconds;

int exit_code_for(Errc code) noexcept {
  switch (code) {
    case Errc::not_acquired:
    case Errc::timeout:
      return kExitNotAcquired;
    case Errc::lock_lost:
      return kExitLeaseLost;
    case Errc::invalid_argument:
      return kExitUsage;
    case Errc::unavailable:
      return kExitUnavailable;
    case Errc::permission_denied:
      return kExitPermission;
    case Errc::internal:
      return kExitInternal;
  }
  return kExitInternal;
}

int report(Errc code, std::string_view message) {
  std::cerr << "baton: " << errc_name(code) << ": " << message << '\n';
  return exit_code_for(code);
}

int report(const Error& error) {
  int rc = report(error.code(), error.message());
  if (error.code() == Errc::not_acquired) {
    for (const HolderInfo& h : error.holders()) {
      std::cerr << "  held by " << (h.label.empty() ? "?" : h.label)
                << " (fencing " << h.fencing_token << ", "
                << format_human(h.time_left) << " left)\n";
    }
  }
  return rc;
}

Result<milliseconds> parse_duration_flag(std::string_view flag,
                                         std::string_view text,
                                         bool allow_forever) {
  if (allow_forever && (text == "forever" || text == "inf")) {
    return milliseconds::max();
  }
  auto d = core::parse_duration(text);
  if (!d) {
    std::string message = std::string(flag) + ": " + d.error().message();
    if (allow_forever) message += "; or \"forever\" to wait without end";
    return Error(Errc::invalid_argument, std::move(message));
  }
  return *d;
}

Result<LockFlags> parse_lock_flags(const Globals& globals,
                                   std::string_view lock,
                                   std::string_view ttl_text,
                                   std::string_view wait_text,
                                   std::uint32_t capacity) {
  auto ttl = parse_duration_flag("--ttl", ttl_text, false);
  if (!ttl) return ttl.error();
  auto wait = parse_duration_flag("--wait", wait_text, true);
  if (!wait) return wait.error();
  for (Status s :
       {core::validate_name(lock), core::validate_ttl(*ttl),
        core::validate_capacity(capacity), core::validate_wait(*wait),
        core::validate_label(globals.label)}) {
    if (!s) return s.error();
  }
  return LockFlags{*ttl, *wait};
}

Result<Client> open_client(const Globals& globals) {
  ClientOptions options;
  options.label = globals.label;
  if (globals.retry_interval) options.retry_interval = *globals.retry_interval;
  return Client::open(globals.store, options);
}

std::string format_wait(milliseconds d) {
  if (d == milliseconds::max()) return "forever";
  return core::format_duration(d);
}

std::string format_human(milliseconds d) {
  long long ms = d.count();
  if (ms < 0) ms = 0;
  char buf[64];
  if (ms < 1000) {
    std::snprintf(buf, sizeof buf, "%lldms", ms);
  } else if (ms < 60'000) {
    std::snprintf(buf, sizeof buf, "%llds", ms / 1000);
  } else if (ms < 3'600'000) {
    std::snprintf(buf, sizeof buf, "%lldm%02llds", ms / 60'000, ms / 1000 % 60);
  } else if (ms < 86'400'000) {
    std::snprintf(buf, sizeof buf, "%lldh%02lldm", ms / 3'600'000,
                  ms / 60'000 % 60);
  } else {
    std::snprintf(buf, sizeof buf, "%lldd%02lldh", ms / 86'400'000,
                  ms / 3'600'000 % 24);
  }
  return buf;
}

std::string ordinal(std::size_t n) {
  const char* suffix = "th";
  if (n % 100 < 11 || n % 100 > 13) {
    switch (n % 10) {
      case 1:
        suffix = "st";
        break;
      case 2:
        suffix = "nd";
        break;
      case 3:
        suffix = "rd";
        break;
      default:
        break;
    }
  }
  return std::to_string(n) + suffix;
}

namespace {

// Length of the valid UTF-8 sequence starting at s[i], or 0 if invalid.
std::size_t utf8_length(std::string_view s, std::size_t i) {
  auto byte = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  unsigned char c = byte(i);
  std::size_t len = 0;
  unsigned min = 0;
  unsigned cp = 0;
  if (c < 0x80) return 1;
  if ((c & 0xE0) == 0xC0) {
    len = 2, min = 0x80, cp = c & 0x1F;
  } else if ((c & 0xF0) == 0xE0) {
    len = 3, min = 0x800, cp = c & 0x0F;
  } else if ((c & 0xF8) == 0xF0) {
    len = 4, min = 0x10000, cp = c & 0x07;
  } else {
    return 0;
  }
  if (i + len > s.size()) return 0;
  for (std::size_t k = 1; k < len; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (byte(i + k) & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return len;
}

}  // namespace

std::string json_string(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 2);
  out += '"';
  for (std::size_t i = 0; i < s.size();) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    switch (c) {
      case '"':
        out += "\\\"";
        ++i;
        continue;
      case '\\':
        out += "\\\\";
        ++i;
        continue;
      case '\n':
        out += "\\n";
        ++i;
        continue;
      case '\r':
        out += "\\r";
        ++i;
        continue;
      case '\t':
        out += "\\t";
        ++i;
        continue;
      case '\b':
        out += "\\b";
        ++i;
        continue;
      case '\f':
        out += "\\f";
        ++i;
        continue;
      default:
        break;
    }
    if (c < 0x20 || c == 0x7F) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
      ++i;
      continue;
    }
    std::size_t len = utf8_length(s, i);
    if (len == 0) {
      out += "\\ufffd";
      ++i;
      continue;
    }
    out.append(s.substr(i, len));
    i += len;
  }
  out += '"';
  return out;
}

}  // namespace baton::cli
