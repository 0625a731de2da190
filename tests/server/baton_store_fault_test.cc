// tests/server/baton_store_fault_test.cc — fault injection for the baton://
// client: a fake server (not batond) on a loopback port answers every
// request with a hostile reply; the store must refuse it with a clear error
// quickly, without allocating for it, and drop the connection.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "baton/store_descriptor.h"
#include "direct_store.h"
#include "proto/commands.h"

namespace baton::testing {
namespace {

// Accepts connections on 127.0.0.1:<free port> and answers each request
// (any bytes) with `reply`, or with answer(request bytes). Stops within
// 100 ms of destruction.
class FakeServer {
 public:
  explicit FakeServer(std::string reply)
      : FakeServer([reply](std::string_view) { return reply; }) {}
  explicit FakeServer(std::function<std::string(std::string_view)> answer)
      : answer_(std::move(answer)) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    if (fd_ < 0 ||
        ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        ::listen(fd_, 8) != 0) {
      ADD_FAILURE() << "cannot listen on loopback";
      return;
    }
    socklen_t len = sizeof a;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { run(); });
  }
  ~FakeServer() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    if (fd_ >= 0) ::close(fd_);
  }
  std::uint16_t port() const { return port_; }
  int requests() const { return requests_; }

 private:
  void run() {
    std::vector<int> conns;
    // Bounded: until the test ends, at most 5 minutes.
    const auto until =
        std::chrono::steady_clock::now() + std::chrono::minutes(5);
    while (!stop_ && std::chrono::steady_clock::now() < until) {
      std::vector<pollfd> p{{fd_, POLLIN, 0}};
      for (int c : conns) p.push_back({c, POLLIN, 0});
      if (::poll(p.data(), p.size(), 100) <= 0) continue;
      if (p[0].revents & POLLIN) {
        int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
        if (c >= 0) conns.push_back(c);
      }
      for (std::size_t i = 1; i < p.size(); ++i) {
        if (!(p[i].revents & (POLLIN | POLLHUP))) continue;
        char buf[4096];
        ssize_t n = ::recv(p[i].fd, buf, sizeof buf, MSG_DONTWAIT);
        if (n <= 0) continue;
        ++requests_;
        const std::string reply = answer_(std::string_view(buf, n));
        (void)::send(p[i].fd, reply.data(), reply.size(), MSG_NOSIGNAL);
      }
    }
    for (int c : conns) ::close(c);
  }

  std::function<std::string(std::string_view)> answer_;
  int fd_ = -1;
  std::uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> requests_{0};
  std::thread thread_;
};

// A baton:// store on the fake server (nullptr, with a failure, if none).
std::unique_ptr<DirectStore> store_on(const FakeServer& fake) {
  EXPECT_NE(fake.port(), 0);
  auto store = DirectStore::open(
      "baton://127.0.0.1:" + std::to_string(fake.port()) + "?timeout_ms=3000");
  EXPECT_TRUE(store) << store.error().to_string();
  return store ? std::move(*store) : nullptr;
}

void expect_refused(const std::string& hostile, const std::string& what) {
  FakeServer fake(hostile);
  auto store = store_on(fake);
  ASSERT_TRUE(store);
  const auto start = std::chrono::steady_clock::now();
  auto r = store->describe("some-lock");
  const auto took = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(r) << "a hostile reply was accepted: " << hostile.substr(0, 40);
  EXPECT_EQ(r.error().code(), Errc::unavailable);
  EXPECT_NE(r.error().message().find(what), std::string::npos)
      << r.error().message();
  // Refused on the header, not after the 3 s timeout.
  EXPECT_LT(took, std::chrono::seconds(2));
  EXPECT_GE(fake.requests(), 1);
}

// A batond older than LOCK.ACQUIRE's BRIEF option refuses it by name: the
// client asks again without it, and no more on that store.
TEST(BatonStoreFaults, AnOlderBatondThatRefusesBriefIsAskedInFull) {
  std::atomic<int> brief{0}, plain{0};
  FakeServer fake([&](std::string_view req) -> std::string {
    if (req.find("LOCK.ACQUIRE") == std::string_view::npos) return "+OK\r\n";
    if (req.find("BRIEF") != std::string_view::npos) {
      ++brief;
      return "-invalid_argument unknown or incomplete LOCK.ACQUIRE option "
             "\"BRIEF\"\r\n";
    }
    ++plain;
    std::string out;
    proto::RespWriter w(out);
    core::Grant g;
    g.name = "old";
    g.token = *OwnerToken::parse("0123456789abcdef0123456789abcdef");
    g.fencing_token = 7;
    g.ttl = std::chrono::milliseconds(5000);
    g.valid_for = std::chrono::seconds(5);
    g.store_expires_at_ms = 1;
    proto::write_grant(w, g);
    return out;
  });
  auto store = store_on(fake);
  ASSERT_TRUE(store);
  AcquireSpec spec;
  spec.name = "old";
  spec.token = *OwnerToken::parse("0123456789abcdef0123456789abcdef");
  spec.ttl = std::chrono::milliseconds(5000);
  for (int i = 0; i < 2; ++i) {
    auto g = store->acquire(spec, std::chrono::milliseconds(0));
    ASSERT_TRUE(g) << g.error().to_string();
    EXPECT_EQ(g->fencing_token, 7u);
  }
  EXPECT_EQ(brief.load(), 1);
  EXPECT_EQ(plain.load(), 2);
}

// A batond older than LOCK.ACQUIRE's QUEUED option refuses it by name: a
// waiting ask is sent again without it (and its wait is then answered as
// before, by the final reply only), and no more on that store.
TEST(BatonStoreFaults, AnOlderBatondThatRefusesQueuedIsAskedWithoutIt) {
  std::atomic<int> queued{0}, plain{0};
  FakeServer fake([&](std::string_view req) -> std::string {
    if (req.find("LOCK.ACQUIRE") == std::string_view::npos) return "+OK\r\n";
    if (req.find("QUEUED") != std::string_view::npos) {
      ++queued;
      return "-invalid_argument unknown or incomplete LOCK.ACQUIRE option "
             "\"QUEUED\"\r\n";
    }
    ++plain;
    return "-timeout the wait ran out\r\n";
  });
  auto store = store_on(fake);
  ASSERT_TRUE(store);
  AcquireSpec spec;
  spec.name = "old";
  spec.token = *OwnerToken::parse("0123456789abcdef0123456789abcdef");
  spec.ttl = std::chrono::milliseconds(5000);
  for (int i = 0; i < 2; ++i) {
    auto g = store->acquire(spec, std::chrono::milliseconds(100));
    ASSERT_FALSE(g);
    EXPECT_EQ(g.error().code(), Errc::timeout) << g.error().to_string();
  }
  EXPECT_EQ(queued.load(), 1);
  EXPECT_EQ(plain.load(), 2);
}

// A stop ends an ask even when batond never answers it (nor the releases
// that would withdraw it): its connection is shut down and the ask fails
// long before the 30 s it asked to wait.
TEST(BatonStoreFaults, AStopEndsAnAskThatBatondNeverAnswers) {
  FakeServer fake([](std::string_view) { return std::string(); });
  auto store = open_store("baton://127.0.0.1:" + std::to_string(fake.port()) +
                          "?timeout_ms=3000");
  ASSERT_TRUE(store) << store.error().to_string();
  AcquireSpec spec;
  spec.name = "silent";
  spec.token = OwnerToken::random();
  spec.ttl = std::chrono::milliseconds(5000);
  auto req = (*store)->request(spec);
  auto asked = std::async(std::launch::async, [&] {
    return req->ask(AskMode::wait, std::chrono::seconds(30), CallContext());
  });
  // Bounded: the acquire reaches the fake server.
  for (int i = 0; i < 500 && fake.requests() == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_GE(fake.requests(), 1);
  req->interrupt();
  ASSERT_EQ(asked.wait_for(std::chrono::seconds(10)),
            std::future_status::ready);
  auto a = asked.get();
  ASSERT_FALSE(a) << "an ask nobody answered returned an answer";
  EXPECT_EQ(a.error().code(), Errc::unavailable) << a.error().to_string();
  EXPECT_GE(fake.requests(), 2) << "no release tried to withdraw it first";
}

TEST(BatonStoreFaults, HugeArrayIsRefused) {
  expect_refused("*2000000000\r\n", "reply array of 2000000000 elements");
}

TEST(BatonStoreFaults, NestedHugeArraysAreRefused) {
  std::string r;
  for (int i = 0; i < 9; ++i) r += "*1000000\r\n";
  expect_refused(r, "elements in all exceeds the limit");
}

TEST(BatonStoreFaults, HugeBulkStringIsRefused) {
  expect_refused("$9000000000\r\nxx", "bulk string of 9000000000 bytes");
}

TEST(BatonStoreFaults, GarbageIsRefused) {
  expect_refused("HTTP/1.1 400 Bad Request\r\n\r\n", "unknown type byte");
}

}  // namespace
}  // namespace baton::testing
