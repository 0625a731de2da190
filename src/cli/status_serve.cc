// cli/status_serve.cc — `baton status --serve`: batond's live status page
// (src/statuspage/) for any store. One poll thread asks the store for its
// locks (Client::list) whenever the store's change feed (Store::watch) says
// something under the prefix changed — no sooner than 150 ms after the last
// read — and at least every --interval; every --interval where the store
// has no feed. The next read starts only once the previous one answered; its
// result is handed to the io thread, which owns everything else: the snapshot,
// the history derived from successive polls (statuspage::PollDiff), the HTTP
// listener and the event streams. Read-only: nothing is ever written to the
// store.
#include "cli/status_serve.h"

#include <asio.hpp>
#include <condition_variable>
#include <iostream>
#include <mutex>
#include <thread>

#include "baton/store.h"
#include "statuspage/status_page.h"

namespace baton::cli {

namespace sp = statuspage;

namespace {

// Open HTTP connections at once; more are closed unanswered.
constexpr std::size_t kMaxHttpSessions = 256;
// With a change feed: the least time between two reads of the store.
constexpr auto kMinReadGap = std::chrono::milliseconds(150);

bool loopback_host(std::string host) {
  if (!host.empty() && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  if (host == "localhost") return true;
  std::error_code ec;
  const auto addr = asio::ip::make_address(host, ec);
  return !ec && addr.is_loopback();
}

// "host:port" (IPv6 in brackets) split; false if malformed.
bool split_host_port(const std::string& text, std::string& host,
                     std::string& port) {
  const auto colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size()) {
    return false;
  }
  host = text.substr(0, colon);
  port = text.substr(colon + 1);
  if (host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  return port.find_first_not_of("0123456789") == std::string::npos;
}

class PageServer {
 public:
  PageServer(const Globals& globals, const Client& client,
             const ServeOptions& o)
      : globals_(globals),
        client_(client),
        options_(o),
        acceptor_(io_),
        signals_(io_, SIGINT, SIGTERM),
        history_(o.history_size, o.history_window),
        hub_(
            io_,
            [this](const std::string& prefix, const void*) {
              return snapshot_json(prefix);
            },
            [this] { return version_; }) {}

  int run();

 private:
  void poll_loop();
  void apply(Result<std::vector<LockInfo>> locks, std::int64_t at_ms);
  std::string snapshot_json(std::string_view prefix) const;
  asio::awaitable<void> accept_loop();
  asio::awaitable<void> session(std::shared_ptr<asio::ip::tcp::socket> sock);
  void stop();

  const Globals& globals_;
  const Client& client_;
  const ServeOptions options_;
  asio::io_context io_;
  asio::ip::tcp::acceptor acceptor_;
  asio::signal_set signals_;
  // io thread only:
  std::vector<LockInfo> locks_;
  std::int64_t polled_at_ms_ = 0;
  std::string store_error_;
  std::uint64_t version_ = 0;
  sp::History history_;
  sp::PollDiff diff_;
  sp::StreamHub hub_;
  std::size_t sessions_ = 0;
  bool fed_by_push_ = false;  // the last read followed the store's feed
  // Poll thread stop.
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  Waitable* feed_ = nullptr;  // the poll thread's feed (guarded by mu_)
};

void PageServer::poll_loop() {
  // The feed: armed once (and again after the store answered an error),
  // never again once the store said it has none.
  std::unique_ptr<Waitable> feed;
  bool no_feed = !options_.push;
  auto arm_after = std::chrono::steady_clock::now();
  for (;;) {
    const auto started = std::chrono::steady_clock::now();
    if (!feed && !no_feed && started >= arm_after) {
      auto f = client_.watch(options_.prefix);
      if (!f) {
        arm_after = started + options_.interval;  // the store is down
      } else if (*f == nullptr) {
        no_feed = true;
      } else {
        std::lock_guard lk(mu_);
        feed = std::move(*f);
        feed_ = feed.get();
      }
    }
    // At most kMaxLocks + 1: the page shows kMaxLocks and says "more".
    auto locks = client_.list(options_.prefix, sp::kMaxLocks + 1);
    if (!locks && feed) {
      // Arm a new feed once the store answers again.
      std::lock_guard lk(mu_);
      feed_ = nullptr;
      feed.reset();
      arm_after = started + options_.interval;
    }
    const std::int64_t at = sp::wall_ms();
    const bool pushed = feed != nullptr;
    asio::post(io_, [this, l = std::move(locks), at, pushed]() mutable {
      fed_by_push_ = pushed;
      apply(std::move(l), at);
    });
    if (feed) {
      // Until a change under the prefix, or --interval (a change the feed
      // missed, a ticking figure): then no sooner than kMinReadGap after
      // this read, so that a busy store is read at most ~7 times a second.
      {
        std::lock_guard lk(mu_);
        if (stopping_) {
          feed_ = nullptr;  // destroyed on return, after the lock
          return;
        }
      }
      const auto now = Clock::steady()->now();
      const auto until = now + (started + options_.interval -
                                std::chrono::steady_clock::now());
      (void)feed->wait_change(
          until,
          CallContext(until + std::chrono::seconds(10), {}, Clock::steady()));
    }
    std::unique_lock lk(mu_);
    const auto next =
        feed ? started + kMinReadGap : started + options_.interval;
    if (cv_.wait_until(lk, next, [this] { return stopping_; })) {
      feed_ = nullptr;
      return;
    }
  }
}

void PageServer::apply(Result<std::vector<LockInfo>> locks,
                       std::int64_t at_ms) {
  if (locks) {
    diff_.next(*locks, at_ms, history_);
    locks_ = std::move(*locks);
    polled_at_ms_ = at_ms;
    store_error_.clear();
  } else {
    // The last snapshot stays, flagged; no history is derived from a gap.
    store_error_ = locks.error().to_string();
  }
  ++version_;
  hub_.changed();
}

std::string PageServer::snapshot_json(std::string_view prefix) const {
  // The figures as of now, not as of the poll.
  const std::int64_t age =
      std::max<std::int64_t>(0, sp::wall_ms() - polled_at_ms_);
  std::vector<LockInfo> locks = locks_;
  for (LockInfo& l : locks) {
    for (HolderInfo& h : l.holders) {
      h.time_left = std::max(std::chrono::milliseconds(0),
                             h.time_left - std::chrono::milliseconds(age));
    }
    for (WaiterInfo& w : l.waiters) w.waited += std::chrono::milliseconds(age);
  }
  std::string o = "{\"source\":";
  sp::json_str(o, describe_store(globals_.store));
  o += ",\"prefix\":";
  sp::json_str(o, prefix);
  o += ',';
  sp::locks_json(o, locks, prefix, {});
  // Client::list has no counters: none are shown.
  o += ",\"counters\":null,\"poll_interval_ms\":" +
       std::to_string(options_.interval.count());
  o += fed_by_push_ ? ",\"fed_by\":\"push\"" : ",\"fed_by\":\"poll\"";
  if (!store_error_.empty()) {
    o += ",\"store_error\":";
    sp::json_str(o, store_error_);
  }
  o += '}';
  return o;
}

asio::awaitable<void> PageServer::accept_loop() {
  for (;;) {
    std::error_code ec;
    asio::ip::tcp::socket socket = co_await acceptor_.async_accept(
        asio::redirect_error(asio::use_awaitable, ec));
    if (ec) {
      if (ec == asio::error::operation_aborted || !acceptor_.is_open()) {
        co_return;
      }
      continue;
    }
    if (sessions_ >= kMaxHttpSessions) {
      socket.close(ec);
      continue;
    }
    asio::co_spawn(
        io_,
        session(std::make_shared<asio::ip::tcp::socket>(std::move(socket))),
        asio::detached);
  }
}

asio::awaitable<void> PageServer::session(
    std::shared_ptr<asio::ip::tcp::socket> sock) {
  ++sessions_;
  const std::string head = co_await sp::read_request_head(io_, sock);
  const std::string_view target = sp::request_target(head);
  const auto q = target.find('?');
  const std::string_view path = target.substr(0, q);
  sp::Query query;
  std::string answer, bad;
  if (!head.empty() && sp::is_page_path(path)) {
    bad = sp::parse_query(
        path,
        q == std::string_view::npos ? std::string_view() : target.substr(q + 1),
        query);
  }
  if (head.empty()) {
    --sessions_;
    co_return;
  } else if (!sp::is_page_path(path)) {
    answer = sp::http_text(
        "404 Not Found", "text/plain; charset=utf-8",
        "try / (status page), /status.json, /events or /history.json\n");
  } else if (!bad.empty()) {
    answer = sp::http_text("400 Bad Request", "text/plain; charset=utf-8",
                           bad + "\n");
  } else if (path == "/status.json") {
    answer = sp::http_text(
        "200 OK", "application/json",
        "{\"server_time_ms\":" + std::to_string(sp::wall_ms()) +
            ",\"user\":null,\"snapshot\":" + snapshot_json(query.prefix) +
            "}\n");
  } else if (path == "/history.json") {
    answer = sp::http_text("200 OK", "application/json",
                           history_.json(query, sp::wall_ms(), {}));
  } else if (path == "/events") {
    if (hub_.full()) {
      answer =
          sp::http_text("503 Service Unavailable", "text/plain; charset=utf-8",
                        "too many status streams open (" +
                            std::to_string(sp::kMaxStreams) + "); try later\n");
    } else {
      co_await hub_.run(sock, query.prefix, nullptr);
      --sessions_;
      co_return;
    }
  } else {
    answer = sp::http_text("200 OK", "text/html; charset=utf-8",
                           sp::page_html(), sp::page_csp_header());
  }
  std::error_code ec;
  co_await asio::async_write(*sock, asio::buffer(answer),
                             asio::redirect_error(asio::use_awaitable, ec));
  sock->shutdown(asio::ip::tcp::socket::shutdown_both, ec);
  --sessions_;
}

void PageServer::stop() {
  std::error_code ec;
  acceptor_.close(ec);
  hub_.close_all();
  {
    std::lock_guard lk(mu_);
    stopping_ = true;
    if (feed_ != nullptr) feed_->interrupt();
  }
  cv_.notify_all();
  io_.stop();
}

int PageServer::run() {
  std::string host, port;
  split_host_port(options_.listen, host, port);
  std::error_code ec;
  asio::ip::tcp::resolver resolver(io_);
  auto eps = resolver.resolve(host, port, ec);
  if (!ec && eps.empty()) ec = asio::error::host_not_found;
  if (!ec) {
    const auto ep = eps.begin()->endpoint();
    acceptor_.open(ep.protocol(), ec);
    if (!ec) acceptor_.set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec) acceptor_.bind(ep, ec);
    if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
  }
  if (ec) {
    return report(Errc::unavailable,
                  "cannot serve on " + options_.listen + ": " + ec.message());
  }
  const auto bound = acceptor_.local_endpoint();
  std::cerr << "baton: serving the status page of "
            << describe_store(globals_.store) << " on http://"
            << (bound.address().is_v6()
                    ? "[" + bound.address().to_string() + "]"
                    : bound.address().to_string())
            << ':' << bound.port() << "/ ("
            << (options_.push ? "on the store's changes where it has a feed, "
                                "else "
                              : "")
            << "polling every " << options_.interval.count()
            << "ms; Ctrl-C to stop)" << std::endl;
  signals_.async_wait([this](std::error_code e, int) {
    if (!e) stop();
  });
  asio::co_spawn(io_, accept_loop(), asio::detached);
  std::thread poller([this] { poll_loop(); });
  io_.run();
  {
    std::lock_guard lk(mu_);
    stopping_ = true;
    if (feed_ != nullptr) feed_->interrupt();
  }
  cv_.notify_all();
  poller.join();
  return kExitOk;
}

}  // namespace

std::string check_serve_address(const std::string& listen, bool serve_public) {
  std::string host, port;
  if (!split_host_port(listen, host, port)) {
    return "--serve " + listen + ": expected host:port (e.g. 127.0.0.1:9000)";
  }
  if (!serve_public && !loopback_host(host)) {
    return "refusing to serve the status page on non-loopback address " +
           listen +
           ": it shows every lock and holder label to whoever connects "
           "(no authentication); add --serve-public to allow it";
  }
  return {};
}

int serve_status_page(const Globals& globals, const Client& client,
                      const ServeOptions& options) {
  PageServer server(globals, client, options);
  return server.run();
}

}  // namespace baton::cli
