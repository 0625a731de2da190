// tests/etcd/etcd_shared_test.cc — rule 18 (shared mode) on etcd://, what
// the conformance suite cannot see: the mode's encoding (the Txn compare
// that grants a reader at once relies on it) and the size of the herd (a
// writer's release wakes the readers behind it, not every waiter).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <future>
#include <string>
#include <vector>

#include "etcd_test_util.h"

namespace baton::testing {
namespace {

using namespace std::chrono_literals;
using store::etcd::decode;
using store::etcd::encode;
using store::etcd::kSharedFloor;
using store::etcd::Value;

TEST(EtcdShared, TheModeSortsTheValueAroundTheSharedFloor) {
  Value x;
  x.held = true;
  x.label = "writer";
  Value s = x;
  s.shared = true;
  const std::string ex = encode(x), sh = encode(s);
  // One compare over the lock's range ("every value > floor") is true only
  // when every key is a shared request, held or waiting.
  EXPECT_LT(ex, std::string(kSharedFloor));
  EXPECT_GT(sh, std::string(kSharedFloor));
  x.held = false;
  x.all = true;
  EXPECT_LT(encode(x), std::string(kSharedFloor));
  auto dx = decode(ex), ds = decode(sh);
  ASSERT_TRUE(dx && ds);
  EXPECT_FALSE(dx->shared);
  EXPECT_TRUE(ds->shared);
  EXPECT_TRUE(ds->held);
  EXPECT_EQ(ds->label, "writer");
  EXPECT_FALSE(decode("b3 1 0 1 1 30 0 0 0 0 ")) << "unknown kind accepted";
}

AcquireSpec shared_spec(const std::string& name, bool shared,
                        const std::string& label) {
  AcquireSpec s;
  s.name = name;
  s.token = OwnerToken::random();
  s.ttl = 60s;
  s.label = label;
  s.shared = shared;
  return s;
}

// The second reader of a lock is granted by the fast path's nested Txn
// (every value of the lock > the floor): its key is created held, so its
// create revision is its fencing token (a queued request's claim is a
// later write).
TEST(EtcdShared, ASecondReaderIsCreatedHeldInOneTxn) {
  auto t = open_test_store(shared_cluster().url());
  const std::string name = unique_name("shared-fast");
  auto r1 = t.acquire(shared_spec(name, true, "r1"), 0ms);
  auto r2 = t.acquire(shared_spec(name, true, "r2"), 0ms);
  ASSERT_TRUE(r1.ok() && r2.ok());
  for (const auto* g : {&*r1, &*r2}) {
    auto e = t.etcd->read_entry(name, g->token, cx());
    ASSERT_TRUE(e.ok() && e->has_value());
    EXPECT_TRUE((*e)->v.shared && (*e)->v.held);
    EXPECT_EQ((*e)->create_rev, (*e)->mod_rev) << "not created held";
    EXPECT_EQ(static_cast<std::uint64_t>((*e)->create_rev), g->fencing_token);
  }
  ASSERT_TRUE(t.release(name, r1->token)->was_held);
  ASSERT_TRUE(t.release(name, r2->token)->was_held);
  auto info = t.describe(name);
  ASSERT_TRUE(info.ok());
  EXPECT_TRUE(info->holders.empty() && info->waiters.empty());
}

// Queue behind a writer: 10 readers, a writer, 10 readers. The writer's
// release grants the first 10 together and wakes only them (the second
// writer watches the reader just ahead, the last 10 readers the second
// writer); releasing the readers in order wakes the writer once; its
// release wakes the last 10. 21 wake-ups (a herd: every waiter on every
// delete, hundreds).
TEST(EtcdShared, AWritersReleaseWakesOnlyTheReadersBehindIt) {
  auto t = open_test_store(shared_cluster().url());
  const std::string name = unique_name("shared-herd");
  auto holder = t.acquire(shared_spec(name, false, "w0"), 0ms);
  ASSERT_TRUE(holder.ok()) << holder.error().to_string();
  constexpr int kReaders = 10;
  std::vector<AcquireSpec> specs;
  for (int i = 0; i < 2 * kReaders + 1; ++i) {
    const bool writer = i == kReaders;
    specs.push_back(
        shared_spec(name, !writer, writer ? "w1" : "r" + std::to_string(i)));
  }
  std::vector<std::future<Result<Lease>>> f;
  for (std::size_t i = 0; i < specs.size(); ++i) {
    f.push_back(std::async(std::launch::async,
                           [&, i] { return t.acquire(specs[i], 60s); }));
    bool queued = false;
    for (int k = 0; k < 1000 && !queued; ++k) {
      auto info = t.describe(name);
      queued = info.ok() && info->waiters.size() == i + 1;
      if (!queued) std::this_thread::sleep_for(2ms);
    }
    ASSERT_TRUE(queued) << specs[i].label << " never queued";
  }
  auto info = t.describe(name);
  ASSERT_TRUE(info.ok());
  for (std::size_t i = 0; i < specs.size(); ++i) {
    EXPECT_EQ(info->waiters[i].shared, specs[i].shared) << i;
  }
  const std::uint64_t wakes0 = t.etcd->wakeups();
  ASSERT_TRUE(t.release(name, holder->token)->was_held);
  std::vector<Lease> first;
  for (int i = 0; i < kReaders; ++i) {
    auto g = f[static_cast<std::size_t>(i)].get();
    ASSERT_TRUE(g.ok()) << g.error().to_string();
    EXPECT_TRUE(g->shared);
    EXPECT_GT(g->fencing_token, holder->fencing_token);
    first.push_back(*g);
  }
  const std::uint64_t wakes1 = t.etcd->wakeups() - wakes0;
  EXPECT_EQ(f[kReaders].wait_for(100ms), std::future_status::timeout)
      << "the writer was granted beside readers";
  info = t.describe(name);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->holders.size(), static_cast<std::size_t>(kReaders));
  EXPECT_EQ(info->waiters.size(), static_cast<std::size_t>(kReaders + 1));
  for (const auto& g : first) {
    ASSERT_TRUE(t.release(name, g.token)->was_held);
  }
  auto w1 = f[kReaders].get();
  ASSERT_TRUE(w1.ok()) << w1.error().to_string();
  EXPECT_FALSE(w1->shared);
  for (const auto& g : first) EXPECT_GT(w1->fencing_token, g.fencing_token);
  for (int i = kReaders + 1; i < 2 * kReaders + 1; ++i) {
    EXPECT_EQ(f[static_cast<std::size_t>(i)].wait_for(0ms),
              std::future_status::timeout)
        << "a reader behind the writer was granted with it";
  }
  ASSERT_TRUE(t.release(name, w1->token)->was_held);
  for (int i = kReaders + 1; i < 2 * kReaders + 1; ++i) {
    auto g = f[static_cast<std::size_t>(i)].get();
    ASSERT_TRUE(g.ok()) << g.error().to_string();
    EXPECT_GT(g->fencing_token, w1->fencing_token);
    EXPECT_TRUE(t.release(name, g->token)->was_held);
  }
  const std::uint64_t wakes = t.etcd->wakeups() - wakes0;
  std::printf("[shared-herd] %llu wake-ups (%llu for the first release)\n",
              static_cast<unsigned long long>(wakes),
              static_cast<unsigned long long>(wakes1));
  EXPECT_GE(wakes1, static_cast<std::uint64_t>(kReaders));
  EXPECT_LE(wakes1, static_cast<std::uint64_t>(kReaders) + 2);
  EXPECT_GE(wakes, static_cast<std::uint64_t>(2 * kReaders + 1));
  EXPECT_LE(wakes, static_cast<std::uint64_t>(2 * kReaders + 1) + 5);
}

}  // namespace
}  // namespace baton::testing
