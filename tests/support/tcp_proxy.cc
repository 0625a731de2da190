// tests/support/tcp_proxy.cc — see tcp_proxy.h. One I/O thread runs a
// poll(2) loop over the listener, a wake pipe and both sockets of every
// connection; control calls post a request and wait until the loop applied it.
#include "tcp_proxy.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

namespace baton::testing {
// Named (not anonymous): TcpProxy::Impl, declared in the header, holds
// these types.
namespace tcp_proxy_detail {

using Clock = std::chrono::steady_clock;
constexpr std::size_t kMaxQueued = 1 << 20;  // per direction, then stop reading
constexpr std::size_t kReadChunk = 64 * 1024;

struct Chunk {
  std::string data;
  std::size_t off = 0;
  Clock::time_point due;
};

// One direction of a connection: bytes read from `from`, written to `to`.
struct Pipe {
  std::deque<Chunk> queue;
  std::size_t bytes = 0;
  bool eof_in = false;    // the source shut down its writing side
  bool shut_out = false;  // we shut down writing to the destination
  void clear() {
    queue.clear();
    bytes = 0;
  }
  bool head_due(Clock::time_point now) const {
    return !queue.empty() && queue.front().due <= now;
  }
};

struct Conn {
  int client = -1;
  int upstream = -1;
  bool connecting = false;  // non-blocking connect to upstream in progress
  bool dead = false;
  Pipe c2u;  // client -> upstream
  Pipe u2c;  // upstream -> client
};

void set_nodelay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}
// Close with SO_LINGER 0: the peer sees a reset, not an orderly EOF.
void reset_close(int& fd) {
  if (fd < 0) return;
  linger l{1, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
  ::close(fd);
  fd = -1;
}
void plain_close(int& fd) {
  if (fd < 0) return;
  ::close(fd);
  fd = -1;
}
void reset_conn(Conn& c) {
  reset_close(c.client);
  reset_close(c.upstream);
  c.dead = true;
}

// Resolves host:port to an IPv4/IPv6 socket address; false if it does not.
bool resolve(const std::string& host, std::uint16_t port, sockaddr_storage* out,
             socklen_t* len) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const std::string service = std::to_string(port);
  if (::getaddrinfo(host.c_str(), service.c_str(), &hints, &res) != 0 ||
      res == nullptr) {
    return false;
  }
  std::memcpy(out, res->ai_addr, res->ai_addrlen);
  *len = res->ai_addrlen;
  ::freeaddrinfo(res);
  return true;
}

}  // namespace tcp_proxy_detail
using namespace tcp_proxy_detail;

struct TcpProxy::Impl {
  int listen_fd = -1;
  int wake_r = -1;
  int wake_w = -1;
  std::uint16_t port = 0;
  std::thread thread;
  std::atomic<std::size_t> open_conns{0};

  mutable std::mutex mu;
  std::condition_variable cv;
  // Guarded by mu.
  Mode mode = Mode::pass;
  std::chrono::milliseconds delay{0};
  std::string host;
  std::uint16_t upstream_port = 0;
  std::uint64_t cuts_requested = 0;
  std::uint64_t requested = 0;  // sequence of control requests
  std::uint64_t applied = 0;    // last request the loop applied
  bool stop = false;

  // Loop thread only.
  std::vector<std::unique_ptr<Conn>> conns;
  std::uint64_t cuts_done = 0;

  ~Impl() {
    {
      std::lock_guard<std::mutex> lock(mu);
      stop = true;
    }
    wake();
    if (thread.joinable()) thread.join();
    for (auto& c : conns) {
      plain_close(c->client);
      plain_close(c->upstream);
    }
    plain_close(listen_fd);
    plain_close(wake_r);
    plain_close(wake_w);
  }

  void wake() const {
    const char b = 1;
    [[maybe_unused]] auto n = ::write(wake_w, &b, 1);
  }

  // Runs `change` under the lock, then waits until the loop applied it.
  template <typename F>
  void request(F change) {
    std::unique_lock<std::mutex> lock(mu);
    change();
    const std::uint64_t seq = ++requested;
    wake();
    cv.wait(lock, [&] { return applied >= seq || stop; });
  }

  void accept_new(Mode m, const std::string& up_host, std::uint16_t up_port) {
    for (int i = 0; i < 64; ++i) {  // bounded per loop turn
      int fd =
          ::accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) return;  // EAGAIN or a transient error
      if (m == Mode::refuse) {
        reset_close(fd);
        continue;
      }
      set_nodelay(fd);
      auto c = std::make_unique<Conn>();
      c->client = fd;
      sockaddr_storage addr{};
      socklen_t len = 0;
      if (resolve(up_host, up_port, &addr, &len)) {
        int up = ::socket(addr.ss_family,
                          SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (up >= 0) {
          set_nodelay(up);
          if (::connect(up, reinterpret_cast<sockaddr*>(&addr), len) == 0) {
            c->upstream = up;
          } else if (errno == EINPROGRESS) {
            c->upstream = up;
            c->connecting = true;
          } else {
            plain_close(up);
          }
        }
      }
      if (c->upstream < 0 && m == Mode::pass) {
        reset_conn(*c);  // upstream down: the client sees a reset
        continue;
      }
      conns.push_back(std::move(c));
    }
  }

  // Reads what `fd` has into `p` (or drops it unless passing). Returns false
  // if the socket failed (the connection must be reset).
  static bool read_side(int fd, Pipe& p, bool passing, Clock::time_point due) {
    char buf[kReadChunk];
    for (int i = 0; i < 16; ++i) {
      const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n > 0) {
        if (passing) {
          p.queue.push_back(Chunk{std::string(buf, n), 0, due});
          p.bytes += n;
          if (p.bytes >= kMaxQueued) return true;
        }
        continue;
      }
      if (n == 0) {
        p.eof_in = true;
        return true;
      }
      return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
    }
    return true;
  }

  // Writes the due chunks of `p` to `fd`; false if the socket failed.
  static bool write_side(int fd, Pipe& p, Clock::time_point now) {
    while (p.head_due(now)) {
      Chunk& ch = p.queue.front();
      const ssize_t n = ::send(fd, ch.data.data() + ch.off,
                               ch.data.size() - ch.off, MSG_NOSIGNAL);
      if (n < 0)
        return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
      ch.off += n;
      p.bytes -= n;
      if (ch.off < ch.data.size()) return true;
      p.queue.pop_front();
    }
    return true;
  }

  // After a direction drained: pass the source's EOF on to the destination.
  static void forward_eof(int to, Pipe& p) {
    if (p.eof_in && p.queue.empty() && !p.shut_out && to >= 0) {
      ::shutdown(to, SHUT_WR);
      p.shut_out = true;
    }
  }

  void handle(Conn& c, short cev, short uev, bool passing,
              Clock::time_point now, std::chrono::milliseconds d) {
    if (c.connecting && uev != 0) {
      int err = 0;
      socklen_t len = sizeof err;
      ::getsockopt(c.upstream, SOL_SOCKET, SO_ERROR, &err, &len);
      if (err != 0) {
        plain_close(c.upstream);
        c.connecting = false;
        if (passing) reset_conn(c);
        return;
      }
      c.connecting = false;
      uev &= ~(POLLOUT);
    }
    if (cev & POLLERR) return reset_conn(c);
    if ((uev & POLLERR) && passing) return reset_conn(c);
    const auto due = now + d;
    if (cev & (POLLIN | POLLERR | POLLHUP)) {
      if (!c.c2u.eof_in && !read_side(c.client, c.c2u, passing, due)) {
        return reset_conn(c);
      }
      if ((cev & POLLHUP) && c.c2u.eof_in) {
        c.u2c.clear();  // the client can neither send nor receive any more
        c.u2c.shut_out = true;
      }
    }
    if (c.upstream >= 0 && !c.connecting &&
        (uev & (POLLIN | POLLERR | POLLHUP))) {
      const bool failed =
          (uev & POLLERR) ||
          (!c.u2c.eof_in && !read_side(c.upstream, c.u2c, passing, due));
      if (!passing && (failed || c.u2c.eof_in)) {
        // The server went away behind the blackhole: the client sees
        // nothing now, and a reset once the mode is pass again.
        plain_close(c.upstream);
        return;
      }
      if (failed) return reset_conn(c);
      if ((uev & POLLHUP) && c.u2c.eof_in) {
        c.c2u.clear();
        c.c2u.shut_out = true;
      }
    }
    if (!passing) return;
    if (c.upstream >= 0 && !c.connecting) {
      if (!write_side(c.upstream, c.c2u, now)) return reset_conn(c);
      forward_eof(c.upstream, c.c2u);
    }
    if (!write_side(c.client, c.u2c, now)) return reset_conn(c);
    forward_eof(c.client, c.u2c);
    if (c.c2u.shut_out && c.u2c.shut_out) {
      plain_close(c.client);
      plain_close(c.upstream);
      c.dead = true;
    }
  }

  void run() {
    std::vector<pollfd> fds;
    for (;;) {
      Mode m;
      std::chrono::milliseconds d;
      std::string up_host;
      std::uint16_t up_port;
      std::uint64_t cuts;
      std::uint64_t seq;
      {
        std::lock_guard<std::mutex> lock(mu);
        if (stop) break;
        m = mode;
        d = delay;
        up_host = host;
        up_port = upstream_port;
        cuts = cuts_requested;
        seq = requested;
      }
      const bool passing = m == Mode::pass;
      for (auto& c : conns) {
        if (cuts != cuts_done || m == Mode::refuse) reset_conn(*c);
        if (m == Mode::blackhole) {
          c->c2u.clear();
          c->u2c.clear();
        }
        // Kept silent in blackhole with no upstream: reset once passing.
        if (passing && c->upstream < 0) reset_conn(*c);
      }
      cuts_done = cuts;
      std::erase_if(conns, [](const auto& c) { return c->dead; });
      open_conns.store(conns.size());
      {
        std::lock_guard<std::mutex> lock(mu);
        applied = seq;
      }
      cv.notify_all();

      // Build the poll set: [wake, listen, (client, upstream) per conn].
      const auto now = Clock::now();
      int timeout_ms = 1000;
      fds.clear();
      fds.push_back({wake_r, POLLIN, 0});
      fds.push_back({listen_fd, POLLIN, 0});
      for (auto& c : conns) {
        short cev = 0;
        short uev = 0;
        if (!c->c2u.eof_in && c->c2u.bytes < kMaxQueued) cev |= POLLIN;
        if (c->upstream >= 0) {
          if (c->connecting) {
            uev |= POLLOUT;
          } else if (!c->u2c.eof_in && c->u2c.bytes < kMaxQueued) {
            uev |= POLLIN;
          }
        }
        if (passing) {
          for (auto [pipe, ev] :
               {std::pair{&c->c2u, &uev}, std::pair{&c->u2c, &cev}}) {
            if (pipe->queue.empty()) continue;
            if (pipe->head_due(now)) {
              *ev |= POLLOUT;
            } else {
              const auto wait = std::chrono::ceil<std::chrono::milliseconds>(
                  pipe->queue.front().due - now);
              timeout_ms = std::min<int>(timeout_ms, wait.count());
            }
          }
        }
        fds.push_back({c->client, cev, 0});
        fds.push_back({c->upstream, uev, 0});  // fd -1 is ignored by poll
      }
      const int rc = ::poll(fds.data(), fds.size(), timeout_ms);
      if (rc < 0 && errno != EINTR) break;
      if (fds[0].revents & POLLIN) {
        char buf[256];
        while (::read(wake_r, buf, sizeof buf) > 0) {
        }
      }
      const auto after = Clock::now();
      // Connections are handled before accepting, so indices stay valid.
      for (std::size_t i = 0; i < conns.size(); ++i) {
        handle(*conns[i], fds[2 + 2 * i].revents, fds[3 + 2 * i].revents,
               passing, after, d);
      }
      if (fds[1].revents & POLLIN) accept_new(m, up_host, up_port);
      std::erase_if(conns, [](const auto& c) { return c->dead; });
      open_conns.store(conns.size());
    }
    std::lock_guard<std::mutex> lock(mu);
    stop = true;
    cv.notify_all();
  }
};

Result<std::unique_ptr<TcpProxy>> TcpProxy::start(
    const std::string& upstream_host, std::uint16_t upstream_port,
    std::uint16_t listen_port) {
  sockaddr_storage probe{};
  socklen_t probe_len = 0;
  if (upstream_host.empty() ||
      !resolve(upstream_host, upstream_port, &probe, &probe_len)) {
    return Error(
        Errc::invalid_argument,
        "tcp proxy: upstream host '" + upstream_host + "' does not resolve");
  }
  auto impl = std::make_unique<Impl>();
  impl->host = upstream_host;
  impl->upstream_port = upstream_port;
  int pipefd[2];
  if (::pipe2(pipefd, O_NONBLOCK | O_CLOEXEC) != 0) {
    return Error(Errc::unavailable,
                 std::string("tcp proxy: pipe: ") + std::strerror(errno));
  }
  impl->wake_r = pipefd[0];
  impl->wake_w = pipefd[1];
  impl->listen_fd =
      ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (impl->listen_fd < 0) {
    return Error(Errc::unavailable,
                 std::string("tcp proxy: socket: ") + std::strerror(errno));
  }
  int one = 1;
  ::setsockopt(impl->listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(listen_port);
  if (::bind(impl->listen_fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::listen(impl->listen_fd, 128) != 0) {
    return Error(Errc::unavailable, "tcp proxy: cannot listen on 127.0.0.1:" +
                                        std::to_string(listen_port) + ": " +
                                        std::strerror(errno));
  }
  socklen_t len = sizeof a;
  ::getsockname(impl->listen_fd, reinterpret_cast<sockaddr*>(&a), &len);
  impl->port = ntohs(a.sin_port);
  Impl* raw = impl.get();
  impl->thread = std::thread([raw] { raw->run(); });
  return std::unique_ptr<TcpProxy>(new TcpProxy(std::move(impl)));
}

TcpProxy::TcpProxy(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
TcpProxy::~TcpProxy() = default;

std::uint16_t TcpProxy::port() const { return impl_->port; }

void TcpProxy::set_mode(Mode m) {
  impl_->request([&] { impl_->mode = m; });
}

void TcpProxy::set_delay(std::chrono::milliseconds one_way) {
  impl_->request(
      [&] { impl_->delay = std::max(one_way, std::chrono::milliseconds(0)); });
}

void TcpProxy::cut_all() {
  impl_->request([&] { ++impl_->cuts_requested; });
}

void TcpProxy::set_upstream(const std::string& host, std::uint16_t port) {
  impl_->request([&] {
    impl_->host = host;
    impl_->upstream_port = port;
  });
}

std::size_t TcpProxy::connections() const { return impl_->open_conns.load(); }

}  // namespace baton::testing
