#include "server/connection.h"

#include <poll.h>
#include <spdlog/spdlog.h>
#include <strings.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "core/validate.h"
#include "proto/commands.h"

namespace baton::server {

namespace {
constexpr std::size_t kMaxPendingRequests = 4096;
// What one connection may hold in batond (unsent replies + queued requests).
constexpr std::size_t kMaxHeldBytes = 64u << 20;
// Output is written in chunks of about this size while a backlog builds
// up; buffers larger than this are freed once written, not kept.
constexpr std::size_t kChunkBytes = 256u << 10;
constexpr std::size_t kKeepBufferBytes = kChunkBytes;
// A TLS client has this long to finish its handshake.
constexpr auto kHandshakeTimeout = std::chrono::seconds(10);

// Memory a queued request takes (its strings and their headers).
std::size_t request_bytes(const proto::Request& req) {
  std::size_t n = sizeof(proto::Request);
  for (const auto& a : req) n += sizeof(std::string) + a.size();
  return n;
}

void drop_buffer(std::string& s) {
  if (s.capacity() > kKeepBufferBytes) {
    std::string().swap(s);
  } else {
    s.clear();
  }
}
}  // namespace

Connection::Connection(Server& server, asio::ip::tcp::socket socket,
                       core::SessionId session, asio::ssl::context* tls)
    : server_(server),
      socket_(std::move(socket)),
      tls_(tls != nullptr
               ? std::make_unique<asio::ssl::stream<asio::ip::tcp::socket&>>(
                     socket_, *tls)
               : nullptr),
      session_(session),
      parser_(proto::ProtoLimits{server.config().max_request_bytes,
                                 server.config().max_args}),
      authed_(server.config().requirepass.empty() &&
              server.config().users.empty()) {}

void Connection::start() {
  asio::co_spawn(socket_.get_executor(), read_loop(), asio::detached);
}

std::string Connection::peer_name() const {
  std::error_code ec;
  auto ep = socket_.remote_endpoint(ec);
  if (ec) return "?";
  return ep.address().to_string() + ":" + std::to_string(ep.port());
}

asio::awaitable<bool> Connection::tls_handshake() {
  const std::string peer = peer_name();
  // A plain-text client on the TLS port: its first byte is not a TLS
  // handshake record (0x16). Tell it in plain RESP, log it, close.
  std::error_code ec;
  asio::steady_timer timer(socket_.get_executor(), kHandshakeTimeout);
  auto timed_out = std::make_shared<bool>(false);
  timer.async_wait([self = shared_from_this(), timed_out](std::error_code tec) {
    if (tec || self->closed_) return;
    *timed_out = true;
    std::error_code cec;
    self->socket_.cancel(cec);
  });
  co_await socket_.async_wait(asio::socket_base::wait_read,
                              asio::redirect_error(asio::use_awaitable, ec));
  unsigned char first = 0;
  if (!ec && ::recv(socket_.native_handle(), &first, 1, MSG_PEEK) == 1 &&
      first != 0x16) {
    timer.cancel();
    spdlog::warn(
        "session {}: TLS handshake from {} on {} failed: the client speaks "
        "plain text, not TLS (first byte 0x{:02x}); closing",
        session_, peer, server_.config().tls_listen, first);
    std::string err =
        "-unavailable this is batond's TLS port: connect with TLS "
        "(batons://), or use the plain port\r\n";
    std::error_code wec;
    asio::write(socket_, asio::buffer(err), wec);
    co_return false;
  }
  if (!ec) {
    co_await tls_->async_handshake(
        asio::ssl::stream_base::server,
        asio::redirect_error(asio::use_awaitable, ec));
  }
  timer.cancel();
  if (ec || closed_) {
    spdlog::warn("session {}: TLS handshake from {} on {} failed: {}", session_,
                 peer, server_.config().tls_listen,
                 *timed_out ? std::string("no handshake within 10s")
                            : tls_failure(ec, tls_->native_handle()));
    co_return false;
  }
  co_return true;
}

bool Connection::tls_on_plain_port(const char* data, std::size_t n) {
  if (n == 0 || static_cast<unsigned char>(data[0]) != 0x16) return false;
  spdlog::warn(
      "session {}: a TLS handshake from {} on the plain-text listener {}; "
      "TLS clients must use tls_listen{}; closing",
      session_, peer_name(), server_.config().listen,
      server_.config().tls_listen.empty() ? " (not configured)" : "");
  std::string err =
      "-unavailable this is batond's plain-text port, not TLS\r\n";
  std::error_code wec;
  asio::write(socket_, asio::buffer(err), wec);
  return true;
}

// Reads with async_read_some (Asio tries a non-blocking recv first and
// waits for readiness only if nothing is there). Every request read in one
// go is executed, then the replies staged meanwhile go out in one write.
// (Waiting with async_wait(wait_read) instead saves the recv that finds
// nothing, but Asio re-arms epoll with an epoll_ctl for every such wait,
// which measured slower with 50 clients; see docs/bench/batond.md.)
asio::awaitable<void> Connection::read_loop() {
  auto self = shared_from_this();
  if (tls_ && !co_await tls_handshake()) {
    close();
    co_return;
  }
  if (tls_ && !authed_) {
    // A client certificate may name a user (users.<name>.client_cert_cn).
    const std::string cn = peer_common_name(tls_->native_handle());
    for (const auto& u : server_.config().users) {
      if (!cn.empty() && u.client_cert_cn == cn) {
        authed_ = true;
        user_ = &u;
      }
    }
  }
  std::vector<char> buf(16 * 1024);
  while (!closed_) {
    std::error_code ec;
    std::size_t n = tls_ ? co_await tls_->async_read_some(
                               asio::buffer(buf),
                               asio::redirect_error(asio::use_awaitable, ec))
                         : co_await socket_.async_read_some(
                               asio::buffer(buf),
                               asio::redirect_error(asio::use_awaitable, ec));
    if (ec || closed_) break;
    if (first_read_) {
      first_read_ = false;
      if (!tls_ && tls_on_plain_port(buf.data(), n)) break;
    }
    if (close_after_flush_) continue;  // discard input after a fatal error
    in_batch_ = true;
    peer_checked_ = false;
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
        pending_bytes_ = 0;
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
      const std::size_t size = request_bytes(req);
      if (held_bytes() + size > kMaxHeldBytes) {
        cut_off("requests queued behind a blocking one");
        break;
      }
      pending_bytes_ += size;
      pending_.push_back(std::move(req));
      note_held();
    }
    process_pending();
    in_batch_ = false;
    flush();
  }
  close();
}

bool Connection::grants_locks(const proto::Request& req) {
  // LOCK.ACQUIRE, LOCK.ACQUIRE_SOME, LOCK.ACQUIRE_ALL (any case); another
  // name with this prefix is an unknown command, which changes nothing.
  return req[0].size() >= 12 &&
         ::strncasecmp(req[0].data(), "LOCK.ACQUIRE", 12) == 0;
}

bool Connection::peer_closed() {
  if (peer_gone_ || closed_) return true;
  if (in_batch_ && peer_checked_) return false;
  peer_checked_ = in_batch_;
  pollfd p{};
  p.fd = socket_.native_handle();
  p.events = POLLRDHUP;
  if (::poll(&p, 1, 0) == 1 &&
      (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0) {
    peer_gone_ = true;
  }
  return peer_gone_;
}

void Connection::process_pending() {
  while (!parked_ && !closed_ && !close_after_flush_ && !pending_.empty()) {
    proto::Request req = std::move(pending_.front());
    pending_.pop_front();
    pending_bytes_ -= request_bytes(req);
    // A client that has already gone is granted nothing: one poll per batch
    // that contains an acquire (docs/server.md, "Clients that leave").
    if (grants_locks(req) && peer_closed()) {
      ++dropped_;
      continue;
    }
    ++server_.stats().commands;
    // Pipelined requests: start loading the locks the next ones name
    // while this one runs (their index slot two ahead, the lock one ahead).
    if (!pending_.empty() && pending_[0].size() > 1) {
      server_.table().prefetch_lock(pending_[0][1]);
      if (pending_.size() > 1 && pending_[1].size() > 1) {
        server_.table().prefetch_slot(pending_[1][1]);
      }
    }
    execute(req);
  }
}

void Connection::reply(std::string bytes, Grants grants, bool durable,
                       bool created) {
  if (closed_) return;
  if (held_bytes() + bytes.size() > kMaxHeldBytes) {
    // The reply cannot be kept: neither can what it grants.
    if (created) staged_.push_back(Staged{0, {}, std::move(grants), true});
    cut_off("replies the client does not read");
    return;
  }
  const std::uint64_t seq = durable ? server_.reply_seq() : 0;
  if (staged_.empty() && seq <= server_.durable_seq()) {
    // Nothing to wait for: straight to the output buffer, written when the
    // current batch ends (or now, outside a batch).
    append_out(bytes);
    note_held();
    if (!in_batch_) flush();
    return;
  }
  staged_bytes_ += bytes.size();
  staged_.push_back(Staged{seq, std::move(bytes), std::move(grants), created});
  note_held();
  server_.stage_pending(shared_from_this());
}

void Connection::complete_parked(std::uint64_t id, std::string bytes,
                                 Grants grants, bool created) {
  if (closed_ || !parked_ || id != park_id_) return;
  parked_ = false;
  reply(std::move(bytes), std::move(grants), /*durable=*/true, created);
  // Resume later requests outside the caller's event loop.
  asio::post(socket_.get_executor(), [self = shared_from_this()] {
    self->peer_checked_ = false;
    self->process_pending();
  });
}

void Connection::release(std::uint64_t durable_seq, bool failed,
                         const std::string& failure) {
  while (!staged_.empty()) {
    Staged& s = staged_.front();
    if (s.seq <= durable_seq) {
      append_out(s.bytes);
    } else if (failed) {
      for (const auto& [name, token] : s.grants) {
        (void)server_.table().undo_grant(name, token);
        ++server_.stats().undone_grants;
      }
      std::string err;
      proto::RespWriter(err).error("unavailable persistence failed (" +
                                   failure + "); the change was not kept");
      append_out(err);
    } else {
      break;
    }
    staged_bytes_ -= s.bytes.size();
    staged_.pop_front();
  }
  flush();
}

bool Connection::stages_grant(std::string_view name,
                              const OwnerToken& token) const {
  for (const Staged& s : staged_) {
    for (const auto& [n, t] : s.grants) {
      if (t == token && n == name) return true;
    }
  }
  return false;
}

void Connection::append_out(std::string_view bytes) {
  if (out_.size() >= kChunkBytes) {
    // Only while a write is in flight (a backlog): keep the chunk as it is.
    backlog_bytes_ += out_.size();
    backlog_.push_back(std::move(out_));
    out_ = std::string();
  }
  out_.append(bytes);
}

void Connection::flush() {
  if (closed_ || write_in_flight_) return;
  if (!backlog_.empty()) {
    writing_ = std::move(backlog_.front());
    backlog_.pop_front();
    backlog_bytes_ -= writing_.size();
  } else if (!out_.empty()) {
    writing_.swap(out_);
    out_.clear();
  } else {
    if (close_after_flush_ && staged_.empty()) close();
    return;
  }
  write_in_flight_ = true;
  auto done = [self = shared_from_this()](std::error_code ec, std::size_t) {
    self->write_in_flight_ = false;
    drop_buffer(self->writing_);
    if (ec) {
      self->close();
      return;
    }
    self->flush();
  };
  if (tls_) {
    asio::async_write(*tls_, asio::buffer(writing_), std::move(done));
  } else {
    asio::async_write(socket_, asio::buffer(writing_), std::move(done));
  }
}

void Connection::cut_off(const char* what) {
  spdlog::warn(
      "session {}: holds over {} MiB of {}; closing the connection (a "
      "client that does not read its replies)",
      session_, kMaxHeldBytes >> 20, what);
  close();
}

// Grants created for this connection whose replies were never written: the
// client cannot know it holds them, so they are given back now instead of
// at their TTL. A lease that another connection's staged reply also
// acknowledges (a retry with the same owner token) is kept.
void Connection::give_back_unsent() {
  for (const Staged& s : staged_) {
    if (!s.created) continue;
    for (const auto& [name, token] : s.grants) {
      if (server_.grant_staged_elsewhere(this, name, token)) continue;
      auto r = server_.table().undo_grant(name, token);
      if (r.ok() && r->was_held) {
        spdlog::info(
            "session {}: connection closed before the grant of lock {} was "
            "sent; the lease was given back",
            session_, core::quote_name(name));
      }
    }
  }
}

void Connection::close(bool give_back_unsent_grants) {
  if (closed_) return;
  closed_ = true;
  std::error_code ec;
  socket_.shutdown(asio::ip::tcp::socket::shutdown_both, ec);
  socket_.close(ec);
  if (give_back_unsent_grants) give_back_unsent();
  if (dropped_ > 0) {
    spdlog::info(
        "session {}: the client had closed the connection; {} acquire "
        "request(s) it sent were not executed",
        session_, dropped_);
  }
  pending_.clear();
  pending_bytes_ = 0;
  staged_.clear();
  staged_bytes_ = 0;
  std::string().swap(out_);
  backlog_.clear();
  backlog_bytes_ = 0;
  parked_ = false;
  server_.connection_closed(shared_from_this(), had_ephemeral_);
#if defined(__GLIBC__)
  if (held_much_) {
    // Megabytes were freed in ~256 KiB pieces that glibc may keep in its
    // heap (fragmentation; its mmap threshold rises with use): give them
    // back to the kernel once the aborted write has let go of its buffer.
    // Rare (a connection that held over 4 MiB); costs a heap walk.
    asio::post(socket_.get_executor(), [] { ::malloc_trim(0); });
  }
#endif
}

void Connection::shut_down() {
  if (closed_) return;
  close_after_flush_ = true;
  if (!pending_.empty()) {
    spdlog::info("session {}: {} request(s) not executed: batond is stopping",
                 session_, pending_.size());
  }
  pending_.clear();
  pending_bytes_ = 0;
  if (parked_) {
    parked_ = false;
    // Its waiter leaves the queue first: nothing may be granted to it now.
    server_.table().end_session(session_);
    std::string err;
    proto::RespWriter(err).error(
        "unavailable batond is shutting down; the waiting request was "
        "withdrawn");
    reply(std::move(err), {}, /*durable=*/false);
  }
  flush();
}

void Connection::reply_error(Errc code, std::string_view message) {
  ++server_.stats().errors;
  std::string out;
  proto::RespWriter w(out);
  proto::write_error(w, Error(code, std::string(message)));
  reply(std::move(out));
}

// Server's accept loop (here, beside the connection it makes).
asio::awaitable<void> Server::accept_loop(asio::ip::tcp::acceptor& acceptor,
                                          bool tls) {
  for (;;) {
    std::error_code ec;
    asio::ip::tcp::socket socket = co_await acceptor.async_accept(
        asio::redirect_error(asio::use_awaitable, ec));
    if (ec) {
      if (ec == asio::error::operation_aborted) co_return;
      spdlog::warn("accept failed: {}", ec.message());
      continue;
    }
    if (connections_.size() >= config_.max_connections) {
      ++stats_.connections_refused;
      std::string err = "-unavailable too many connections\r\n";
      std::error_code wec;
      asio::write(socket, asio::buffer(err), wec);
      continue;
    }
    std::error_code oec;
    socket.set_option(asio::ip::tcp::no_delay(true), oec);
    auto c =
        std::make_shared<Connection>(*this, std::move(socket), next_session_++,
                                     tls ? tls_ctx_.get() : nullptr);
    connections_.insert(c);
    ++stats_.connections_total;
    c->start();
  }
}

}  // namespace baton::server
