// INFO text and the Prometheus /metrics endpoint of batond.
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <spdlog/spdlog.h>

#include <cctype>
#include <sstream>

#include "baton/version.h"
#include "server/connection.h"
#include "server/server.h"

namespace baton::server {

namespace {
struct Metric {
  const char* name;
  const char* type;
  const char* help;
  double value;
};

std::vector<Metric> collect(const Server& s, const core::TableStats& t,
                            const ServerStats& st, const Journal* j,
                            std::size_t connections) {
  std::vector<Metric> m = {
      {"batond_connections", "gauge", "Open client connections",
       double(connections)},
      {"batond_connections_total", "counter", "Accepted connections",
       double(st.connections_total)},
      {"batond_connections_refused_total", "counter",
       "Connections refused (max_connections)", double(st.connections_refused)},
      {"batond_commands_total", "counter", "Commands executed",
       double(st.commands)},
      {"batond_errors_total", "counter", "Error replies", double(st.errors)},
      {"batond_protocol_errors_total", "counter", "Malformed requests",
       double(st.protocol_errors)},
      {"batond_locks", "gauge", "Locks with holders or waiters",
       double(t.locks)},
      {"batond_leases", "gauge", "Live leases", double(t.leases)},
      {"batond_waiters", "gauge", "Queued requests (all queues)",
       double(t.waiters)},
      {"batond_counters", "gauge", "Counters", double(t.counters)},
      {"batond_grants_total", "counter", "Grants", double(t.grants)},
      {"batond_expirations_total", "counter", "Leases that expired",
       double(t.expirations)},
      {"batond_wait_timeouts_total", "counter", "Waits that timed out",
       double(t.wait_timeouts)},
      {"batond_waits_total", "counter", "Requests that parked",
       double(st.waits)},
      {"batond_wait_grants_total", "counter", "Parked requests granted",
       double(st.wait_grants)},
      {"batond_refused_unavailable_total", "counter",
       "Commands refused after a persistence failure",
       double(st.refused_unavailable)},
      {"batond_undone_grants_total", "counter",
       "Grants undone because they could not be persisted",
       double(st.undone_grants)},
      {"batond_permission_denied_total", "counter",
       "Commands refused by a user's rules", double(st.permission_denied)},
      {"batond_auth_failures_total", "counter", "Failed AUTH attempts",
       double(st.auth_failures)},
  };
  if (j != nullptr) {
    const auto& js = j->stats();
    double avg = js.syncs ? double(js.total_sync.count()) / js.syncs : 0;
    m.push_back({"batond_persistence_failed", "gauge",
                 "1 if the journal failed", j->failed() ? 1.0 : 0.0});
    m.push_back({"batond_journal_syncs_total", "counter", "Journal syncs",
                 double(js.syncs)});
    m.push_back({"batond_journal_records_total", "counter", "Journal records",
                 double(js.records)});
    m.push_back(
        {"batond_journal_bytes", "gauge", "Journal size", double(js.bytes)});
    m.push_back({"batond_snapshot_bytes", "gauge", "Snapshot size",
                 double(js.snapshot_bytes)});
    m.push_back({"batond_compactions_total", "counter", "Compactions",
                 double(js.compactions)});
    m.push_back({"batond_sync_last_seconds", "gauge", "Last sync latency",
                 double(js.last_sync.count()) / 1e6});
    m.push_back(
        {"batond_sync_avg_seconds", "gauge", "Mean sync latency", avg / 1e6});
    m.push_back({"batond_sync_max_seconds", "gauge", "Max sync latency",
                 double(js.max_sync.count()) / 1e6});
  }
  m.push_back({"batond_fencing_high_water", "gauge",
               "Last fencing token handed out",
               double(const_cast<Server&>(s).table().fencing_high_water())});
  return m;
}
}  // namespace

std::string Server::info_text() const {
  auto& self = const_cast<Server&>(*this);
  auto metrics = collect(*this, self.table().stats(), stats_, journal_.get(),
                         connections_.size());
  std::ostringstream o;
  o << "# Server\r\nserver:batond\r\nversion:" << baton::version()
    << "\r\ntcp_port:" << port_ << "\r\nfsync:"
    << (config_.fsync == FsyncPolicy::always  ? "always"
        : config_.fsync == FsyncPolicy::batch ? "batch"
                                              : "never")
    << "\r\npersistence:" << (journal_ ? "on" : "off") << "\r\n# Stats\r\n";
  for (const auto& m : metrics) {
    std::string key = m.name + 7;  // drop "batond_"
    o << key << ':' << std::fixed;
    if (m.value == static_cast<double>(static_cast<long long>(m.value))) {
      o << static_cast<long long>(m.value);
    } else {
      o << m.value;
    }
    o << "\r\n";
  }
  return o.str();
}

std::string Server::metrics_text() const {
  auto& self = const_cast<Server&>(*this);
  auto metrics = collect(*this, self.table().stats(), stats_, journal_.get(),
                         connections_.size());
  std::ostringstream o;
  for (const auto& m : metrics) {
    o << "# HELP " << m.name << ' ' << m.help << "\n# TYPE " << m.name << ' '
      << m.type << '\n'
      << m.name << ' ' << m.value << '\n';
  }
  return o.str();
}

// With users configured, the user whose HTTP Basic credentials the
// request carries (docs/server.md, "Users and rules").
const User* Server::http_user(const std::string& request) {
  static constexpr std::string_view kHeader = "\r\nauthorization: basic ";
  std::string lower = request;
  for (char& ch : lower) {
    ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  }
  auto at = lower.find(kHeader);
  if (at == std::string::npos) {
    ++stats_.auth_failures;
    return nullptr;
  }
  at += kHeader.size();
  auto end = request.find("\r\n", at);
  std::string b64 = request.substr(at, end - at);
  while (!b64.empty() && b64.back() == ' ') b64.pop_back();
  std::string plain((b64.size() / 4 + 1) * 3, '\0');
  int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(plain.data()),
                          reinterpret_cast<const unsigned char*>(b64.data()),
                          static_cast<int>(b64.size()));
  if (n < 0) n = 0;
  plain.resize(static_cast<std::size_t>(n));
  while (!plain.empty() && plain.back() == '\0') plain.pop_back();  // padding
  auto colon = plain.find(':');
  const User* user =
      colon == std::string::npos
          ? nullptr
          : authenticate(config_.users, auth_cache_, plain.substr(0, colon),
                         plain.substr(colon + 1));
  OPENSSL_cleanse(plain.data(), plain.size());
  if (user == nullptr) ++stats_.auth_failures;
  return user;
}

// With users configured, /metrics needs HTTP Basic credentials of a user
// with admin on "" (docs/server.md, "Users and rules").
Server::Access Server::metrics_access(const std::string& request) {
  if (config_.users.empty()) return Access::allowed;
  const User* user = http_user(request);
  if (user == nullptr) return Access::unauthorized;
  if ((perms_on(*user, "") & kAdmin) == 0) {
    ++stats_.permission_denied;
    return Access::forbidden;
  }
  return Access::allowed;
}

namespace {
// Open HTTP connections at once; more are closed unanswered.
constexpr std::size_t kMaxHttpSessions = 256;
}  // namespace

asio::awaitable<void> Server::metrics_loop(asio::ip::tcp::acceptor& acceptor) {
  for (;;) {
    std::error_code ec;
    asio::ip::tcp::socket socket = co_await acceptor.async_accept(
        asio::redirect_error(asio::use_awaitable, ec));
    if (ec) {
      if (ec == asio::error::operation_aborted) co_return;
      continue;
    }
    if (http_sessions_ >= kMaxHttpSessions) {
      socket.close(ec);
      continue;
    }
    // One coroutine per connection: a status page stream stays open, and
    // a slow client delays nobody else.
    asio::co_spawn(io_,
                   http_session(std::make_shared<asio::ip::tcp::socket>(
                       std::move(socket))),
                   asio::detached);
  }
}

// GCC 12 reports a false -Wmismatched-new-delete on this coroutine's frame
// (asio's awaitable_frame_base pairs its own operator new and delete) once
// it arms a timer before its reads; silenced for this function only.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif
asio::awaitable<void> Server::http_session(
    std::shared_ptr<asio::ip::tcp::socket> sock) {
  ++http_sessions_;
  // One request per connection; its head must come within the timeout.
  const std::string req = co_await statuspage::read_request_head(io_, sock);
  if (req.empty()) {
    --http_sessions_;
    co_return;
  }
  const std::string_view target = statuspage::request_target(req);
  const std::string_view path = target.substr(0, target.find('?'));
  if (statuspage::is_page_path(path)) {
    co_await serve_status(sock, req, target);
    --http_sessions_;
    co_return;
  }
  std::string body, status = "200 OK", extra;
  const Access access = metrics_access(req);
  if (access == Access::unauthorized) {
    // Slowed like a failed AUTH (this connection only).
    asio::steady_timer t(io_, config_.auth_fail_delay);
    std::error_code tec;
    co_await t.async_wait(asio::redirect_error(asio::use_awaitable, tec));
    status = "401 Unauthorized";
    extra = "WWW-Authenticate: Basic realm=\"batond\"\r\n";
    body =
        "batond has users: send HTTP Basic credentials of a user with "
        "admin on the prefix \"\"\n";
  } else if (access == Access::forbidden) {
    status = "403 Forbidden";
    body = "this user has no admin permission on the prefix \"\"\n";
  } else if (path == "/metrics") {
    body = metrics_text();
  } else {
    status = "404 Not Found";
    body =
        "try /metrics, / (status page), /status.json, /events or "
        "/history.json\n";
  }
  std::string resp = "HTTP/1.1 " + status +
                     "\r\nContent-Type: text/plain; version=0.0.4\r\n" + extra +
                     "Content-Length: " + std::to_string(body.size()) +
                     "\r\nConnection: close\r\n\r\n" + body;
  std::error_code wec;
  co_await asio::async_write(*sock, asio::buffer(resp),
                             asio::redirect_error(asio::use_awaitable, wec));
  std::error_code sec;
  sock->shutdown(asio::ip::tcp::socket::shutdown_both, sec);
  --http_sessions_;
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

}  // namespace baton::server
