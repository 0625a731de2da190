// The server-sent event streams of the status page and the reading of a
// request head (statuspage/status_page.h).
#include <spdlog/spdlog.h>

#include <algorithm>

#include "statuspage/status_page.h"

namespace baton::statuspage {

struct StreamHub::Stream {
  std::shared_ptr<asio::ip::tcp::socket> socket;
  std::string prefix;
  const void* viewer = nullptr;
  std::string last_shape;  // without_times() of the last snapshot sent
  std::string writing;     // the bytes of the write in flight
  std::string queued;      // sent when that write completes
  bool in_flight = false;
  bool closed = false;
  std::chrono::steady_clock::time_point write_started{};
};

StreamHub::StreamHub(
    asio::io_context& io,
    std::function<std::string(const std::string&, const void*)> build,
    std::function<std::uint64_t()> version, std::function<void()> after_push)
    : io_(io),
      build_(std::move(build)),
      version_(std::move(version)),
      after_push_(std::move(after_push)),
      push_timer_(io),
      heartbeat_timer_(io) {}

StreamHub::~StreamHub() { close_all(); }

void StreamHub::close_all() {
  for (auto st : std::vector(streams_)) drop(st);
  push_timer_.cancel();
  heartbeat_timer_.cancel();
}

// GCC 12 reports a false -Wmismatched-new-delete on asio's coroutine
// frames (awaitable_frame_base pairs its own operator new and delete).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif
asio::awaitable<void> StreamHub::run(
    std::shared_ptr<asio::ip::tcp::socket> sock, std::string prefix,
    const void* viewer) {
  auto st = std::make_shared<Stream>();
  st->socket = sock;
  st->prefix = std::move(prefix);
  st->viewer = viewer;
  streams_.push_back(st);
  send(st,
       "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
       "Cache-Control: no-store\r\nConnection: keep-alive\r\n"
       "X-Accel-Buffering: no\r\n\r\nretry: 2000\n\n",
       false);
  // The first snapshot at once (last_push_ untouched).
  std::string body = build_(st->prefix, viewer);
  st->last_shape = without_times(body);
  send(st,
       "data: {\"server_time_ms\":" + std::to_string(wall_ms()) +
           ",\"snapshot\":" + body + "}\n\n",
       true);
  if (after_push_) after_push_();
  arm_heartbeat();
  // Reads until the peer goes (or the stream is dropped): what it sends is
  // ignored.
  char buf[512];
  std::error_code ec;
  while (!st->closed) {
    co_await sock->async_read_some(
        asio::buffer(buf), asio::redirect_error(asio::use_awaitable, ec));
    if (ec) break;
  }
  drop(st);
}

asio::awaitable<std::string> read_request_head(
    asio::io_context& io, std::shared_ptr<asio::ip::tcp::socket> sock) {
  // The head must come within the timeout: the socket is closed then.
  asio::steady_timer timer(io, std::chrono::seconds(10));
  timer.async_wait([sock](std::error_code ec) {
    if (!ec) sock->close(ec);
  });
  std::string req;
  char buf[1024];
  while (req.find("\r\n\r\n") == std::string::npos && req.size() < 8192) {
    std::error_code rec;
    std::size_t n = co_await sock->async_read_some(
        asio::buffer(buf), asio::redirect_error(asio::use_awaitable, rec));
    if (rec) break;
    req.append(buf, n);
  }
  timer.cancel();
  if (!sock->is_open()) req.clear();
  co_return req;
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

void StreamHub::send(const std::shared_ptr<Stream>& st, std::string msg,
                     bool snapshot) {
  if (st->closed) return;
  if (st->in_flight) {
    if (std::chrono::steady_clock::now() - st->write_started > kStall) {
      spdlog::info("status stream dropped: its client reads nothing");
      drop(st);
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
                        drop(st);
                        return;
                      }
                      if (!st->queued.empty()) {
                        std::string next = std::move(st->queued);
                        st->queued.clear();
                        send(st, std::move(next), true);
                      }
                    });
}

void StreamHub::drop(const std::shared_ptr<Stream>& st) {
  if (!st->closed) {
    st->closed = true;
    std::error_code ec;
    st->socket->shutdown(asio::ip::tcp::socket::shutdown_both, ec);
    st->socket->close(ec);
  }
  std::erase(streams_, st);
}

void StreamHub::changed() {
  if (streams_.empty() || push_armed_ || version_() == pushed_version_) {
    return;
  }
  push_armed_ = true;
  push_timer_.expires_at(
      std::max(std::chrono::steady_clock::now(), last_push_ + kPushInterval));
  push_timer_.async_wait([this](std::error_code ec) {
    push_armed_ = false;
    if (!ec) push();
  });
}

void StreamHub::push() {
  last_push_ = std::chrono::steady_clock::now();
  const std::string now = std::to_string(wall_ms());
  struct Built {
    std::string json, shape;
  };
  std::map<std::pair<std::string, const void*>, Built> built;
  for (auto st : std::vector(streams_)) {
    auto [it, fresh] = built.try_emplace({st->prefix, st->viewer});
    if (fresh) {
      it->second.json = build_(st->prefix, st->viewer);
      it->second.shape = without_times(it->second.json);
    }
    // Nothing it shows moved (a change under another prefix).
    if (it->second.shape == st->last_shape) continue;
    st->last_shape = it->second.shape;
    send(st,
         "data: {\"server_time_ms\":" + now +
             ",\"snapshot\":" + it->second.json + "}\n\n",
         true);
  }
  // The version as the builds left it (batond's list() processes what was
  // due, which may move it).
  pushed_version_ = version_();
  if (after_push_) after_push_();
}

void StreamHub::arm_heartbeat() {
  if (heartbeat_armed_ || streams_.empty()) return;
  heartbeat_armed_ = true;
  heartbeat_timer_.expires_after(kHeartbeat);
  heartbeat_timer_.async_wait([this](std::error_code ec) {
    heartbeat_armed_ = false;
    if (ec) return;
    for (auto st : std::vector(streams_)) send(st, ": keep-alive\n\n", false);
    changed();  // a change no caller reported
    arm_heartbeat();
  });
}

}  // namespace baton::statuspage
