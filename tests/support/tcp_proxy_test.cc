// TcpProxy against a real TCP echo server on loopback: every mode, delay,
// cut_all and set_upstream, observed from both the client and the server.
#include "tcp_proxy.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace baton::testing {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// A blocking echo server: one thread per connection; counts accepted
// connections and connections that ended with a reset or an EOF.
class EchoServer {
 public:
  EchoServer() {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int one = 1;
    ::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        ::listen(fd_, 16) != 0) {
      ADD_FAILURE() << "echo server cannot listen";
    }
    socklen_t len = sizeof a;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    acceptor_ = std::thread([this] { accept_loop(); });
  }
  ~EchoServer() {
    stop_ = true;
    acceptor_.join();
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (int c : open_) ::shutdown(c, SHUT_RDWR);
    }
    for (auto& t : workers_) t.join();
    ::close(fd_);
  }
  std::uint16_t port() const { return port_; }
  int accepted() const { return accepted_.load(); }
  int resets() const { return resets_.load(); }
  int eofs() const { return eofs_.load(); }

 private:
  void accept_loop() {
    while (!stop_) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 20) <= 0) continue;
      const int c = ::accept(fd_, nullptr, nullptr);
      if (c < 0) continue;
      ++accepted_;
      std::lock_guard<std::mutex> lock(mu_);
      open_.push_back(c);
      workers_.emplace_back([this, c] { serve(c); });
    }
  }
  void serve(int c) {
    char buf[4096];
    for (;;) {
      const ssize_t n = ::recv(c, buf, sizeof buf, 0);
      if (n == 0) {
        ++eofs_;
        break;
      }
      if (n < 0) {
        if (errno == ECONNRESET) ++resets_;
        break;
      }
      if (::send(c, buf, n, MSG_NOSIGNAL) != n) break;
    }
    std::lock_guard<std::mutex> lock(mu_);
    std::erase(open_, c);
    ::close(c);
  }

  int fd_ = -1;
  std::uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> accepted_{0};
  std::atomic<int> resets_{0};
  std::atomic<int> eofs_{0};
  std::mutex mu_;
  std::vector<int> open_;
  std::vector<std::thread> workers_;
  std::thread acceptor_;
};

int connect_to(std::uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

// What one recv() within `wait` saw.
struct Got {
  std::string data;
  bool eof = false;
  int err = 0;  // errno of a failed recv (ECONNRESET for a reset)
  bool timed_out = false;
};

// Reads until `want` bytes arrived, EOF, an error, or `wait` passed.
Got read_for(int fd, std::size_t want, std::chrono::milliseconds wait) {
  Got g;
  const auto deadline = Clock::now() + wait;
  while (g.data.size() < want) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - Clock::now());
    if (left <= 0ms) {
      g.timed_out = true;
      break;
    }
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    char buf[4096];
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n == 0) {
      g.eof = true;
      break;
    }
    if (n < 0) {
      g.err = errno;
      break;
    }
    g.data.append(buf, n);
  }
  return g;
}

void send_all(int fd, const std::string& s) {
  ASSERT_EQ(::send(fd, s.data(), s.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(s.size()));
}

// Polls `cond` every 5 ms for up to 2 s.
template <typename F>
bool eventually(F cond) {
  for (int i = 0; i < 400; ++i) {
    if (cond()) return true;
    std::this_thread::sleep_for(5ms);
  }
  return cond();
}

std::unique_ptr<TcpProxy> start_proxy(std::uint16_t upstream) {
  auto p = TcpProxy::start("127.0.0.1", upstream);
  EXPECT_TRUE(p.ok()) << (p.ok() ? "" : p.error().to_string());
  return p.ok() ? std::move(*p) : nullptr;
}

TEST(TcpProxy, PassForwardsBothWaysAndCountsConnections) {
  EchoServer echo;
  auto proxy = start_proxy(echo.port());
  ASSERT_NE(proxy, nullptr);
  EXPECT_NE(proxy->port(), 0);
  EXPECT_NE(proxy->port(), echo.port());
  const int fd = connect_to(proxy->port());
  ASSERT_GE(fd, 0);
  send_all(fd, "hello");
  EXPECT_EQ(read_for(fd, 5, 2s).data, "hello");
  EXPECT_EQ(proxy->connections(), 1u);
  EXPECT_EQ(echo.accepted(), 1);
  // A large transfer survives the chunking and the queue bound.
  const std::string big(3 << 20, 'x');
  std::thread writer([&] { send_all(fd, big); });
  const Got g = read_for(fd, big.size(), 10s);
  writer.join();
  EXPECT_EQ(g.data.size(), big.size());
  EXPECT_EQ(g.data, big);
  // An orderly close travels through: the server sees EOF, the proxy forgets.
  ::close(fd);
  EXPECT_TRUE(eventually([&] { return echo.eofs() == 1; }));
  EXPECT_TRUE(eventually([&] { return proxy->connections() == 0; }));
}

TEST(TcpProxy, DelayAddsToEachDirection) {
  EchoServer echo;
  auto proxy = start_proxy(echo.port());
  ASSERT_NE(proxy, nullptr);
  proxy->set_delay(150ms);
  const int fd = connect_to(proxy->port());
  ASSERT_GE(fd, 0);
  const auto t0 = Clock::now();
  send_all(fd, "ping");
  EXPECT_EQ(read_for(fd, 4, 5s).data, "ping");
  // Two one-way delays at least; an upper bound would be a timing assertion.
  EXPECT_GE(Clock::now() - t0, 300ms);
  proxy->set_delay(0ms);
  send_all(fd, "pong");
  EXPECT_EQ(read_for(fd, 4, 5s).data, "pong");
  ::close(fd);
}

TEST(TcpProxy, BlackholeForwardsNothingUntilPassAgain) {
  EchoServer echo;
  auto proxy = start_proxy(echo.port());
  ASSERT_NE(proxy, nullptr);
  const int fd = connect_to(proxy->port());
  ASSERT_GE(fd, 0);
  send_all(fd, "a");
  ASSERT_EQ(read_for(fd, 1, 2s).data, "a");

  // Applies to the existing connection: no reply, no EOF, no reset.
  proxy->set_mode(TcpProxy::Mode::blackhole);
  send_all(fd, "lost");
  Got g = read_for(fd, 1, 300ms);
  EXPECT_TRUE(g.timed_out);
  EXPECT_TRUE(g.data.empty());
  EXPECT_FALSE(g.eof);
  EXPECT_EQ(g.err, 0);
  // And to new ones: accepted, silent.
  const int fd2 = connect_to(proxy->port());
  ASSERT_GE(fd2, 0);
  send_all(fd2, "x");
  g = read_for(fd2, 1, 200ms);
  EXPECT_TRUE(g.timed_out);
  EXPECT_EQ(proxy->connections(), 2u);

  // Back to pass: the dropped bytes stay dropped, new ones flow.
  proxy->set_mode(TcpProxy::Mode::pass);
  send_all(fd, "b");
  EXPECT_EQ(read_for(fd, 1, 2s).data, "b");
  g = read_for(fd, 1, 200ms);
  EXPECT_TRUE(g.timed_out) << "blackholed bytes resurfaced: " << g.data;
  send_all(fd2, "y");
  EXPECT_EQ(read_for(fd2, 1, 2s).data, "y");
  ::close(fd);
  ::close(fd2);
}

TEST(TcpProxy, BlackholeDropsQueuedDelayedBytes) {
  EchoServer echo;
  auto proxy = start_proxy(echo.port());
  ASSERT_NE(proxy, nullptr);
  proxy->set_delay(300ms);
  const int fd = connect_to(proxy->port());
  ASSERT_GE(fd, 0);
  send_all(fd, "queued");
  std::this_thread::sleep_for(50ms);  // read by the proxy, not yet forwarded
  proxy->set_mode(TcpProxy::Mode::blackhole);
  proxy->set_delay(0ms);
  proxy->set_mode(TcpProxy::Mode::pass);
  const Got g = read_for(fd, 1, 700ms);
  EXPECT_TRUE(g.timed_out) << "got " << g.data;
  ::close(fd);
}

TEST(TcpProxy, RefuseResetsNewAndCurrentConnections) {
  EchoServer echo;
  auto proxy = start_proxy(echo.port());
  ASSERT_NE(proxy, nullptr);
  const int old_fd = connect_to(proxy->port());
  ASSERT_GE(old_fd, 0);
  send_all(old_fd, "a");
  ASSERT_EQ(read_for(old_fd, 1, 2s).data, "a");

  proxy->set_mode(TcpProxy::Mode::refuse);
  Got g = read_for(old_fd, 1, 2s);
  EXPECT_EQ(g.err, ECONNRESET);
  EXPECT_TRUE(eventually([&] { return echo.resets() == 1; }));
  const int fd = connect_to(proxy->port());  // the kernel accepts, we reset
  ASSERT_GE(fd, 0);
  g = read_for(fd, 1, 2s);
  EXPECT_EQ(g.err, ECONNRESET);
  EXPECT_FALSE(g.timed_out);
  EXPECT_EQ(echo.accepted(), 1);  // never reached the server
  EXPECT_TRUE(eventually([&] { return proxy->connections() == 0; }));

  proxy->set_mode(TcpProxy::Mode::pass);
  const int fd2 = connect_to(proxy->port());
  ASSERT_GE(fd2, 0);
  send_all(fd2, "c");
  EXPECT_EQ(read_for(fd2, 1, 2s).data, "c");
  ::close(old_fd);
  ::close(fd);
  ::close(fd2);
}

TEST(TcpProxy, CutAllResetsBothSidesAndKeepsServing) {
  EchoServer echo;
  auto proxy = start_proxy(echo.port());
  ASSERT_NE(proxy, nullptr);
  int fds[2];
  for (int& fd : fds) {
    fd = connect_to(proxy->port());
    ASSERT_GE(fd, 0);
    send_all(fd, "a");
    ASSERT_EQ(read_for(fd, 1, 2s).data, "a");
  }
  EXPECT_EQ(proxy->connections(), 2u);
  proxy->cut_all();
  EXPECT_EQ(proxy->connections(), 0u);
  for (int fd : fds) {
    const Got g = read_for(fd, 1, 2s);
    EXPECT_EQ(g.err, ECONNRESET);
    ::close(fd);
  }
  EXPECT_TRUE(eventually([&] { return echo.resets() == 2; }));
  EXPECT_EQ(echo.eofs(), 0);
  const int fd = connect_to(proxy->port());
  ASSERT_GE(fd, 0);
  send_all(fd, "b");
  EXPECT_EQ(read_for(fd, 1, 2s).data, "b");
  ::close(fd);
}

TEST(TcpProxy, SetUpstreamAppliesToNewConnections) {
  auto a = std::make_unique<EchoServer>();
  EchoServer b;
  auto proxy = start_proxy(a->port());
  ASSERT_NE(proxy, nullptr);
  const int fd_a = connect_to(proxy->port());
  send_all(fd_a, "1");
  ASSERT_EQ(read_for(fd_a, 1, 2s).data, "1");
  proxy->set_upstream("127.0.0.1", b.port());
  const int fd_b = connect_to(proxy->port());
  send_all(fd_b, "2");
  EXPECT_EQ(read_for(fd_b, 1, 2s).data, "2");
  EXPECT_EQ(a->accepted(), 1);
  EXPECT_EQ(b.accepted(), 1);
  // The old connection still goes to a.
  send_all(fd_a, "3");
  EXPECT_EQ(read_for(fd_a, 1, 2s).data, "3");
  ::close(fd_a);
  ::close(fd_b);
}

TEST(TcpProxy, UpstreamDownResetsTheClient) {
  std::uint16_t dead_port;
  {
    EchoServer gone;
    dead_port = gone.port();
  }
  auto proxy = start_proxy(dead_port);
  ASSERT_NE(proxy, nullptr);
  const int fd = connect_to(proxy->port());
  ASSERT_GE(fd, 0);
  const Got g = read_for(fd, 1, 2s);
  EXPECT_EQ(g.err, ECONNRESET);
  ::close(fd);
}

TEST(TcpProxy, BadUpstreamHostIsInvalidArgument) {
  auto p = TcpProxy::start("no-such-host.invalid", 1);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.error().code(), Errc::invalid_argument);
  EXPECT_NE(p.error().message().find("no-such-host.invalid"),
            std::string::npos);
  auto q = TcpProxy::start("", 1);
  ASSERT_FALSE(q.ok());
  EXPECT_EQ(q.error().code(), Errc::invalid_argument);
}

}  // namespace
}  // namespace baton::testing
