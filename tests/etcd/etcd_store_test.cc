// tests/etcd/etcd_store_test.cc — etcd:// specifics against a private
// 3-member cluster: deletes guarded by create revision, a waiter whose own
// lease ends, extend-to with whole seconds, 50 waiters in order with one
// wake-up per release.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "etcd_test_util.h"

namespace baton::testing {
namespace {

using namespace std::chrono_literals;
using store::AcquireSpec;

AcquireSpec spec_of(const std::string& name, std::chrono::milliseconds ttl,
                    const std::string& label = "t") {
  AcquireSpec s;
  s.name = name;
  s.token = OwnerToken::random();
  s.ttl = ttl;
  s.label = label;
  return s;
}

TEST(EtcdStore, StaleReleaseDoesNotDeleteANewerGrantOnTheSameKey) {
  auto t = open_test_store(shared_cluster().url());
  const std::string name = unique_name("stale-release");
  AcquireSpec spec = spec_of(name, 30s);
  auto g1 = t.etcd->acquire(spec, 0ms);
  ASSERT_TRUE(g1.ok()) << g1.error().to_string();
  // The release read the key (create revision of the first grant)...
  auto seen = t.etcd->read_entry(name, spec.token);
  ASSERT_TRUE(seen.ok() && seen->has_value());
  EXPECT_EQ((*seen)->create_rev, static_cast<std::int64_t>(g1->fencing_token));
  // ...then, before its delete arrived, the lease ended and the same token
  // acquired again: the same key, a newer create revision.
  auto rel = t.etcd->release(name, spec.token);
  ASSERT_TRUE(rel.ok() && rel->was_held);
  auto g2 = t.etcd->acquire(spec, 0ms);
  ASSERT_TRUE(g2.ok()) << g2.error().to_string();
  EXPECT_GT(g2->fencing_token, g1->fencing_token);
  // The stale delete, guarded by the old create revision, removes nothing.
  auto stale = t.etcd->remove(**seen);
  ASSERT_TRUE(stale.ok()) << stale.error().to_string();
  EXPECT_FALSE(*stale);
  auto info = t.etcd->describe(name);
  ASSERT_TRUE(info.ok());
  ASSERT_EQ(info->holders.size(), 1u);
  EXPECT_EQ(info->holders[0].fencing_token, g2->fencing_token);
  auto again = t.etcd->release(name, spec.token);
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->was_held);
}

TEST(EtcdStore, WaiterNoticesItsOwnLeaseEnding) {
  auto t = open_test_store(shared_cluster().url());
  const std::string name = unique_name("waiter-lease");
  auto holder = t.etcd->acquire(spec_of(name, 30s, "holder"), 0ms);
  ASSERT_TRUE(holder.ok()) << holder.error().to_string();
  std::atomic<bool> done{false};
  Result<store::Grant> waited = Error(Errc::internal, "not run");
  std::thread w([&] {
    waited = t.etcd->acquire(spec_of(name, 5s, "waiter"), 20s);
    done = true;
  });
  // Wait until the waiter is queued, then end its lease the way etcd does
  // when a lease runs out (the lease goes, and its key with it).
  std::int64_t lease = 0;
  for (int i = 0; i < 500 && lease == 0; ++i) {
    auto q = t.etcd->read_queue(name);
    ASSERT_TRUE(q.ok());
    for (const auto& e : q->entries) {
      if (!e.v.held) lease = e.lease;
    }
    if (lease == 0) std::this_thread::sleep_for(10ms);
  }
  ASSERT_NE(lease, 0) << "the waiter never queued";
  const auto revoked_at = std::chrono::steady_clock::now();
  ASSERT_TRUE(t.etcd->conn().lease_revoke(lease).ok());
  w.join();
  EXPECT_LT(std::chrono::steady_clock::now() - revoked_at, 3s);
  ASSERT_FALSE(waited.ok());
  EXPECT_EQ(waited.error().code(), Errc::unavailable)
      << waited.error().to_string();
  EXPECT_NE(waited.error().message().find("lease ran out"), std::string::npos)
      << waited.error().to_string();
  auto info = t.etcd->describe(name);
  ASSERT_TRUE(info.ok());
  EXPECT_TRUE(info->waiters.empty());
  EXPECT_EQ(info->holders.size(), 1u);
  EXPECT_TRUE(t.etcd->release(name, holder->token)->was_held);
}

TEST(EtcdStore, ExtendToWholeSecondsSetsTheLeaseFromNow) {
  auto t = open_test_store(shared_cluster().url());
  const std::string name = unique_name("extend");
  auto g = t.etcd->acquire(spec_of(name, 5s), 0ms);
  ASSERT_TRUE(g.ok());
  // Shorter: the key moves to a 2 s lease (nothing added to the 5 s).
  auto e1 = t.etcd->extend(name, g->token, 2s);
  ASSERT_TRUE(e1.ok()) << e1.error().to_string();
  EXPECT_EQ(e1->fencing_token, g->fencing_token);
  auto info = t.etcd->describe(name);
  ASSERT_TRUE(info.ok());
  ASSERT_EQ(info->holders.size(), 1u);
  EXPECT_LE(info->holders[0].time_left, 2s);
  // Same length again: a keep-alive; then longer: a 4 s lease.
  std::this_thread::sleep_for(1200ms);
  auto e2 = t.etcd->extend(name, g->token, 2s);
  ASSERT_TRUE(e2.ok()) << e2.error().to_string();
  auto e3 = t.etcd->extend(name, g->token, 4s);
  ASSERT_TRUE(e3.ok()) << e3.error().to_string();
  EXPECT_EQ(e3->fencing_token, g->fencing_token);
  info = t.etcd->describe(name);
  ASSERT_TRUE(info.ok());
  ASSERT_EQ(info->holders.size(), 1u);
  EXPECT_GT(info->holders[0].time_left, 2s);
  EXPECT_LE(info->holders[0].time_left, 4s);
  // The key outlives the first 5 s lease because it moved.
  std::this_thread::sleep_for(2500ms);
  EXPECT_TRUE(t.etcd->extend(name, g->token, 4s).ok());
  EXPECT_TRUE(t.etcd->release(name, g->token)->was_held);
  auto lost = t.etcd->extend(name, g->token, 4s);
  ASSERT_FALSE(lost.ok());
  EXPECT_EQ(lost.error().code(), Errc::lock_lost);
}

TEST(EtcdStore, FiftyWaitersAreGrantedInOrderAndEachReleaseWakesOne) {
  auto t = open_test_store(shared_cluster().url());
  const std::string name = unique_name("fifty");
  auto holder = t.etcd->acquire(spec_of(name, 60s, "holder"), 0ms);
  ASSERT_TRUE(holder.ok());
  constexpr int kWaiters = 50;
  std::mutex mu;
  std::vector<int> order;
  std::vector<std::uint64_t> tokens;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kWaiters; ++i) {
    threads.emplace_back([&, i] {
      auto g =
          t.etcd->acquire(spec_of(name, 60s, "w" + std::to_string(i)), 60s);
      if (!g.ok()) {
        failures.fetch_add(1);
        return;
      }
      {
        std::lock_guard<std::mutex> lk(mu);
        order.push_back(i);
        tokens.push_back(g->fencing_token);
      }
      if (!t.etcd->release(name, g->token).ok()) failures.fetch_add(1);
    });
    // Queue them one after another (arrival order is create order).
    for (int k = 0; k < 1000; ++k) {
      auto info = t.etcd->describe(name);
      if (info.ok() && info->waiters.size() == static_cast<std::size_t>(i + 1))
        break;
      std::this_thread::sleep_for(2ms);
    }
  }
  const std::uint64_t wakes_before = t.etcd->wakeups();
  ASSERT_TRUE(t.etcd->release(name, holder->token)->was_held);
  for (auto& th : threads) th.join();
  const std::uint64_t wakes = t.etcd->wakeups() - wakes_before;
  EXPECT_EQ(failures.load(), 0);
  ASSERT_EQ(order.size(), static_cast<std::size_t>(kWaiters));
  for (int i = 0; i < kWaiters; ++i) EXPECT_EQ(order[i], i) << "position " << i;
  for (int i = 1; i < kWaiters; ++i) EXPECT_GT(tokens[i], tokens[i - 1]);
  // Each waiter watches only the key just ahead: one wake-up per release
  // (a herd would wake every waiter on every release: ~1275).
  EXPECT_LE(wakes, static_cast<std::uint64_t>(kWaiters) + 5) << wakes;
  EXPECT_GE(wakes, static_cast<std::uint64_t>(kWaiters) - 1) << wakes;
  std::printf("[fifty] %llu wake-ups for %d releases\n",
              static_cast<unsigned long long>(wakes), kWaiters);
}

TEST(EtcdStore, UnknownUrlKeyAndBadPrefixAreRefused) {
  auto u = core::parse_url(shared_cluster().url() + "?colour=blue");
  ASSERT_TRUE(u.ok());
  auto s = store::open_etcd_store(*u);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code(), Errc::invalid_argument);
  EXPECT_NE(s.error().message().find("colour"), std::string::npos);
  auto bad = core::parse_url("etcd://127.0.0.1:1/a//b");
  if (bad.ok()) {
    auto s2 = store::open_etcd_store(*bad);
    EXPECT_FALSE(s2.ok());
  }
}

}  // namespace
}  // namespace baton::testing
