// The live status page of batond (docs/server.md, "Status page"), on the
// metrics listener:
//   GET /              the page (src/statuspage/page_html.cc; HTML, CSS,
//                      JS and SVG in the binary, nothing fetched elsewhere)
//   GET /status.json   one JSON snapshot
//   GET /events        server-sent events: a snapshot at once, then one
//                      whenever what the stream shows changed
//   GET /history.json  the recorded grants and ends (history_sink.h)
// each with ?prefix=<name prefix> (/history.json: or ?lock=<name>). With
// users, HTTP Basic credentials of any user are needed, and a user sees
// only the locks and counters under prefixes where it has read (admin on
// "" sees everything).
//
// The page, the JSON and the streams are src/statuspage/ (shared with
// `baton status --serve`); this file adds the lock table as their source
// and batond's access rules. After every table call status_changed() asks
// the stream hub to push when the table's change_count() moved.
#include <spdlog/spdlog.h>

#include "server/server.h"

namespace baton::server {

namespace sp = statuspage;

std::string Server::status_json(std::string_view prefix, const User* user) {
  const bool sees_all = user == nullptr || (perms_on(*user, "") & kAdmin);
  if (sees_all) user = nullptr;
  std::function<bool(std::string_view)> visible;
  if (user != nullptr) {
    visible = [user](std::string_view name) {
      return (perms_on(*user, name) & kRead) != 0;
    };
  }
  // list() is a scan of the locks; filtered lists take more and cut.
  std::vector<LockInfo> locks =
      table_.list(prefix, user == nullptr ? sp::kMaxLocks + 1 : 100'000);
  std::string o = "{\"source\":\"batond\",\"prefix\":";
  sp::json_str(o, prefix);
  o += ',';
  sp::locks_json(o, locks, prefix, visible);
  o += ",\"counters\":[";
  std::size_t shown = 0;
  bool truncated = false;
  for (const auto& [name, value] : table_.snapshot_counters()) {
    if (name.compare(0, prefix.size(), prefix) != 0 ||
        (visible && !visible(name))) {
      continue;
    }
    if (shown == sp::kMaxCounters) {
      truncated = true;
      break;
    }
    if (shown++ > 0) o += ',';
    o += "{\"name\":";
    sp::json_str(o, name);
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
  sp::Query query;
  std::string answer;
  const std::string bad = sp::parse_query(
      path,
      q == std::string_view::npos ? std::string_view() : target.substr(q + 1),
      query);
  const User* user = nullptr;
  if (!config_.users.empty()) user = http_user(request);
  std::error_code ec;
  if (!config_.users.empty() && user == nullptr) {
    // Slowed like a failed AUTH (this connection only).
    asio::steady_timer t(io_, config_.auth_fail_delay);
    co_await t.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    answer = sp::http_text(
        "401 Unauthorized", "text/plain; charset=utf-8",
        "batond has users: send HTTP Basic credentials of one of them\n",
        "WWW-Authenticate: Basic realm=\"batond\", charset=\"UTF-8\"\r\n");
  } else if (!bad.empty()) {
    answer = sp::http_text("400 Bad Request", "text/plain; charset=utf-8",
                           bad + "\n");
  } else if (path == "/status.json") {
    std::string body =
        "{\"server_time_ms\":" + std::to_string(sp::wall_ms()) + ",\"user\":";
    if (user != nullptr) {
      sp::json_str(body, user->name);
    } else {
      body += "null";
    }
    body += ",\"snapshot\":" + status_json(query.prefix, user) + "}\n";
    after_table_call();  // list() processed what was due
    answer = sp::http_text("200 OK", "application/json", body);
  } else if (path == "/history.json") {
    table_.advance();  // expiries due now are in the history
    after_table_call();
    const bool sees_all = user == nullptr || (perms_on(*user, "") & kAdmin);
    std::function<bool(std::string_view)> visible;
    if (!sees_all) {
      visible = [user](std::string_view name) {
        return (perms_on(*user, name) & kRead) != 0;
      };
    }
    answer = sp::http_text("200 OK", "application/json",
                           history_.json(query, sp::wall_ms(), visible));
  } else if (path == "/events") {
    if (status_hub_->full()) {
      answer =
          sp::http_text("503 Service Unavailable", "text/plain; charset=utf-8",
                        "too many status streams open (" +
                            std::to_string(sp::kMaxStreams) + "); try later\n");
    } else {
      co_await status_hub_->run(sock, query.prefix, user);
      co_return;
    }
  } else {
    answer = sp::http_text("200 OK", "text/html; charset=utf-8",
                           sp::page_html(), sp::page_csp_header());
  }
  co_await asio::async_write(*sock, asio::buffer(answer),
                             asio::redirect_error(asio::use_awaitable, ec));
  sock->shutdown(asio::ip::tcp::socket::shutdown_both, ec);
}

void Server::status_changed() { status_hub_->changed(); }

}  // namespace baton::server
