// cli/status_history.cc — `baton status --history LOCK [--from URL]`: the
// history a page server (batond's metrics listener, or `baton status
// --serve`) recorded for one lock, read from its /history.json, or, on
// baton:// without --from, from batond itself (LOCK.HISTORY, the same
// document). The page server, not the store, is where history lives: only
// it saw the lock change over time (batond at each change, --serve at each
// poll).
#include "cli/status_history.h"

#include <sys/socket.h>
#include <sys/time.h>

#include <asio.hpp>
#include <ctime>
#include <iostream>

#include "baton/store_descriptor.h"
#include "cli/status_serve.h"
#include "statuspage/status_page.h"

namespace baton::cli {

namespace {

std::string percent_encode(std::string_view s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' ||
        c == '/') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

// GET `target` from http://host:port; the body of a 200, else an error
// naming the status and the server's message.
Result<std::string> http_get(const std::string& from, const std::string& target,
                             std::chrono::milliseconds timeout) {
  std::string_view rest = from;
  if (rest.rfind("http://", 0) != 0) {
    return Error(Errc::invalid_argument,
                 "--from " + from +
                     ": expected http://host:port (a batond metrics listener "
                     "or a `baton status --serve` address)");
  }
  rest.remove_prefix(7);
  rest = rest.substr(0, rest.find('/'));
  const auto colon = rest.rfind(':');
  if (colon == std::string_view::npos || colon == 0) {
    return Error(Errc::invalid_argument, "--from " + from + ": no port");
  }
  std::string host(rest.substr(0, colon));
  if (host.size() > 2 && host.front() == '[')
    host = host.substr(1, host.size() - 2);
  const std::string port(rest.substr(colon + 1));
  asio::io_context io;
  asio::ip::tcp::socket sock(io);
  std::error_code ec;
  asio::ip::tcp::resolver resolver(io);
  auto eps = resolver.resolve(host, port, ec);
  if (!ec) asio::connect(sock, eps, ec);
  if (ec) {
    return Error(Errc::unavailable,
                 "cannot reach " + from + ": " + ec.message());
  }
  timeval tv{static_cast<time_t>(timeout.count() / 1000),
             static_cast<suseconds_t>(timeout.count() % 1000 * 1000)};
  ::setsockopt(sock.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(sock.native_handle(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  const std::string req = "GET " + target +
                          " HTTP/1.1\r\nHost: " + std::string(rest) +
                          "\r\nConnection: close\r\n\r\n";
  asio::write(sock, asio::buffer(req), ec);
  std::string resp;
  char buf[8192];
  while (!ec && resp.size() < (64u << 20)) {
    const std::size_t n = sock.read_some(asio::buffer(buf), ec);
    resp.append(buf, n);
  }
  if (ec && ec != asio::error::eof) {
    return Error(Errc::unavailable,
                 "reading from " + from + ": " + ec.message());
  }
  const auto head_end = resp.find("\r\n\r\n");
  if (resp.rfind("HTTP/1.", 0) != 0 || head_end == std::string::npos) {
    return Error(Errc::unavailable, from + " did not answer HTTP");
  }
  std::string status = resp.substr(9, resp.find("\r\n") - 9);
  std::string body = resp.substr(head_end + 4);
  if (status.rfind("200", 0) != 0) {
    while (!body.empty() && body.back() == '\n') body.pop_back();
    const Errc code =
        status.rfind("400", 0) == 0 ? Errc::invalid_argument
        : status.rfind("401", 0) == 0 || status.rfind("403", 0) == 0
            ? Errc::permission_denied
            : Errc::unavailable;
    return Error(code, from + " answered " + status + ": " + body);
  }
  return body;
}

std::string utc(std::int64_t ms) {
  const std::time_t secs = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  ::gmtime_r(&secs, &tm);
  char buf[40];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  char out[48];
  std::snprintf(out, sizeof out, "%s.%03dZ", buf, static_cast<int>(ms % 1000));
  return out;
}

}  // namespace

// Prints a /history.json document `body` read from `from`.
int show_history(const std::string& from, const Result<std::string>& body,
                 const std::string& lock, bool json) {
  if (!body) return report(body.error());
  if (json) {
    std::cout << *body;
    if (!body->empty() && body->back() != '\n') std::cout << '\n';
    return kExitOk;
  }
  statuspage::ParsedHistory h;
  if (std::string bad = statuspage::parse_history(*body, h); !bad.empty()) {
    return report(Errc::unavailable,
                  from + " answered something else than a history: " + bad);
  }
  std::cout << "history of " << lock << " (window "
            << format_human(std::chrono::milliseconds(h.window_ms)) << ", "
            << h.events.size() << " events"
            << (h.dropped > 0 ? ", oldest dropped" : "") << ")\n";
  if (h.events.empty()) {
    std::cout << "nothing recorded in the window\n";
    return kExitOk;
  }
  std::cout << "TIME (UTC)                EVENT    FENCING  HOLDER / WAITER\n";
  for (const auto& e : h.events) {
    std::string kind(statuspage::kind_name(e.kind));
    std::string fencing = e.kind == statuspage::HistoryEvent::Kind::wait
                              ? "-"
                              : std::to_string(e.fencing_token);
    std::string who = e.label.empty() ? "?" : e.label;
    if (e.shared) who += " (shared)";
    if (e.kind == statuspage::HistoryEvent::Kind::wait) {
      who += " (waited " +
             format_human(std::chrono::milliseconds(e.end_ms - e.at_ms)) + ")";
    }
    kind.resize(8, ' ');
    fencing.resize(std::max<std::size_t>(fencing.size(), 8), ' ');
    std::cout << utc(e.at_ms) << "  " << kind << ' ' << fencing << ' ' << who
              << '\n';
  }
  return kExitOk;
}

int print_history(const std::string& from, const std::string& lock, bool json,
                  std::chrono::milliseconds timeout) {
  return show_history(
      from,
      http_get(from, "/history.json?lock=" + percent_encode(lock), timeout),
      lock, json);
}

int print_store_history(const Globals& globals, const std::string& lock,
                        bool json) {
  StoreDeadline bound(globals, std::chrono::milliseconds::zero());
  auto store = open_store(globals.store);
  if (!store) return report(store.error());
  const CallContext ctx(Clock::steady()->now() + globals.timeout);
  auto body = (*store)->history(lock, ctx);
  if (!body && body.error().code() == Errc::invalid_argument &&
      body.error().message().find("unknown command") != std::string::npos) {
    return report(Errc::unsupported,
                  describe_store(globals.store) +
                      " is older than LOCK.HISTORY: give --from "
                      "http://<its metrics listener>");
  }
  if (!body && body.error().code() == Errc::unsupported) {
    return report(Errc::invalid_argument,
                  "--history without --from reads batond's own history "
                  "(baton:// stores); for " +
                      describe_store(globals.store) +
                      " give --from http://<a baton status --serve address>");
  }
  return show_history(describe_store(globals.store), body, lock, json);
}

}  // namespace baton::cli
