// tests/zookeeper/zk_watch_test.cc — the zookeeper:// change feed
// (Store::watch; docs/stores/zookeeper.md, "Change feed") beyond the
// conformance suite: it is quiet for locks outside its prefix, an extend
// (a write of the holder's node) wakes it, and a session that expired
// under it wakes it and leaves it watching in the new session.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "baton/store.h"
#include "feed_wait.h"
#include "support/tcp_proxy.h"
#include "zk_test_util.h"

namespace baton::testing {
namespace {

using std::chrono::steady_clock;

std::unique_ptr<Waitable> feed_on(const Client& c, const std::string& prefix) {
  auto f = c.watch(prefix);
  EXPECT_TRUE(f.ok()) << f.error().to_string();
  return f.ok() ? std::move(*f) : nullptr;
}

TEST(ZkWatch, ALockOutsideThePrefixDoesNotWakeTheFeed) {
  auto c = open_zk_client(shared_server().url());
  ASSERT_TRUE(c.ok()) << c.error().to_string();
  const std::string base = unique("watch-quiet");
  auto f = feed_on(*c, base + "/a/");
  ASSERT_NE(f, nullptr);
  // A new lock node under <root>/locks fires the feed's watch there; its
  // listing shows nothing new under the prefix, so the wait goes on.
  auto l = c->try_acquire(base + "/b/x", opts(30s));
  ASSERT_TRUE(l.ok()) << l.error().to_string();
  EXPECT_GE(wait_once(*f, 1500ms), 1400ms) << "woken by a lock elsewhere";
  ASSERT_TRUE(*c->release(*l));
}

TEST(ZkWatch, AnExtendWakesTheFeed) {
  auto c = open_zk_client(shared_server().url());
  ASSERT_TRUE(c.ok()) << c.error().to_string();
  const std::string base = unique("watch-extend");
  auto f = feed_on(*c, base);
  ASSERT_NE(f, nullptr);
  auto l = c->try_acquire(base + "/x", opts(30s));
  ASSERT_TRUE(l.ok()) << l.error().to_string();
  EXPECT_LT(wait_once(*f, 10s), 5s) << "the grant did not wake the feed";
  // Quiet now: the lease runs 30 s, nothing changes.
  EXPECT_GE(wait_once(*f, 1s), 900ms) << "woken with nothing changed";
  ASSERT_TRUE(c->extend(*l, 30s).ok());
  EXPECT_LT(wait_once(*f, 10s), 5s) << "the extend did not wake the feed";
  ASSERT_TRUE(*c->release(*l));
  EXPECT_LT(wait_once(*f, 10s), 5s) << "the release did not wake the feed";
}

TEST(ZkWatch, ASessionThatExpiredWakesTheFeedAndItWatchesOn) {
  auto proxy = TcpProxy::start("127.0.0.1", shared_server().port());
  ASSERT_TRUE(proxy.ok()) << proxy.error().to_string();
  auto watcher = open_zk_client(
      "zookeeper://127.0.0.1:" + std::to_string((*proxy)->port()) +
      "/baton-test?session_timeout=2s");
  ASSERT_TRUE(watcher.ok()) << watcher.error().to_string();
  auto other = open_zk_client(shared_server().url());
  ASSERT_TRUE(other.ok()) << other.error().to_string();
  const std::string base = unique("watch-expiry");
  auto f = feed_on(*watcher, base);
  ASSERT_NE(f, nullptr);

  (*proxy)->set_mode(TcpProxy::Mode::blackhole);
  // The C client gives the connection up within 2/3 of the session
  // timeout: that session event ends the wait.
  EXPECT_LT(wait_once(*f, 20s), 8s) << "the lost connection did not wake it";
  std::this_thread::sleep_for(3s);  // the server expires the 2 s session
  (*proxy)->set_mode(TcpProxy::Mode::pass);
  // Waits end at once while the feed sets its watches in the new session;
  // then a grant by another client wakes it.
  std::atomic<bool> made{false};
  std::thread grant([&] {
    std::this_thread::sleep_for(4s);
    made = true;
    auto l = other->try_acquire(base + "/x", opts(30s));
    EXPECT_TRUE(l.ok()) << l.error().to_string();
    if (l.ok()) (void)other->release(*l);
  });
  Finally join([&] { grant.join(); });
  bool woke = false;
  const auto end = steady_clock::now() + 30s;
  while (!woke && steady_clock::now() < end) {
    woke = wait_once(*f, 20s) < 15s && made.load();
  }
  EXPECT_TRUE(woke) << "the feed did not watch on in the new session";
}

// Past 1000 lock nodes under the prefix the feed watches the first 1000
// by name and ends every wait within about a second (its re-check), so a
// change of a lock it does not watch is seen that late.
TEST(ZkWatch, PastAThousandLocksAWaitEndsWithinTheRecheck) {
  ZkObserver zk(shared_server().hostport());
  ASSERT_TRUE(zk.ok());
  const std::string base = unique("watch-many");
  std::vector<std::string> dirs;
  for (int i = 0; i <= 1000; ++i) {
    char n[8];
    std::snprintf(n, sizeof n, "%04d", i);
    dirs.push_back(lock_dir(base + "/" + n));
  }
  Finally clean([&] {
    // The last one the store may have deleted itself (its janitor).
    (void)zk.remove(dirs.back());
    (void)zk.multi({dirs.begin(), dirs.end() - 1}, true);
  });
  auto c = open_zk_client(shared_server().url());  // makes <root>/locks
  ASSERT_TRUE(c.ok()) << c.error().to_string();
  ASSERT_EQ(zk.multi(dirs), ZOK);
  const auto t0 = steady_clock::now();
  auto f = feed_on(*c, base + "/");
  ASSERT_NE(f, nullptr);
  std::printf("[watch-many] armed on 1001 lock nodes in %lld ms\n",
              static_cast<long long>(
                  std::chrono::duration_cast<std::chrono::milliseconds>(
                      steady_clock::now() - t0)
                      .count()));
  EXPECT_LT(wait_once(*f, 10s), 3s) << "no re-check past the limit";
  // The last lock by name is not watched: its grant is seen at a re-check.
  std::atomic<bool> made{false};
  std::optional<Lease> held;
  std::thread grant([&] {
    std::this_thread::sleep_for(300ms);
    auto l = c->try_acquire(base + "/1000", opts(30s));
    made = true;
    EXPECT_TRUE(l.ok()) << l.error().to_string();
    if (l.ok()) held = *l;
  });
  bool seen = false;
  const auto end = steady_clock::now() + 20s;
  while (!seen && steady_clock::now() < end) {
    (void)wait_once(*f, 10s);
    seen = made.load();
  }
  grant.join();
  EXPECT_TRUE(seen);
  if (held) {
    EXPECT_TRUE(*c->release(*held));
  }
}

}  // namespace
}  // namespace baton::testing
