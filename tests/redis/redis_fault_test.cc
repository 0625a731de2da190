// tests/redis/redis_fault_test.cc — redis:// through a TCP fault proxy
// (tests/support/tcp_proxy.h) in front of a private redis-server: replies
// lost after the script ran (rule 17), a silent network (blackhole) and
// lost wake-up messages.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <future>
#include <optional>
#include <thread>

#include "redis_process.h"
#include "support/tcp_proxy.h"

namespace baton::testing {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

RedisProcess* g_server = nullptr;
RedisProcess& server() {
  if (g_server == nullptr) {
    g_server = new RedisProcess();
    std::atexit([] { delete g_server; });
  }
  return *g_server;
}

std::string unique(const std::string& base) {
  return "redis-fault/" + base + "/" + OwnerToken::random().to_string();
}

std::unique_ptr<TcpProxy> proxy_to_server() {
  auto p = TcpProxy::start("127.0.0.1", server().port());
  EXPECT_TRUE(p.ok()) << (p.ok() ? "" : p.error().to_string());
  return p.ok() ? std::move(*p) : nullptr;
}

std::string via(const TcpProxy& p, const std::string& query = "") {
  return "redis://127.0.0.1:" + std::to_string(p.port()) + query;
}

// Polls `cond` every 2 ms for up to `limit`.
template <typename F>
bool eventually(F cond, std::chrono::milliseconds limit = 5s) {
  const auto end = Clock::now() + limit;
  while (Clock::now() < end) {
    if (cond()) return true;
    std::this_thread::sleep_for(2ms);
  }
  return cond();
}

// Rule 17 over a real TCP drop: the acquire script ran on the server, its
// reply was dropped in flight and the connection reset. The client's retry
// with the same owner token gets that very lease: one lease, never two (the
// fencing counter moved once), none leaked (release frees the lock).
void lost_reply_after_script_ran(std::chrono::milliseconds wait) {
  auto proxy = proxy_to_server();
  ASSERT_NE(proxy, nullptr);
  auto direct = open_store(server().url());  // the observer, no proxy
  ASSERT_TRUE(direct.ok());
  ClientOptions copts;
  copts.retry_interval = 20ms;
  auto c = open_client(via(*proxy, "?timeout=2000"), copts);
  ASSERT_TRUE(c.ok()) << c.error().to_string();
  const std::string name = unique("lost-reply");

  proxy->set_delay(400ms);  // the reply sits in the proxy for 400 ms
  AcquireOptions o;
  o.ttl = 30s;
  o.label = "retrying";
  auto pending = std::async(std::launch::async, [&] {
    return wait > 0ms ? c->acquire(name, wait, o) : c->try_acquire(name, o);
  });
  // The script ran: the server holds the lease while the reply is delayed.
  std::optional<std::uint64_t> fencing;
  ASSERT_TRUE(eventually([&] {
    auto info = (*direct)->describe(name);
    if (!info.ok() || info->holders.empty()) return false;
    fencing = info->holders[0].fencing_token;
    return true;
  }));
  proxy->set_mode(TcpProxy::Mode::blackhole);  // drops the queued reply
  proxy->set_delay(0ms);
  proxy->set_mode(TcpProxy::Mode::pass);
  proxy->cut_all();  // the client's connection is reset: outcome unknown

  auto lease = pending.get();
  ASSERT_TRUE(lease.ok()) << lease.error().to_string();
  EXPECT_EQ(lease->fencing_token, *fencing);
  auto info = (*direct)->describe(name);
  ASSERT_TRUE(info.ok());
  ASSERT_EQ(info->holders.size(), 1u);
  EXPECT_EQ(info->holders[0].label, "retrying");
  EXPECT_EQ(info->last_fencing_token, *fencing);  // one grant only
  EXPECT_TRUE(info->waiters.empty());
  auto released = c->release(*lease);
  ASSERT_TRUE(released.ok()) << released.error().to_string();
  EXPECT_TRUE(*released);
  info = (*direct)->describe(name);
  ASSERT_TRUE(info.ok());
  EXPECT_TRUE(info->holders.empty());  // nothing leaked
  EXPECT_TRUE(info->waiters.empty());
}

TEST(RedisFault, LostTryAcquireReplyIsResolvedByTheOwnerToken) {
  lost_reply_after_script_ran(0ms);
}

TEST(RedisFault, LostBlockingAcquireReplyIsResolvedByTheOwnerToken) {
  lost_reply_after_script_ran(10s);
}

// Without client retries the uncertain outcome is reported as unavailable;
// a retry with the same owner token (here by hand) still finds the lease.
TEST(RedisFault, UnretriedLostReplyIsUnavailableAndTheSameTokenFindsIt) {
  auto proxy = proxy_to_server();
  ASSERT_NE(proxy, nullptr);
  auto through = open_store(via(*proxy, "?timeout=2000"));
  auto direct = open_store(server().url());
  ASSERT_TRUE(through.ok() && direct.ok());
  store::AcquireSpec spec;
  spec.name = unique("unretried");
  spec.token = OwnerToken::random();
  spec.ttl = 30s;
  proxy->set_delay(400ms);
  auto pending = std::async(std::launch::async,
                            [&] { return (*through)->acquire(spec, 0ms); });
  ASSERT_TRUE(eventually([&] {
    auto info = (*direct)->describe(spec.name);
    return info.ok() && info->holders.size() == 1;
  }));
  proxy->set_mode(TcpProxy::Mode::blackhole);
  proxy->set_delay(0ms);
  proxy->set_mode(TcpProxy::Mode::pass);
  proxy->cut_all();
  auto first = pending.get();
  ASSERT_FALSE(first.ok());
  EXPECT_EQ(first.error().code(), Errc::unavailable)
      << first.error().to_string();
  auto retry = (*through)->acquire(spec, 0ms);
  ASSERT_TRUE(retry.ok()) << retry.error().to_string();
  EXPECT_EQ(retry->token, spec.token);
  auto info = (*direct)->describe(spec.name);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->holders.size(), 1u);
  EXPECT_EQ(info->last_fencing_token, retry->fencing_token);
  EXPECT_TRUE((*through)->release(spec.name, spec.token)->was_held);
}

// A silent network: every call fails with unavailable within the configured
// per-command timeout (plus the client's retries), never hangs for the wait.
TEST(RedisFault, BlackholeFailsUnavailableWithinTheTimeout) {
  auto proxy = proxy_to_server();
  ASSERT_NE(proxy, nullptr);
  ClientOptions copts;
  copts.max_retries = 1;
  copts.retry_interval = 10ms;
  auto c = open_client(via(*proxy, "?timeout=300"), copts);
  ASSERT_TRUE(c.ok()) << c.error().to_string();
  auto direct = open_store(server().url());
  ASSERT_TRUE(direct.ok());
  const std::string name = unique("blackhole");
  proxy->set_mode(TcpProxy::Mode::blackhole);
  AcquireOptions o;
  o.ttl = 10s;
  for (const auto wait : {0ms, 60'000ms}) {
    const auto t0 = Clock::now();
    auto l = c->acquire(name, wait, o);
    const auto took = Clock::now() - t0;
    ASSERT_FALSE(l.ok());
    EXPECT_EQ(l.error().code(), Errc::unavailable) << l.error().to_string();
    EXPECT_NE(l.error().message().find("no reply within 300ms"),
              std::string::npos)
        << l.error().to_string();
    // 2 attempts x (at most a subscribe and a script) x 300 ms, with a wide
    // margin for a loaded machine; far below the 60 s wait.
    EXPECT_LT(took, 15s) << "wait " << wait.count() << "ms";
  }
  // Nothing reached the server.
  auto info = (*direct)->describe(name);
  ASSERT_TRUE(info.ok());
  EXPECT_TRUE(info->holders.empty());
  EXPECT_TRUE(info->waiters.empty());
  // Back to pass: the same client works again.
  proxy->set_mode(TcpProxy::Mode::pass);
  auto l = c->try_acquire(name, o);
  ASSERT_TRUE(l.ok()) << l.error().to_string();
  EXPECT_TRUE(*c->release(*l));
}

}  // namespace
}  // namespace baton::testing
