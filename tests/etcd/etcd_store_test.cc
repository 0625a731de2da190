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

TEST(EtcdStore, StaleReleaseDoesNotDeleteANewerGrantOnTheSameKey) {
  auto t = open_test_store(shared_cluster().url());
  const std::string name = unique_name("stale-release");
  AcquireSpec spec = spec_of(name, 30s);
  auto g1 = t.acquire(spec, 0ms);
  ASSERT_TRUE(g1.ok()) << g1.error().to_string();
  // The release read the key (create revision of the first grant)...
  auto seen = t.etcd->read_entry(name, spec.token, cx());
  ASSERT_TRUE(seen.ok() && seen->has_value());
  EXPECT_EQ((*seen)->create_rev, static_cast<std::int64_t>(g1->fencing_token));
  // ...then, before its delete arrived, the lease ended and the same token
  // acquired again: the same key, a newer create revision.
  auto rel = t.release(name, spec.token);
  ASSERT_TRUE(rel.ok() && rel->was_held);
  auto g2 = t.acquire(spec, 0ms);
  ASSERT_TRUE(g2.ok()) << g2.error().to_string();
  EXPECT_GT(g2->fencing_token, g1->fencing_token);
  // The stale delete, guarded by the old create revision, removes nothing.
  auto stale = t.etcd->remove(**seen, cx());
  ASSERT_TRUE(stale.ok()) << stale.error().to_string();
  EXPECT_FALSE(*stale);
  auto info = t.describe(name);
  ASSERT_TRUE(info.ok());
  ASSERT_EQ(info->holders.size(), 1u);
  EXPECT_EQ(info->holders[0].fencing_token, g2->fencing_token);
  auto again = t.release(name, spec.token);
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->was_held);
}

TEST(EtcdStore, WaiterNoticesItsOwnLeaseEnding) {
  auto t = open_test_store(shared_cluster().url());
  const std::string name = unique_name("waiter-lease");
  auto holder = t.acquire(spec_of(name, 30s, "holder"), 0ms);
  ASSERT_TRUE(holder.ok()) << holder.error().to_string();
  std::atomic<bool> done{false};
  Result<Lease> waited = Error(Errc::internal, "not run");
  std::thread w([&] {
    waited = t.acquire(spec_of(name, 5s, "waiter"), 20s);
    done = true;
  });
  // Wait until the waiter is queued, then end its lease the way etcd does
  // when a lease runs out (the lease goes, and its key with it).
  std::int64_t lease = 0;
  for (int i = 0; i < 500 && lease == 0; ++i) {
    auto q = t.etcd->read_queue(name, cx());
    ASSERT_TRUE(q.ok());
    for (const auto& e : q->entries) {
      if (!e.v.held) lease = e.lease;
    }
    if (lease == 0) std::this_thread::sleep_for(10ms);
  }
  ASSERT_NE(lease, 0) << "the waiter never queued";
  const auto revoked_at = std::chrono::steady_clock::now();
  ASSERT_TRUE(t.etcd->conn().lease_revoke(lease, cx()).ok());
  w.join();
  EXPECT_LT(std::chrono::steady_clock::now() - revoked_at, 3s);
  ASSERT_FALSE(waited.ok());
  EXPECT_EQ(waited.error().code(), Errc::unavailable)
      << waited.error().to_string();
  EXPECT_NE(waited.error().message().find("lease ran out"), std::string::npos)
      << waited.error().to_string();
  auto info = t.describe(name);
  ASSERT_TRUE(info.ok());
  EXPECT_TRUE(info->waiters.empty());
  EXPECT_EQ(info->holders.size(), 1u);
  EXPECT_TRUE(t.release(name, holder->token)->was_held);
}

TEST(EtcdStore, ExtendToWholeSecondsSetsTheLeaseFromNow) {
  auto t = open_test_store(shared_cluster().url());
  const std::string name = unique_name("extend");
  auto g = t.acquire(spec_of(name, 5s), 0ms);
  ASSERT_TRUE(g.ok());
  // Shorter: the key moves to a 2 s lease (nothing added to the 5 s).
  auto e1 = t.extend(name, g->token, 2s);
  ASSERT_TRUE(e1.ok()) << e1.error().to_string();
  EXPECT_EQ(e1->fencing_token, g->fencing_token);
  auto info = t.describe(name);
  ASSERT_TRUE(info.ok());
  ASSERT_EQ(info->holders.size(), 1u);
  EXPECT_LE(info->holders[0].time_left, 2s);
  // Same length again: a keep-alive; then longer: a 4 s lease.
  std::this_thread::sleep_for(1200ms);
  auto e2 = t.extend(name, g->token, 2s);
  ASSERT_TRUE(e2.ok()) << e2.error().to_string();
  auto e3 = t.extend(name, g->token, 4s);
  ASSERT_TRUE(e3.ok()) << e3.error().to_string();
  EXPECT_EQ(e3->fencing_token, g->fencing_token);
  info = t.describe(name);
  ASSERT_TRUE(info.ok());
  ASSERT_EQ(info->holders.size(), 1u);
  EXPECT_GT(info->holders[0].time_left, 2s);
  EXPECT_LE(info->holders[0].time_left, 4s);
  // The key outlives the first 5 s lease because it moved.
  std::this_thread::sleep_for(2500ms);
  EXPECT_TRUE(t.extend(name, g->token, 4s).ok());
  EXPECT_TRUE(t.release(name, g->token)->was_held);
  auto lost = t.extend(name, g->token, 4s);
  ASSERT_FALSE(lost.ok());
  EXPECT_EQ(lost.error().code(), Errc::lock_lost);
}

TEST(EtcdStore, FiftyWaitersAreGrantedInOrderAndEachReleaseWakesOne) {
  auto t = open_test_store(shared_cluster().url());
  const std::string name = unique_name("fifty");
  auto holder = t.acquire(spec_of(name, 60s, "holder"), 0ms);
  ASSERT_TRUE(holder.ok());
  constexpr int kWaiters = 50;
  std::mutex mu;
  std::vector<int> order;
  std::vector<std::uint64_t> tokens;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kWaiters; ++i) {
    threads.emplace_back([&, i] {
      auto g = t.acquire(spec_of(name, 60s, "w" + std::to_string(i)), 60s);
      if (!g.ok()) {
        failures.fetch_add(1);
        return;
      }
      {
        std::lock_guard<std::mutex> lk(mu);
        order.push_back(i);
        tokens.push_back(g->fencing_token);
      }
      if (!t.release(name, g->token).ok()) failures.fetch_add(1);
    });
    // Queue them one after another (arrival order is create order).
    for (int k = 0; k < 1000; ++k) {
      auto info = t.describe(name);
      if (info.ok() && info->waiters.size() == static_cast<std::size_t>(i + 1))
        break;
      std::this_thread::sleep_for(2ms);
    }
  }
  const std::uint64_t wakes_before = t.etcd->wakeups();
  const std::uint64_t handoffs_before = t.etcd->handoffs();
  ASSERT_TRUE(t.release(name, holder->token)->was_held);
  for (auto& th : threads) th.join();
  const std::uint64_t wakes = t.etcd->wakeups() - wakes_before;
  const std::uint64_t handoffs = t.etcd->handoffs() - handoffs_before;
  EXPECT_EQ(failures.load(), 0);
  ASSERT_EQ(order.size(), static_cast<std::size_t>(kWaiters));
  for (int i = 0; i < kWaiters; ++i) EXPECT_EQ(order[i], i) << "position " << i;
  for (int i = 1; i < kWaiters; ++i) EXPECT_GT(tokens[i], tokens[i - 1]);
  // Each waiter watches only the key just ahead: one wake-up per release
  // (a herd would wake every waiter on every release: ~1275).
  EXPECT_LE(wakes, static_cast<std::uint64_t>(kWaiters) + 5) << wakes;
  EXPECT_GE(wakes, static_cast<std::uint64_t>(kWaiters) - 1) << wakes;
  // Every waiter was granted after a wait, so its release grants the next
  // in its own transaction (the first holder's and the last waiter's do
  // not: 49 of 51).
  EXPECT_GE(handoffs, static_cast<std::uint64_t>(kWaiters) - 5) << handoffs;
  std::printf("[fifty] %llu wake-ups, %llu handoffs for %d releases\n",
              static_cast<unsigned long long>(wakes),
              static_cast<unsigned long long>(handoffs), kWaiters);
}

TEST(EtcdStore, UnknownUrlKeyAndBadPrefixAreRefused) {
  auto s = baton::open_store(shared_cluster().url() + "?colour=blue");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code(), Errc::invalid_argument);
  EXPECT_NE(s.error().message().find("colour"), std::string::npos);
  auto s2 = baton::open_store("etcd://127.0.0.1:1/a//b");
  EXPECT_FALSE(s2.ok());
}

// Shared leases (docs/stores/etcd.md "Leases"): grants of the same length
// made close together by one store share an etcd lease; a release must
// not revoke it (the other key lives on), an extend moves the key to a
// lease of its own; lease=own gives every key its own lease.
// Two grants of `ttl` in a row on t (fresh names) that share a lease: a
// loaded machine may take longer than the 250 ms window between them, so
// up to 5 tries.
struct Pair {
  std::string a, b;
  Grant ga, gb;
  store::etcd::Entry ea, eb;
};
bool shared_pair(TestStore& t, std::chrono::milliseconds ttl, Pair* p) {
  for (int i = 0; i < 5; ++i) {
    p->a = unique_name("shared-a");
    p->b = unique_name("shared-b");
    auto ga = grant_now(t, spec_of(p->a, ttl));
    auto gb = grant_now(t, spec_of(p->b, ttl));
    if (!ga.ok() || !gb.ok()) return false;
    auto ea = t.etcd->read_entry(p->a, ga->token, cx());
    auto eb = t.etcd->read_entry(p->b, gb->token, cx());
    if (!ea.ok() || !ea->has_value() || !eb.ok() || !eb->has_value()) {
      return false;
    }
    p->ga = *ga;
    p->gb = *gb;
    p->ea = **ea;
    p->eb = **eb;
    if (p->ea.lease == p->eb.lease) return true;
    (void)t.release(p->a, ga->token);
    (void)t.release(p->b, gb->token);
  }
  return false;
}

TEST(EtcdStore, GrantsShareALeaseThatAReleaseLeavesAndAnExtendLeaves) {
  auto t = open_test_store(shared_cluster().url());
  Pair p;
  ASSERT_TRUE(shared_pair(t, 30s, &p)) << "no two grants shared a lease";
  const std::string a = p.a, b = p.b;
  const auto ga = &p.ga, gb = &p.gb;
  const auto ea = &p.ea, eb = &p.eb;
  EXPECT_TRUE(ea->v.shared_lease);
  // Validity counts from the shared lease's grant: at most the TTL, at
  // most shared_window(30 s) = 250 ms less.
  EXPECT_LE(gb->valid_for, 30s);
  EXPECT_GT(gb->valid_for, 29700ms);
  auto ra = t.release(a, ga->token);
  ASSERT_TRUE(ra.ok() && ra->was_held);
  auto left = t.etcd->conn().time_to_live(eb->lease, cx());
  ASSERT_TRUE(left.ok());
  EXPECT_GT(*left, 20);  // not revoked with a's key
  auto info = t.describe(b);
  ASSERT_TRUE(info.ok());
  ASSERT_EQ(info->holders.size(), 1u);
  auto xb = t.extend(b, gb->token, 30s);
  ASSERT_TRUE(xb.ok()) << xb.error().to_string();
  EXPECT_EQ(xb->fencing_token, gb->fencing_token);
  auto moved = t.etcd->read_entry(b, gb->token, cx());
  ASSERT_TRUE(moved.ok() && moved->has_value());
  EXPECT_NE((*moved)->lease, eb->lease);
  EXPECT_FALSE((*moved)->v.shared_lease);
  EXPECT_TRUE(t.release(b, gb->token)->was_held);
  // The moved-to lease is its own: revoked after the release.
  for (int i = 0; i < 100; ++i) {
    auto l = t.etcd->conn().time_to_live((*moved)->lease, cx());
    ASSERT_TRUE(l.ok());
    if (*l < 0) break;
    std::this_thread::sleep_for(20ms);
  }
  EXPECT_LT(*t.etcd->conn().time_to_live((*moved)->lease, cx()), 0);

  auto own = open_test_store(shared_cluster().url() + "?lease=own");
  auto oa = own.acquire(spec_of(a, 30s), 0ms);
  auto ob = own.acquire(spec_of(b, 30s), 0ms);
  ASSERT_TRUE(oa.ok() && ob.ok());
  auto ka = own.etcd->read_entry(a, oa->token, cx());
  auto kb = own.etcd->read_entry(b, ob->token, cx());
  ASSERT_TRUE(ka.ok() && ka->has_value() && kb.ok() && kb->has_value());
  EXPECT_FALSE((*ka)->v.shared_lease);
  EXPECT_NE((*ka)->lease, (*kb)->lease);
  EXPECT_TRUE(own.release(a, oa->token)->was_held);
  EXPECT_TRUE(own.release(b, ob->token)->was_held);
}

// Rule 3 with a shared lease: a holder that stops extending loses the lock
// at its TTL even while another key granted on the same lease is extended.
TEST(EtcdStore, AHolderOnASharedLeaseExpiresWhileItsNeighbourIsExtended) {
  auto t = open_test_store(shared_cluster().url());
  auto other = open_test_store(shared_cluster().url());
  // 2 s TTLs: a window of 200 ms.
  Pair p;
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 3; ++i) {
    t0 = std::chrono::steady_clock::now();
    if (shared_pair(t, 2s, &p)) break;
    std::this_thread::sleep_for(1s);  // a loaded machine: later
  }
  ASSERT_EQ(p.ea.lease, p.eb.lease) << "no two grants shared a lease";
  const std::string a = p.a, b = p.b;
  const auto gb = &p.gb;
  bool taken = false;
  while (!taken && std::chrono::steady_clock::now() - t0 < 6s) {
    auto xb = t.extend(b, gb->token, 2s);
    ASSERT_TRUE(xb.ok()) << xb.error().to_string();
    taken = other.acquire(spec_of(a, 2s, "next"), 0ms).ok();
    std::this_thread::sleep_for(200ms);
  }
  const auto after = std::chrono::steady_clock::now() - t0;
  EXPECT_TRUE(taken);
  // The lease is 2 s (1 s is this cluster's minimum): gone after 2 s plus
  // the lessor's check interval, well before b's extends would allow.
  EXPECT_GE(after, 1900ms);
  EXPECT_LT(after, 4s);
  auto info = t.describe(b);
  ASSERT_TRUE(info.ok());
  ASSERT_EQ(info->holders.size(), 1u);
  EXPECT_EQ(info->holders[0].fencing_token, gb->fencing_token);
  EXPECT_TRUE(t.release(b, gb->token)->was_held);
}

}  // namespace
}  // namespace baton::testing
