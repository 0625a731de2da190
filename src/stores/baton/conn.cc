// stores/baton/conn.cc — see conn.h.
#include "stores/baton/conn.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace baton::store::baton_conn {
namespace {

using std::chrono::steady_clock;

Error unavailable(std::string what) {
  return Error(Errc::unavailable, std::move(what));
}

int ms_left(Deadline deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - steady_clock::now());
  if (left.count() <= 0) return 0;
  return left.count() > 2'000'000'000 ? 2'000'000'000
                                      : static_cast<int>(left.count()) + 1;
}

// A non-blocking connect to `ai` finished by `deadline`; the socket, or -1
// with errno set.
int connect_one(const addrinfo* ai, Deadline deadline) {
  int fd = ::socket(ai->ai_family,
                    ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return -1;
  int rc = ::connect(fd, ai->ai_addr, ai->ai_addrlen);
  if (rc != 0 && errno == EINPROGRESS) {
    pollfd p{fd, POLLOUT, 0};
    rc = ::poll(&p, 1, ms_left(deadline)) == 1 ? 0 : -1;
    int err = 0;
    socklen_t len = sizeof err;
    if (rc == 0) ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
    if (rc != 0) err = ETIMEDOUT;
    if (err != 0) {
      errno = err;
      rc = -1;
    }
  }
  if (rc != 0) {
    const int saved = errno;
    ::close(fd);
    errno = saved;
    return -1;
  }
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

}  // namespace

Conn::~Conn() {
  if (fd_ >= 0) ::close(fd_);
}

Result<std::unique_ptr<Conn>> Conn::connect(
    const std::string& host, std::uint16_t port, Deadline deadline,
    const std::shared_ptr<tls::TlsContext>& tls) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const std::string ps = std::to_string(port);
  if (int rc = ::getaddrinfo(host.c_str(), ps.c_str(), &hints, &res); rc != 0) {
    return unavailable(std::string(kCannotConnect) + host + ":" + ps + ": " +
                       gai_strerror(rc));
  }
  std::string last = "no address";
  int fd = -1;
  for (addrinfo* ai = res; ai != nullptr && fd < 0; ai = ai->ai_next) {
    fd = connect_one(ai, deadline);
    if (fd < 0) last = std::strerror(errno);
  }
  ::freeaddrinfo(res);
  if (fd < 0) {
    return unavailable(std::string(kCannotConnect) + host + ":" + ps + ": " +
                       last);
  }
  std::unique_ptr<Conn> c(new Conn());
  c->fd_ = fd;
  if (tls) {
    // Stays non-blocking: OpenSSL driven by poll (tls_client.h).
    tls::TlsPeer peer;
    peer.host = host;
    peer.where = "batond at " + host + ":" + ps;
    peer.plain_port_hint =
        " (the server did not answer with TLS: is this batond's "
        "plain-text port?)";
    auto t = tls::TlsChannel::handshake(tls, fd, std::move(peer), deadline);
    if (!t) return t.error();
    c->tls_ = std::move(*t);
    return c;
  }
  // Blocking from here on, bounded by SO_RCVTIMEO/SO_SNDTIMEO: a call is
  // then one send and one recv (no poll before each).
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return c;
}

Result<proto::Reply> Conn::exchange(Deadline deadline) {
  std::string_view rest(out_);
  if (tls_) {
    if (Status s = tls_->write_all(rest, deadline); !s.ok()) {
      return io_error(s.error().message());
    }
    rest = {};
  }
  while (!rest.empty()) {
    if (!set_timeout(deadline)) return io_error("send timed out");
    ssize_t n = ::send(fd_, rest.data(), rest.size(), MSG_NOSIGNAL);
    if (n > 0) {
      rest.remove_prefix(static_cast<std::size_t>(n));
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
      continue;  // timed out (re-checked above) or interrupted
    return io_error(std::string("send: ") + std::strerror(errno));
  }
  return next_reply(deadline);
}

Result<proto::Reply> Conn::next_reply(Deadline deadline) {
  for (;;) {
    proto::Reply r;
    auto got = parser_.next(&r);
    if (!got) return malformed(got.error());
    if (*got) {
      last_used_ = steady_clock::now();
      return r;
    }
    char buf[16384];
    ssize_t n = 0;
    if (tls_) {
      auto got_tls = tls_->read_some(buf, sizeof buf, deadline);
      if (!got_tls) return io_error(got_tls.error().message());
      n = static_cast<ssize_t>(*got_tls);
    } else {
      if (!set_timeout(deadline)) {
        return io_error("no reply from batond within the timeout");
      }
      n = ::recv(fd_, buf, sizeof buf, 0);
    }
    if (n == 0) return io_error("batond closed the connection");
    if (n > 0 && first_reply_ && !tls_ &&
        (static_cast<unsigned char>(buf[0]) == 0x15 ||
         static_cast<unsigned char>(buf[0]) == 0x16)) {
      return io_error(
          "batond answered with TLS: this is its TLS port (tls_listen); "
          "connect with batons://");
    }
    if (n > 0) first_reply_ = false;
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) continue;
      return io_error(std::string("recv: ") + std::strerror(errno));
    }
    if (Status s = parser_.feed(buf, static_cast<std::size_t>(n)); !s.ok()) {
      return malformed(s.error());
    }
  }
}

bool Conn::healthy() const {
  if (broken_) return false;
  if (tls_ && tls_->has_pending()) return false;
  if (steady_clock::now() - last_used_ < std::chrono::milliseconds(10)) {
    return true;
  }
  pollfd p{fd_, POLLIN, 0};
  return ::poll(&p, 1, 0) == 0;
}

Error Conn::io_error(std::string what) {
  broken_ = true;
  return unavailable(std::move(what));
}

Error Conn::malformed(const Error& e) {
  broken_ = true;
  return unavailable("batond sent a bad reply: " + e.message());
}

// Sets SO_RCVTIMEO/SO_SNDTIMEO to the time left before `deadline`; false if
// none is left. Skips the syscalls when the timeout already set is at most
// the time left and not much shorter (it never overshoots).
bool Conn::set_timeout(Deadline deadline) {
  auto left = std::chrono::duration_cast<std::chrono::microseconds>(
                  deadline - steady_clock::now())
                  .count();
  if (left <= 0) return false;
  if (timeout_us_ > 0 && timeout_us_ <= left && timeout_us_ * 5 >= left * 4) {
    return true;
  }
  // 90% of what is left, so the next calls (with about the same time left)
  // find it acceptable; a recv that times out early loops here.
  std::int64_t us = std::max<std::int64_t>(1, left / 10 * 9);
  timeval tv{static_cast<time_t>(us / 1'000'000),
             static_cast<suseconds_t>(us % 1'000'000)};
  ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  timeout_us_ = us;
  return true;
}

}  // namespace baton::store::baton_conn
