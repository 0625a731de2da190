// tests/etcd/etcd_watch_test.cc — the etcd:// change feed (Store::watch;
// docs/stores/etcd.md, "Change feed") beyond the conformance suite: it
// is quiet for changes outside its prefix, an extend to a new length
// wakes it, and a member killed under its stream wakes it at once and the
// feed goes on on another member.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "etcd_test_util.h"
#include "feed_wait.h"

namespace baton::testing {
namespace {

using namespace std::chrono_literals;
using std::chrono::steady_clock;

std::unique_ptr<Waitable> feed_on(const TestStore& t,
                                  const std::string& prefix) {
  auto f = t.etcd->watch(prefix, cx());
  EXPECT_TRUE(f.ok()) << f.error().to_string();
  return f.ok() ? std::move(*f) : nullptr;
}

TEST(EtcdWatch, AChangeOutsideThePrefixDoesNotWakeTheFeed) {
  TestStore t = open_test_store(shared_cluster().url());
  const std::string base = unique_name("watch-quiet");
  auto f = feed_on(t, base + "/a/");
  ASSERT_NE(f, nullptr);
  auto l = t.acquire(spec_of(base + "/b/x", 30s), 0ms);
  ASSERT_TRUE(l.ok()) << l.error().to_string();
  EXPECT_GE(wait_once(*f, 1500ms), 1400ms) << "woken by a lock elsewhere";
  ASSERT_TRUE(*t.client->release(*l));
}

TEST(EtcdWatch, AnExtendToANewLengthWakesTheFeed) {
  TestStore t = open_test_store(shared_cluster().url());
  const std::string base = unique_name("watch-extend");
  auto f = feed_on(t, base);
  ASSERT_NE(f, nullptr);
  auto l = t.acquire(spec_of(base + "/x", 5s), 0ms);
  ASSERT_TRUE(l.ok()) << l.error().to_string();
  EXPECT_LT(wait_once(*f, 10s), 5s) << "the grant did not wake the feed";
  // A new length moves the key to a new lease: a put in the range.
  ASSERT_TRUE(t.client->extend(*l, 20s).ok());
  EXPECT_LT(wait_once(*f, 10s), 5s) << "the extend did not wake the feed";
  ASSERT_TRUE(*t.client->release(*l));
  EXPECT_LT(wait_once(*f, 10s), 5s) << "the release did not wake the feed";
}

TEST(EtcdWatch, AMemberKilledUnderTheFeedWakesItAndItGoesOn) {
  EtcdCluster& cluster = shared_cluster();
  // The URL lists member 0 first: a new store's feed opens its stream there.
  TestStore watcher = open_test_store(cluster.url());
  TestStore other = open_test_store(cluster.url());
  const std::string base = unique_name("watch-kill");
  auto f = feed_on(watcher, base);
  ASSERT_NE(f, nullptr);
  cluster.kill(0);
  EXPECT_LT(wait_once(*f, 20s), 5s) << "the broken stream did not wake it";
  // Woken again once a new stream is open on another member.
  EXPECT_LT(wait_once(*f, 20s), 10s) << "no new stream";
  std::atomic<bool> made{false};
  std::thread grant([&] {
    std::this_thread::sleep_for(300ms);
    made = true;
    auto l = other.acquire(spec_of(base + "/x", 30s), 0ms);
    EXPECT_TRUE(l.ok()) << l.error().to_string();
    if (l.ok()) (void)other.client->release(*l);
  });
  bool woke = false;
  for (int i = 0; i < 5 && !woke; ++i) {
    woke = wait_once(*f, 20s) < 15s && made.load();
  }
  grant.join();
  cluster.start(0);
  EXPECT_TRUE(woke) << "the feed did not go on after its member died";
}

}  // namespace
}  // namespace baton::testing
