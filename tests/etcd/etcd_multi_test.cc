// tests/etcd/etcd_multi_test.cc — acquire_all and acquire_some on etcd://:
// a waiting acquire_all counts, for every request behind it in a lock's
// queue, as the exclusive request it is. A single request (mutex or
// semaphore) queued behind it waits until it is granted (and released),
// and goes when it times out (its keys withdrawn). Opposite orders never
// deadlock; more names than one transaction holds are refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "etcd_test_util.h"

namespace baton::testing {
namespace {

using namespace std::chrono_literals;

AcquireSpec single(const std::string& name, std::uint32_t capacity,
                   const std::string& label) {
  AcquireSpec s;
  s.name = name;
  s.token = OwnerToken::random();
  s.ttl = 60s;
  s.capacity = capacity;
  s.label = label;
  return s;
}

MultiSpec all_of(std::vector<std::string> names, std::uint32_t capacity) {
  MultiSpec m;
  m.names = std::move(names);
  m.reservation = OwnerToken::random();
  m.ttl = 60s;
  m.capacity = capacity;
  m.label = "all";
  m.all_or_nothing = true;
  return m;
}

// Capacity 1: lock L free. Capacity 2: one slot of L held, so the
// acquire_all has room on L (it waits for N only) and a single request
// behind it has room only if the waiting acquire_all is not counted.
class EtcdAllAhead : public ::testing::TestWithParam<std::uint32_t> {};

TEST_P(EtcdAllAhead, ASingleRequestBehindAWaitingAcquireAllWaitsForIt) {
  const std::uint32_t cap = GetParam();
  auto t = open_test_store(shared_cluster().url());
  const TestStore& s = t;
  const std::string l = unique_name("all-ahead-l"),
                    n = unique_name("all-ahead-n");
  std::vector<Lease> n_holders;
  for (std::uint32_t i = 0; i < cap; ++i) {
    auto g = s.acquire(single(n, cap, "n" + std::to_string(i)), 0ms);
    ASSERT_TRUE(g.ok()) << g.error().to_string();
    n_holders.push_back(*g);
  }
  std::optional<Lease> l_holder;
  if (cap > 1) {
    auto g = s.acquire(single(l, cap, "l0"), 0ms);
    ASSERT_TRUE(g.ok()) << g.error().to_string();
    l_holder = *g;
  }

  // 1. It times out: the request behind it waits until then, then goes.
  {
    const MultiSpec m = all_of({l, n}, cap);
    auto all = std::async(std::launch::async,
                          [&] { return s.acquire_multi(m, 1500ms); });
    ASSERT_TRUE(eventually([&] { return waiters_of(s, l) == 1; }));
    auto late_try = s.acquire(single(l, cap, "try"), 0ms);
    ASSERT_FALSE(late_try.ok()) << "a try passed a waiting acquire_all";
    EXPECT_EQ(late_try.error().code(), Errc::not_acquired);
    auto behind = std::async(std::launch::async, [&] {
      return s.acquire(single(l, cap, "behind"), 20s);
    });
    ASSERT_TRUE(eventually([&] { return waiters_of(s, l) == 2; }));
    EXPECT_EQ(behind.wait_for(300ms), std::future_status::timeout)
        << "a request passed a waiting acquire_all";
    auto r = all.get();
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code(), Errc::timeout) << r.error().to_string();
    ASSERT_EQ(behind.wait_for(5s), std::future_status::ready)
        << "the request behind did not go when the acquire_all timed out";
    auto g = behind.get();
    ASSERT_TRUE(g.ok()) << g.error().to_string();
    EXPECT_TRUE(s.release(l, g->token)->was_held);
  }

  // 2. It is granted: the request behind waits until it releases L.
  {
    const MultiSpec m = all_of({l, n}, cap);
    auto all =
        std::async(std::launch::async, [&] { return s.acquire_multi(m, 20s); });
    ASSERT_TRUE(eventually([&] { return waiters_of(s, l) == 1; }));
    auto behind = std::async(std::launch::async, [&] {
      return s.acquire(single(l, cap, "behind2"), 20s);
    });
    ASSERT_TRUE(eventually([&] { return waiters_of(s, l) == 2; }));
    EXPECT_EQ(behind.wait_for(300ms), std::future_status::timeout)
        << "a request passed a waiting acquire_all";
    EXPECT_TRUE(s.release(n, n_holders[0].token)->was_held);
    ASSERT_EQ(all.wait_for(5s), std::future_status::ready)
        << "the acquire_all was not granted when N came free";
    auto r = all.get();
    ASSERT_TRUE(r.ok()) << r.error().to_string();
    ASSERT_EQ(r->size(), 2u);
    EXPECT_EQ(behind.wait_for(300ms), std::future_status::timeout)
        << "granted beside the acquire_all's lease past capacity";
    std::uint64_t all_l_fencing = 0;
    for (const auto& g : *r) {
      if (g.name == l) all_l_fencing = g.fencing_token;
    }
    EXPECT_TRUE(s.release(l, m.reservation)->was_held);
    ASSERT_EQ(behind.wait_for(5s), std::future_status::ready)
        << "the request behind did not go when the acquire_all released L";
    auto g = behind.get();
    ASSERT_TRUE(g.ok()) << g.error().to_string();
    EXPECT_GT(g->fencing_token, all_l_fencing);
    EXPECT_TRUE(s.release(l, g->token)->was_held);
    EXPECT_TRUE(s.release(n, m.reservation)->was_held);
  }
  for (std::size_t i = 1; i < n_holders.size(); ++i) {
    EXPECT_TRUE(s.release(n, n_holders[i].token)->was_held);
  }
  if (l_holder) {
    EXPECT_TRUE(s.release(l, l_holder->token)->was_held);
  }
}

// acquire_all requests on the same locks in opposite orders, with single
// requests among them: each acquire_all's keys share one create revision
// (one Txn), so every queue orders them the same way and none waits for
// another that waits for it (rule 11). A cycle would show as a timeout.
TEST(EtcdAllAheadNoCycle, OppositeOrdersAndSinglesNeverDeadlock) {
  auto t = open_test_store(shared_cluster().url());
  const TestStore& s = t;
  const std::string a = unique_name("cycle-a"), b = unique_name("cycle-b"),
                    c = unique_name("cycle-c");
  const std::vector<std::vector<std::string>> orders = {
      {a, b, c}, {c, b, a}, {b, a}, {c, a}};
  std::atomic<int> failures{0}, inside_a{0}, overlaps{0};
  std::vector<std::thread> threads;
  for (std::size_t w = 0; w < orders.size() + 1; ++w) {
    threads.emplace_back([&, w] {
      for (int round = 0; round < 15; ++round) {
        if (w == orders.size()) {  // a single request on a
          auto g = s.acquire(single(a, 1, "single"), 20s);
          if (!g.ok()) {
            failures.fetch_add(1);
            continue;
          }
          if (inside_a.fetch_add(1) != 0) overlaps.fetch_add(1);
          std::this_thread::sleep_for(1ms);
          inside_a.fetch_sub(1);
          if (!s.release(a, g->token).ok()) failures.fetch_add(1);
          continue;
        }
        MultiSpec m = all_of(orders[w], 1);
        auto r = s.acquire_multi(m, 20s);
        if (!r.ok() || r->size() != orders[w].size()) {
          failures.fetch_add(1);
          continue;
        }
        const bool has_a =
            std::find(orders[w].begin(), orders[w].end(), a) != orders[w].end();
        if (has_a && inside_a.fetch_add(1) != 0) overlaps.fetch_add(1);
        std::this_thread::sleep_for(1ms);
        if (has_a) inside_a.fetch_sub(1);
        for (const auto& name : orders[w]) {
          if (!s.release(name, m.reservation).ok()) failures.fetch_add(1);
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0) << "an acquire timed out or failed";
  EXPECT_EQ(overlaps.load(), 0) << "two holders of one lock";
  for (const auto& name : {a, b, c}) {
    auto info = s.describe(name);
    ASSERT_TRUE(info.ok());
    EXPECT_TRUE(info->holders.empty() && info->waiters.empty()) << name;
  }
}

// etcd refuses a transaction of more than --max-txn-ops operations (128 by
// default), and an acquire_all or acquire_some reads, queues and claims all
// its names in one transaction each (one create revision: no wait cycle).
// More names than the store's max_txn_ops are refused before anything is
// written, naming the limit and how to raise it; up to it works.
TEST(EtcdMultiLimit, MoreNamesThanOneTransactionHoldsAreRefusedCleanly) {
  auto t = open_test_store(shared_cluster().url());
  const TestStore& s = t;
  const std::string base = unique_name("txn-limit");
  std::vector<std::string> names;
  for (int i = 0; i < 129; ++i) names.push_back(base + "/" + std::to_string(i));
  for (bool all : {true, false}) {
    MultiSpec m = all_of(names, 1);
    m.all_or_nothing = all;
    auto r = s.acquire_multi(m, 0ms);
    ASSERT_FALSE(r.ok()) << "129 names in one etcd transaction";
    EXPECT_EQ(r.error().code(), Errc::invalid_argument)
        << r.error().to_string();
    EXPECT_NE(r.error().message().find("129"), std::string::npos)
        << r.error().to_string();
    EXPECT_NE(r.error().message().find("max_txn_ops"), std::string::npos)
        << r.error().to_string();
    EXPECT_NE(r.error().message().find("--max-txn-ops"), std::string::npos)
        << r.error().to_string();
  }
  auto listed = s.etcd->list(base + "/", 1000, cx());
  ASSERT_TRUE(listed.ok()) << listed.error().to_string();
  EXPECT_TRUE(listed->empty()) << "a refused acquire_all left keys behind";

  names.pop_back();  // 128: etcd's default limit
  MultiSpec m = all_of(names, 1);
  auto r = s.acquire_multi(m, 0ms);
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_EQ(r->size(), 128u);
  for (const auto& n : names) {
    auto rel = s.release(n, m.reservation);
    ASSERT_TRUE(rel.ok()) << rel.error().to_string();
    EXPECT_TRUE(rel->was_held) << n;
  }
}

TEST(EtcdMultiLimit, MaxTxnOpsInTheUrlIsCheckedAndUsed) {
  for (const char* v : {"0", "-1", "12x", "", "1025"}) {
    auto s = baton::open_store(shared_cluster().url() + "?max_txn_ops=" + v);
    ASSERT_FALSE(s.ok()) << "max_txn_ops=" << v << " accepted";
    EXPECT_EQ(s.error().code(), Errc::invalid_argument);
    EXPECT_NE(s.error().message().find("max_txn_ops"), std::string::npos)
        << s.error().to_string();
  }
  auto t = open_test_store(shared_cluster().url() + "?max_txn_ops=4");
  const std::string base = unique_name("txn-limit4");
  auto r = t.acquire_multi(
      all_of({base + "/a", base + "/b", base + "/c", base + "/d", base + "/e"},
             1),
      0ms);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), Errc::invalid_argument);
  EXPECT_NE(r.error().message().find("allows 4"), std::string::npos)
      << r.error().to_string();
}

std::string capacity_name(const ::testing::TestParamInfo<std::uint32_t>& p) {
  return p.param == 1 ? "Mutex" : "Semaphore";
}

INSTANTIATE_TEST_SUITE_P(MutexAndSemaphore, EtcdAllAhead,
                         ::testing::Values(1u, 2u), capacity_name);

}  // namespace
}  // namespace baton::testing
