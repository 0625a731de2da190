// The pure pieces of the status page: JSON, query checking, HTTP framing
// and the snapshot rendering (statuspage/status_page.h).
#include <cstdio>

#include "baton/options.h"
#include "baton/validate.h"
#include "statuspage/status_page.h"

namespace baton::statuspage {

namespace {

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// application/x-www-form-urlencoded decoding; false on a bad % escape.
bool url_decode(std::string_view in, std::string& out) {
  out.clear();
  for (std::size_t i = 0; i < in.size(); ++i) {
    if (in[i] == '+') {
      out += ' ';
    } else if (in[i] == '%') {
      if (i + 2 >= in.size()) return false;
      const int hi = hex_digit(in[i + 1]), lo = hex_digit(in[i + 2]);
      if (hi < 0 || lo < 0) return false;
      out += static_cast<char>(hi * 16 + lo);
      i += 2;
    } else {
      out += in[i];
    }
  }
  return true;
}

// Why `value` (a decoded parameter) cannot be a name or prefix, or "".
std::string bad_value(std::string_view key, std::string_view value) {
  if (value.size() > kMaxNameBytes) {
    return std::string(key) + " is " + std::to_string(value.size()) +
           " bytes; the limit is " + std::to_string(kMaxNameBytes);
  }
  for (std::size_t i = 0; i < value.size();) {
    const std::size_t n = utf8_sequence_length(value, i);
    if (n == 0) {
      return std::string(key) + " is not UTF-8 (byte " + std::to_string(i) +
             ")";
    }
    const auto c = static_cast<unsigned char>(value[i]);
    if (n == 1 && (c < 0x20 || c == 0x7F)) {
      return std::string(key) + " contains a control character (byte " +
             std::to_string(i) + ")";
    }
    i += n;
  }
  return {};
}

}  // namespace

void json_str(std::string& out, std::string_view s) {
  out += '"';
  for (std::size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
      ++i;
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
      ++i;
    } else if (const std::size_t n = utf8_sequence_length(s, i); n > 0) {
      out.append(s.substr(i, n));
      i += n;
    } else {
      out += "\\ufffd";
      ++i;
    }
  }
  out += '"';
}

std::int64_t wall_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string http_text(std::string_view status, std::string_view type,
                      std::string_view body, std::string_view extra) {
  std::string out = "HTTP/1.1 ";
  out += status;
  out += "\r\nContent-Type: ";
  out += type;
  out += "\r\nCache-Control: no-store\r\n";
  out += extra;
  out += "Content-Length: " + std::to_string(body.size()) +
         "\r\nConnection: close\r\n\r\n";
  out += body;
  return out;
}

std::string_view page_csp_header() {
  return "Content-Security-Policy: default-src 'none'; script-src "
         "'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; "
         "img-src data:\r\n";
}

std::string without_times(std::string_view json) {
  std::string out;
  out.reserve(json.size());
  for (std::size_t i = 0; i < json.size();) {
    bool skipped = false;
    for (std::string_view key : {"\"time_left_ms\":", "\"waited_ms\":"}) {
      if (json.substr(i, key.size()) == key) {
        i += key.size();
        while (i < json.size() && json[i] >= '0' && json[i] <= '9') ++i;
        skipped = true;
        break;
      }
    }
    if (!skipped) out += json[i++];
  }
  return out;
}

bool is_page_path(std::string_view path) {
  return path == "/" || path == "/index.html" || path == "/status.json" ||
         path == "/events" || path == "/history.json";
}

std::string parse_query(std::string_view path, std::string_view query,
                        Query& q) {
  q = Query{};
  const bool history = path == "/history.json";
  bool has_prefix = false;
  while (!query.empty()) {
    const auto amp = query.find('&');
    std::string_view pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view()
                                          : query.substr(amp + 1);
    if (pair.empty()) continue;
    const auto eq = pair.find('=');
    std::string key, value;
    if (!url_decode(pair.substr(0, eq), key) ||
        !url_decode(eq == std::string_view::npos ? std::string_view()
                                                 : pair.substr(eq + 1),
                    value)) {
      return "bad %-escape in the query";
    }
    const bool known = key == "prefix" || (history && key == "lock");
    if (!known) {
      std::string shown;
      json_str(shown, key.substr(0, 64));
      return "unknown query parameter " + shown +
             (history ? " (known: lock, prefix)" : " (known: prefix)");
    }
    if (std::string why = bad_value(key, value); !why.empty()) return why;
    bool& seen = key == "lock" ? q.has_lock : has_prefix;
    if (seen) return key + " given twice";
    seen = true;
    (key == "lock" ? q.lock : q.prefix) = std::move(value);
  }
  if (q.has_lock && has_prefix) return "give lock or prefix, not both";
  if (q.has_lock && q.lock.empty()) return "lock is empty";
  return {};
}

void locks_json(std::string& o, const std::vector<LockInfo>& locks,
                std::string_view prefix,
                const std::function<bool(std::string_view)>& visible) {
  o += "\"locks\":[";
  std::size_t shown = 0;
  bool truncated = false;
  for (const LockInfo& l : locks) {
    if (l.name.compare(0, prefix.size(), prefix) != 0) continue;
    if (visible && !visible(l.name)) continue;
    if (shown == kMaxLocks) {
      truncated = true;
      break;
    }
    if (shown++ > 0) o += ',';
    o += "{\"name\":";
    json_str(o, l.name);
    o += ",\"capacity\":" + std::to_string(l.capacity) +
         ",\"last_fencing_token\":" + std::to_string(l.last_fencing_token) +
         ",\"holders\":[";
    for (std::size_t i = 0; i < l.holders.size(); ++i) {
      const HolderInfo& h = l.holders[i];
      if (i > 0) o += ',';
      o += "{\"label\":";
      json_str(o, h.label);
      o += ",\"fencing_token\":" + std::to_string(h.fencing_token) +
           ",\"mode\":\"" + (h.shared ? "shared" : "exclusive") +
           "\",\"holds\":" + std::to_string(h.holds) +
           ",\"time_left_ms\":" + std::to_string(h.time_left.count()) + "}";
    }
    o += "],\"waiters\":[";
    for (std::size_t i = 0; i < l.waiters.size(); ++i) {
      const WaiterInfo& w = l.waiters[i];
      if (i > 0) o += ',';
      o += "{\"label\":";
      json_str(o, w.label);
      o += ",\"mode\":\"" + std::string(w.shared ? "shared" : "exclusive") +
           "\",\"all_or_nothing\":" + (w.all_or_nothing ? "true" : "false") +
           ",\"waited_ms\":" + std::to_string(w.waited.count()) + "}";
    }
    o += "]}";
  }
  o += "],\"locks_truncated\":";
  o += truncated ? "true" : "false";
}

std::string_view request_target(std::string_view head) {
  std::string_view line = head.substr(0, head.find("\r\n"));
  if (line.rfind("GET ", 0) != 0) return {};
  std::string_view target = line.substr(4);
  return target.substr(0, target.find(' '));
}

}  // namespace baton::statuspage
