// The live status page of batond (docs/server.md, "Status page"), on the
// metrics listener:
//   GET /              the page (status_page_html.cc; HTML, CSS and JS in
//                      the binary, nothing fetched from elsewhere)
//   GET /status.json   one JSON snapshot
//   GET /events        server-sent events: a snapshot at once, then one
//                      whenever what the stream shows changed
// each with ?prefix=<name prefix>. With users, HTTP Basic credentials of
// any user are needed, and a user sees only the locks and counters under
// prefixes where it has read (admin on "" sees everything).
//
// Pushes: after every table call status_changed() compares the table's
// change_count() with the last one pushed; if it moved and a stream is
// open, one push is scheduled no sooner than kPushInterval after the
// previous one (bursts coalesce into one snapshot). A push builds one
// snapshot per distinct (prefix, user) and sends it to each stream whose
// last snapshot differs. Nothing waits for a client: each stream has one
// write in flight and at most one snapshot queued behind it (a newer one
// replaces it); a stream whose write has not finished within kStall (its
// socket's send buffer stays full) is dropped. A comment line goes to
// every idle stream each kHeartbeat so that dead peers are found.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>

#include "baton/options.h"
#include "server/server.h"

namespace baton::server {

std::string_view status_page_html();  // status_page_html.cc

namespace {

constexpr std::size_t kMaxStreams = 64;
constexpr auto kPushInterval = std::chrono::milliseconds(150);
constexpr auto kHeartbeat = std::chrono::seconds(15);
constexpr auto kStall = std::chrono::seconds(10);
constexpr std::size_t kMaxLocks = 1000;     // per snapshot
constexpr std::size_t kMaxCounters = 1000;  // per snapshot

// `s` as a JSON string; bytes that are not UTF-8 become U+FFFD.
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
    } else if (c < 0x80) {
      out += static_cast<char>(c);
      ++i;
    } else {
      // Length of a valid UTF-8 sequence starting here (0: invalid).
      std::size_t n = c >= 0xC2 && c <= 0xDF   ? 2
                      : c >= 0xE0 && c <= 0xEF ? 3
                      : c >= 0xF0 && c <= 0xF4 ? 4
                                               : 0;
      bool ok = n > 0 && i + n <= s.size();
      for (std::size_t k = 1; ok && k < n; ++k) {
        ok = (static_cast<unsigned char>(s[i + k]) & 0xC0) == 0x80;
      }
      if (ok && n == 3) {
        const auto c1 = static_cast<unsigned char>(s[i + 1]);
        ok = !(c == 0xE0 && c1 < 0xA0) && !(c == 0xED && c1 > 0x9F);
      }
      if (ok && n == 4) {
        const auto c1 = static_cast<unsigned char>(s[i + 1]);
        ok = !(c == 0xF0 && c1 < 0x90) && !(c == 0xF4 && c1 > 0x8F);
      }
      if (ok) {
        out.append(s.substr(i, n));
        i += n;
      } else {
        out += "\\ufffd";
        ++i;
      }
    }
  }
  out += '"';
}

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

// The `prefix` of a query string; an error text naming the problem for
// anything else.
std::string parse_query(std::string_view query, std::string& prefix) {
  prefix.clear();
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
      return "bad %-escape in the query \"" + std::string(pair) + "\"";
    }
    if (key != "prefix") {
      return "unknown query parameter \"" + key + "\" (known: prefix)";
    }
    if (value.size() > kMaxNameBytes) {
      return "prefix is " + std::to_string(value.size()) +
             " bytes; the limit is " + std::to_string(kMaxNameBytes);
    }
    if (value.find('\0') != std::string::npos) {
      return "prefix contains a NUL byte";
    }
    prefix = std::move(value);
  }
  return {};
}

std::string http_text(std::string_view status, std::string_view type,
                      std::string_view body, std::string_view extra = {}) {
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

// A snapshot without its time-left and waited figures: what a push
// compares with the last one sent (those figures tick on the page).
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

std::int64_t wall_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

struct Server::StatusStream {
  std::shared_ptr<asio::ip::tcp::socket> socket;
  std::string prefix;
  const User* user = nullptr;  // null: no users configured
  std::string last_shape;      // without_times() of the last snapshot sent
  std::string writing;         // the bytes of the write in flight
  std::string queued;          // sent when that write completes
  bool in_flight = false;
  bool closed = false;
  std::chrono::steady_clock::time_point write_started{};
};

std::string Server::status_json(std::string_view prefix, const User* user) {
  const bool sees_all = user == nullptr || (perms_on(*user, "") & kAdmin);
  if (sees_all) user = nullptr;
  auto visible = [user](std::string_view name) {
    return user == nullptr || (perms_on(*user, name) & kRead) != 0;
  };
  // list() is a scan of the locks; filtered lists take more and cut.
  std::vector<LockInfo> locks =
      table_.list(prefix, user == nullptr ? kMaxLocks + 1 : 100'000);
  std::string o = "{\"prefix\":";
  json_str(o, prefix);
  o += ",\"locks\":[";
  std::size_t shown = 0;
  bool truncated = false;
  for (const LockInfo& l : locks) {
    if (!visible(l.name)) continue;
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
  o += ",\"counters\":[";
  shown = 0;
  truncated = false;
  for (const auto& [name, value] : table_.snapshot_counters()) {
    if (name.compare(0, prefix.size(), prefix) != 0 || !visible(name)) {
      continue;
    }
    if (shown == kMaxCounters) {
      truncated = true;
      break;
    }
    if (shown++ > 0) o += ',';
    o += "{\"name\":";
    json_str(o, name);
    o += ",\"value\":" + std::to_string(value) + "}";
  }
  o += "],\"counters_truncated\":";
  o += truncated ? "true" : "false";
  // Server-wide figures: only for whoever may read /metrics.
  if (sees_all) {
    const core::TableStats t = table_.stats();
    o += ",\"stats\":{\"locks\":" + std::to_string(t.locks) +
         ",\"leases\":" + std::to_string(t.leases) +
         ",\"waiters\":" + std::to_string(t.waiters) +
         ",\"counters\":" + std::to_string(t.counters) +
         ",\"grants\":" + std::to_string(t.grants) +
         ",\"expirations\":" + std::to_string(t.expirations) +
         ",\"wait_timeouts\":" + std::to_string(t.wait_timeouts) +
         ",\"connections\":" + std::to_string(connections_.size()) +
         ",\"commands\":" + std::to_string(stats_.commands) +
         ",\"fencing_high_water\":" +
         std::to_string(table_.fencing_high_water()) + "}";
  }
  o += '}';
  return o;
}

asio::awaitable<void> Server::serve_status(
    std::shared_ptr<asio::ip::tcp::socket> sock, const std::string& request,
    std::string_view target) {
  const auto q = target.find('?');
  const std::string_view path = target.substr(0, q);
  std::string prefix, answer;
  const std::string bad = parse_query(
      q == std::string_view::npos ? std::string_view() : target.substr(q + 1),
      prefix);
  const User* user = nullptr;
  if (!config_.users.empty()) user = http_user(request);
  std::error_code ec;
  if (!config_.users.empty() && user == nullptr) {
    // Slowed like a failed AUTH (this connection only).
    asio::steady_timer t(io_, config_.auth_fail_delay);
    co_await t.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    answer = http_text(
        "401 Unauthorized", "text/plain; charset=utf-8",
        "batond has users: send HTTP Basic credentials of one of them\n",
        "WWW-Authenticate: Basic realm=\"batond\", charset=\"UTF-8\"\r\n");
  } else if (!bad.empty()) {
    answer =
        http_text("400 Bad Request", "text/plain; charset=utf-8", bad + "\n");
  } else if (path == "/status.json") {
    std::string body =
        "{\"server_time_ms\":" + std::to_string(wall_ms()) + ",\"user\":";
    if (user != nullptr) {
      json_str(body, user->name);
    } else {
      body += "null";
    }
    body += ",\"snapshot\":" + status_json(prefix, user) + "}\n";
    after_table_call();  // list() processed what was due
    answer = http_text("200 OK", "application/json", body);
  } else if (path == "/events") {
    if (status_streams_.size() >= kMaxStreams) {
      answer = http_text("503 Service Unavailable", "text/plain; charset=utf-8",
                         "too many status streams open (" +
                             std::to_string(kMaxStreams) + "); try later\n");
    } else {
      auto st = std::make_shared<StatusStream>();
      st->socket = sock;
      st->prefix = prefix;
      st->user = user;
      status_streams_.push_back(st);
      send_status(st,
                  "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                  "Cache-Control: no-store\r\nConnection: keep-alive\r\n"
                  "X-Accel-Buffering: no\r\n\r\nretry: 2000\n\n",
                  false);
      // The first snapshot at once (status_last_push_ untouched).
      std::string body = status_json(prefix, user);
      st->last_shape = without_times(body);
      send_status(st,
                  "data: {\"server_time_ms\":" + std::to_string(wall_ms()) +
                      ",\"snapshot\":" + body + "}\n\n",
                  true);
      after_table_call();
      arm_status_heartbeat();
      // Reads until the peer goes (or the stream is dropped): what it
      // sends is ignored.
      char buf[512];
      while (!st->closed) {
        co_await sock->async_read_some(
            asio::buffer(buf), asio::redirect_error(asio::use_awaitable, ec));
        if (ec) break;
      }
      drop_status_stream(st);
      co_return;
    }
  } else {
    answer =
        http_text("200 OK", "text/html; charset=utf-8", status_page_html(),
                  "Content-Security-Policy: default-src 'none'; "
                  "script-src 'unsafe-inline'; style-src "
                  "'unsafe-inline'; connect-src 'self'; img-src data:\r\n");
  }
  co_await asio::async_write(*sock, asio::buffer(answer),
                             asio::redirect_error(asio::use_awaitable, ec));
  sock->shutdown(asio::ip::tcp::socket::shutdown_both, ec);
}

void Server::send_status(const std::shared_ptr<StatusStream>& st,
                         std::string msg, bool snapshot) {
  if (st->closed) return;
  if (st->in_flight) {
    if (std::chrono::steady_clock::now() - st->write_started > kStall) {
      spdlog::info("status stream dropped: its client reads nothing");
      drop_status_stream(st);
      return;
    }
    // Only the newest snapshot matters; a heartbeat behind a write is moot.
    if (snapshot) st->queued = std::move(msg);
    return;
  }
  st->writing = std::move(msg);
  st->in_flight = true;
  st->write_started = std::chrono::steady_clock::now();
  asio::async_write(*st->socket, asio::buffer(st->writing),
                    [this, st](std::error_code ec, std::size_t) {
                      st->in_flight = false;
                      if (st->closed) return;
                      if (ec) {
                        drop_status_stream(st);
                        return;
                      }
                      if (!st->queued.empty()) {
                        std::string next = std::move(st->queued);
                        st->queued.clear();
                        send_status(st, std::move(next), true);
                      }
                    });
}

void Server::drop_status_stream(const std::shared_ptr<StatusStream>& st) {
  if (!st->closed) {
    st->closed = true;
    std::error_code ec;
    st->socket->shutdown(asio::ip::tcp::socket::shutdown_both, ec);
    st->socket->close(ec);
  }
  std::erase(status_streams_, st);
}

void Server::status_changed() {
  if (status_streams_.empty() || status_push_armed_ ||
      table_.change_count() == status_pushed_changes_) {
    return;
  }
  status_push_armed_ = true;
  status_push_timer_.expires_at(std::max(std::chrono::steady_clock::now(),
                                         status_last_push_ + kPushInterval));
  status_push_timer_.async_wait([this](std::error_code ec) {
    status_push_armed_ = false;
    if (!ec) push_status();
  });
}

void Server::push_status() {
  status_last_push_ = std::chrono::steady_clock::now();
  const std::string now = std::to_string(wall_ms());
  // One snapshot per distinct (prefix, user).
  struct Built {
    std::string json, shape;
  };
  std::map<std::pair<std::string, const User*>, Built> built;
  for (auto st : std::vector(status_streams_)) {
    auto [it, fresh] = built.try_emplace({st->prefix, st->user});
    if (fresh) {
      it->second.json = status_json(st->prefix, st->user);
      it->second.shape = without_times(it->second.json);
    }
    // Nothing it shows moved (a change under another prefix).
    if (it->second.shape == st->last_shape) continue;
    st->last_shape = it->second.shape;
    send_status(st,
                "data: {\"server_time_ms\":" + now +
                    ",\"snapshot\":" + it->second.json + "}\n\n",
                true);
  }
  // The snapshots show the table as list() left it (it processed what was
  // due); then its events are handled like after any table call.
  status_pushed_changes_ = table_.change_count();
  after_table_call();
}

void Server::arm_status_heartbeat() {
  if (status_heartbeat_armed_ || status_streams_.empty()) return;
  status_heartbeat_armed_ = true;
  status_heartbeat_timer_.expires_after(kHeartbeat);
  status_heartbeat_timer_.async_wait([this](std::error_code ec) {
    status_heartbeat_armed_ = false;
    if (ec) return;
    for (auto st : std::vector(status_streams_)) {
      send_status(st, ": keep-alive\n\n", false);
    }
    status_changed();  // a change no table call reported (none expected)
    arm_status_heartbeat();
  });
}

}  // namespace baton::server
