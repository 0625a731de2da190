#include "server/connection.h"

#include <spdlog/spdlog.h>

#include "proto/commands.h"

namespace baton::server {

namespace {
constexpr std::size_t kMaxPendingRequests = 4096;
constexpr std::size_t kMaxOutputBytes = 64u << 20;
}  // namespace

Connection::Connection(Server& server, asio::ip::tcp::socket socket,
                       core::SessionId session)
    : server_(server),
      socket_(std::move(socket)),
      session_(session),
      parser_(proto::ProtoLimits{server.config().max_request_bytes,
                                 server.config().max_args}),
      authed_(server.config().requirepass.empty()) {}

void Connection::start() {
  asio::co_spawn(socket_.get_executor(), read_loop(), asio::detached);
}

// Reads with async_read_some (Asio tries a non-blocking recv first and
// waits for readiness only if nothing is there). Every request read in one
// go is executed, then the replies staged meanwhile go out in one write.
// (Waiting with async_wait(wait_read) instead saves the recv that finds
// nothing, but Asio re-arms epoll with an epoll_ctl for every such wait,
// which measured slower with 50 clients; see docs/bench/batond.md.)
asio::awaitable<void> Connection::read_loop() {
  auto self = shared_from_this();
  std::vector<char> buf(16 * 1024);
  while (!closed_) {
    std::error_code ec;
    std::size_t n = co_await socket_.async_read_some(
        asio::buffer(buf), asio::redirect_error(asio::use_awaitable, ec));
    if (ec || closed_) break;
    if (close_after_flush_) continue;  // discard input after a fatal error
    in_batch_ = true;
    parser_.feed(buf.data(), n);
    for (;;) {
      proto::Request req;
      std::string message;
      auto st = parser_.next(&req, &message);
      if (st == proto::RequestParser::State::need_more) break;
      if (st == proto::RequestParser::State::error) {
        ++server_.stats().protocol_errors;
        spdlog::debug("session {}: protocol error: {}", session_, message);
        // Answer in order (after what is queued), then close.
        pending_.clear();
        std::string out;
        proto::RespWriter(out).error(message);
        reply(std::move(out));
        close_after_flush_ = true;
        break;
      }
      if (pending_.size() >= kMaxPendingRequests) {
        std::string out;
        proto::RespWriter(out).error(
            "invalid_argument too many pipelined requests behind a blocking "
            "one");
        reply(std::move(out));
        close_after_flush_ = true;
        break;
      }
      pending_.push_back(std::move(req));
    }
    process_pending();
    in_batch_ = false;
    flush();
  }
  close();
}

void Connection::process_pending() {
  while (!parked_ && !closed_ && !close_after_flush_ && !pending_.empty()) {
    proto::Request req = std::move(pending_.front());
    pending_.pop_front();
    ++server_.stats().commands;
    execute(req);
  }
}

void Connection::reply(std::string bytes,
                       std::vector<std::pair<std::string, OwnerToken>> grants,
                       bool durable) {
  if (closed_) {
    return;
  }
  const std::uint64_t seq = durable ? server_.reply_seq() : 0;
  if (staged_.empty() && seq <= server_.durable_seq()) {
    // Nothing to wait for: straight to the output buffer, written when the
    // current batch ends (or now, outside a batch).
    out_ += bytes;
    if (!in_batch_) flush();
    return;
  }
  staged_.push_back(Staged{seq, std::move(bytes), std::move(grants)});
  server_.stage_pending(shared_from_this());
}

void Connection::complete_parked(
    std::uint64_t id, std::string bytes,
    std::vector<std::pair<std::string, OwnerToken>> grants) {
  if (closed_ || !parked_ || id != park_id_) return;
  parked_ = false;
  reply(std::move(bytes), std::move(grants));
  // Resume later requests outside the caller's event loop.
  asio::post(socket_.get_executor(),
             [self = shared_from_this()] { self->process_pending(); });
}

void Connection::release(std::uint64_t durable_seq, bool failed,
                         const std::string& failure) {
  while (!staged_.empty()) {
    Staged& s = staged_.front();
    if (s.seq <= durable_seq) {
      out_ += s.bytes;
    } else if (failed) {
      for (const auto& [name, token] : s.grants) {
        (void)server_.table().release(name, token);
        ++server_.stats().undone_grants;
      }
      std::string err;
      proto::RespWriter(err).error("unavailable persistence failed (" +
                                   failure + "); the change was not kept");
      out_ += err;
    } else {
      break;
    }
    staged_.pop_front();
  }
  flush();
}

void Connection::flush() {
  if (closed_ || write_in_flight_) return;
  if (out_.empty()) {
    if (close_after_flush_ && staged_.empty()) close();
    return;
  }
  if (out_.size() > kMaxOutputBytes) {
    spdlog::warn("session {}: client does not read its replies; closing",
                 session_);
    close();
    return;
  }
  writing_.swap(out_);
  out_.clear();
  write_in_flight_ = true;
  asio::async_write(
      socket_, asio::buffer(writing_),
      [self = shared_from_this()](std::error_code ec, std::size_t) {
        self->write_in_flight_ = false;
        self->writing_.clear();
        if (ec) {
          self->close();
          return;
        }
        self->flush();
      });
}

void Connection::close() {
  if (closed_) return;
  closed_ = true;
  std::error_code ec;
  socket_.shutdown(asio::ip::tcp::socket::shutdown_both, ec);
  socket_.close(ec);
  pending_.clear();
  parked_ = false;
  server_.connection_closed(shared_from_this(), had_ephemeral_);
}

void Connection::reply_error(Errc code, std::string_view message) {
  ++server_.stats().errors;
  std::string out;
  proto::RespWriter w(out);
  proto::write_error(w, Error(code, std::string(message)));
  reply(std::move(out));
}

}  // namespace baton::server
