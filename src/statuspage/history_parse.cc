// Reading a /history.json answer back (`baton status --history`): a small
// JSON reader for the documents history.cc writes (objects, arrays,
// strings, integers, true/false/null), nothing more general.
#include <cstdlib>

#include "statuspage/status_page.h"

namespace baton::statuspage {

namespace {

struct Reader {
  std::string_view s;
  std::size_t i = 0;
  std::string error;

  void ws() {
    while (i < s.size() &&
           (s[i] == ' ' || s[i] == '\n' || s[i] == '\r' || s[i] == '\t')) {
      ++i;
    }
  }
  bool fail(std::string what) {
    if (error.empty()) error = what + " at byte " + std::to_string(i);
    return false;
  }
  bool eat(char c) {
    ws();
    if (i < s.size() && s[i] == c) {
      ++i;
      return true;
    }
    return false;
  }
  static void utf8(std::string& out, unsigned cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }
  bool str(std::string& out) {
    out.clear();
    if (!eat('"')) return fail("expected a string");
    while (i < s.size() && s[i] != '"') {
      if (s[i] != '\\') {
        out += s[i++];
        continue;
      }
      if (++i >= s.size()) break;
      const char e = s[i++];
      switch (e) {
        case 'n':
          out += '\n';
          break;
        case 't':
          out += '\t';
          break;
        case 'r':
          out += '\r';
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'u': {
          if (i + 4 > s.size()) return fail("bad \\u escape");
          const std::string hex(s.substr(i, 4));
          utf8(out,
               static_cast<unsigned>(std::strtoul(hex.c_str(), nullptr, 16)));
          i += 4;
          break;
        }
        default:
          out += e;
      }
    }
    if (i >= s.size()) return fail("unterminated string");
    ++i;
    return true;
  }
  bool integer(std::int64_t& out) {
    ws();
    const std::size_t start = i;
    if (i < s.size() && s[i] == '-') ++i;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i;
    if (i == start) return fail("expected a number");
    out = std::strtoll(std::string(s.substr(start, i - start)).c_str(), nullptr,
                       10);
    return true;
  }
  // Skips any value (for fields this reader does not use).
  bool skip() {
    ws();
    if (i >= s.size()) return fail("unexpected end");
    if (s[i] == '"') {
      std::string ignored;
      return str(ignored);
    }
    if (s[i] == '{' || s[i] == '[') {
      const char close = s[i] == '{' ? '}' : ']';
      ++i;
      if (eat(close)) return true;
      do {
        if (close == '}') {
          std::string k;
          if (!str(k) || !eat(':')) return fail("bad object");
        }
        if (!skip()) return false;
      } while (eat(','));
      return eat(close) || fail("bad container");
    }
    const std::size_t start = i;
    while (i < s.size() && s[i] != ',' && s[i] != '}' && s[i] != ']') ++i;
    return i > start || fail("expected a value");
  }
  bool event(HistoryEvent& e) {
    if (!eat('{')) return fail("expected an event object");
    if (eat('}')) return true;
    do {
      std::string key, text;
      if (!str(key) || !eat(':')) return fail("bad event");
      if (key == "kind" || key == "lock" || key == "label" || key == "mode") {
        if (!str(text)) return false;
        if (key == "lock") e.lock = text;
        if (key == "label") e.label = text;
        if (key == "mode") e.shared = text == "shared";
        if (key == "kind") {
          using K = HistoryEvent::Kind;
          bool known = false;
          for (K k : {K::grant, K::release, K::expire, K::lost, K::wait}) {
            if (kind_name(k) == text) {
              e.kind = k;
              known = true;
            }
          }
          if (!known) return fail("unknown event kind " + text);
        }
      } else if (key == "at_ms" || key == "end_ms" || key == "fencing_token") {
        std::int64_t n = 0;
        if (!integer(n)) return false;
        if (key == "at_ms") e.at_ms = n;
        if (key == "end_ms") e.end_ms = n;
        if (key == "fencing_token")
          e.fencing_token = static_cast<std::uint64_t>(n);
      } else if (!skip()) {
        return false;
      }
    } while (eat(','));
    return eat('}') || fail("expected } after an event");
  }
};

}  // namespace

std::string parse_history(std::string_view json, ParsedHistory& out) {
  out = ParsedHistory{};
  Reader r{json, 0, {}};
  if (!r.eat('{')) return "not a JSON object";
  bool saw_events = false;
  do {
    std::string key;
    if (!r.str(key) || !r.eat(':'))
      return r.error.empty() ? "bad key" : r.error;
    if (key == "events") {
      saw_events = true;
      if (!r.eat('[')) return "events is not an array";
      if (!r.eat(']')) {
        do {
          HistoryEvent e;
          if (!r.event(e)) return r.error;
          out.events.push_back(std::move(e));
        } while (r.eat(','));
        if (!r.eat(']')) return "events: expected ]";
      }
    } else if (key == "window_ms" || key == "server_time_ms" ||
               key == "dropped") {
      std::int64_t n = 0;
      if (!r.integer(n)) return r.error;
      if (key == "window_ms") out.window_ms = n;
      if (key == "server_time_ms") out.server_time_ms = n;
      if (key == "dropped") out.dropped = n;
    } else if (!r.skip()) {
      return r.error;
    }
  } while (r.eat(','));
  if (!r.eat('}')) return "expected } at the end";
  if (!saw_events) return "no events in the answer";
  return {};
}

}  // namespace baton::statuspage
