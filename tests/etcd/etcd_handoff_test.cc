// tests/etcd/etcd_handoff_test.cc — the handoff on etcd://
// (docs/stores/etcd.md "The release grants the next in line"): the release
// of a contended mutex grants the single exclusive request just behind it
// in its own transaction, so a handoff costs one raft commit, not two. The
// waiter finds its grant in the watch event or by a read; when the request
// behind changed or left, the release is the plain delete and the waiter
// claims.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <string>
#include <thread>

#include "etcd_test_util.h"

namespace baton::testing {
namespace {

using namespace std::chrono_literals;

// A holder granted after a wait (the lock is contended: its release looks
// for the request behind it). Returns its grant.
Lease contended_holder(const TestStore& s, const std::string& name) {
  auto first = s.acquire(spec_of(name, 30s, "first"), 0ms);
  EXPECT_TRUE(first.ok()) << first.error().to_string();
  auto h = std::async(std::launch::async,
                      [&] { return s.acquire(spec_of(name, 30s, "h"), 20s); });
  EXPECT_TRUE(eventually([&] { return waiters_of(s, name) == 1; }));
  EXPECT_TRUE(s.release(name, first->token)->was_held);
  auto g = h.get();
  EXPECT_TRUE(g.ok()) << g.error().to_string();
  return *g;
}

// The waiter watches its own key's puts as well as the delete of the key
// ahead, and the release puts the waiter's key before it deletes its own:
// etcd then usually sends the put first (7 times in 8), and the waiter
// takes its grant from the event with no read. Over 16 handoffs most come
// that way; every one is a grant of the right key. Not every release
// hands over: its serializable read of the queue comes from the member the
// store talks to, which may not have the waiter's key yet (then the plain
// release, and the waiter claims). Every handoff a release makes is taken
// as one by its waiter, whether from the event, a read, or (its watch
// opened after the release) its next queue read.
TEST(EtcdHandoff, TheWaiterTakesItsGrantFromTheWatchEvent) {
  auto t = open_test_store(shared_cluster().url());
  const TestStore& s = t;
  const std::string name = unique_name("handoff-event");
  Lease h = contended_holder(s, name);
  const auto by_event = s.etcd->handed_by_event(), handed = s.etcd->handed(),
             handoffs = s.etcd->handoffs();
  for (int i = 0; i < 16; ++i) {
    auto w = std::async(std::launch::async, [&] {
      return s.acquire(spec_of(name, 30s, "w"), 20s);
    });
    ASSERT_TRUE(eventually([&] { return waiters_of(s, name) == 1; }));
    ASSERT_TRUE(s.release(name, h.token)->was_held);
    auto g = w.get();
    ASSERT_TRUE(g.ok()) << g.error().to_string();
    EXPECT_GT(g->fencing_token, h.fencing_token);
    auto info = s.describe(name);
    ASSERT_TRUE(info.ok());
    ASSERT_EQ(info->holders.size(), 1u);
    EXPECT_EQ(info->holders[0].fencing_token, g->fencing_token);
    h = *g;
  }
  EXPECT_EQ(s.etcd->handed() - handed, s.etcd->handoffs() - handoffs);
  EXPECT_GE(s.etcd->handed_by_event(), by_event + 8)
      << "by event: " << s.etcd->handed_by_event() - by_event << " of 16";
  EXPECT_TRUE(s.release(name, h.token)->was_held);
}

TEST(EtcdHandoff, TheReleaseGrantsTheNextInItsOwnTransaction) {
  auto t = open_test_store(shared_cluster().url());
  const TestStore& s = t;
  const std::string name = unique_name("handoff");
  const Lease h = contended_holder(s, name);
  const auto asked = std::chrono::steady_clock::now();
  auto w = std::async(std::launch::async,
                      [&] { return s.acquire(spec_of(name, 30s, "w"), 20s); });
  ASSERT_TRUE(eventually([&] { return waiters_of(s, name) == 1; }));
  const auto handoffs = s.etcd->handoffs(), handed = s.etcd->handed();
  ASSERT_TRUE(s.release(name, h.token)->was_held);
  ASSERT_EQ(w.wait_for(5s), std::future_status::ready);
  auto g = w.get();
  const auto got = std::chrono::steady_clock::now();
  ASSERT_TRUE(g.ok()) << g.error().to_string();
  EXPECT_EQ(s.etcd->handoffs(), handoffs + 1) << "the release did not grant";
  EXPECT_EQ(s.etcd->handed(), handed + 1)
      << "the waiter did not find its grant";
  EXPECT_GT(g->fencing_token, h.fencing_token);
  // valid_for counts from the call's send (store.h): the deadline it gives
  // is no later than the TTL from now (the lease was last renewed before).
  EXPECT_GE(g->local_deadline, asked);
  EXPECT_GT(g->local_deadline, got);
  EXPECT_LE(g->local_deadline, got + 30s);
  // The grant is the release's write: describe shows the token returned,
  // and a retry with the same token (rule 17) finds the same lease.
  auto info = s.describe(name);
  ASSERT_TRUE(info.ok());
  ASSERT_EQ(info->holders.size(), 1u);
  EXPECT_EQ(info->holders[0].label, "w");
  EXPECT_EQ(info->holders[0].fencing_token, g->fencing_token);
  AcquireSpec retry = spec_of(name, 30s, "w");
  retry.token = g->token;
  auto again = s.acquire(retry, 0ms);
  ASSERT_TRUE(again.ok()) << again.error().to_string();
  EXPECT_EQ(again->fencing_token, g->fencing_token);
  EXPECT_TRUE(s.release(name, g->token)->was_held);
}

TEST(EtcdHandoff, ANextInLineThatLeftMakesThePlainRelease) {
  auto t = open_test_store(shared_cluster().url());
  const TestStore& s = t;
  const std::string name = unique_name("handoff-left");
  const Lease h = contended_holder(s, name);
  // The release will try the request behind it as last read: w1, which
  // then times out and withdraws before the release.
  auto w1 = std::async(std::launch::async,
                       [&] { return s.acquire(spec_of(name, 30s, "w1"), 1s); });
  ASSERT_TRUE(eventually([&] { return waiters_of(s, name) == 1; }));
  auto q = s.etcd->read_queue(name, cx());
  ASSERT_TRUE(q.ok());
  s.etcd->remember_next(*s.etcd->known_key(name, h.token), *q);
  auto r1 = w1.get();
  ASSERT_FALSE(r1.ok());
  EXPECT_EQ(r1.error().code(), Errc::timeout);
  auto w2 = std::async(std::launch::async, [&] {
    return s.acquire(spec_of(name, 30s, "w2"), 20s);
  });
  ASSERT_TRUE(eventually([&] { return waiters_of(s, name) == 1; }));
  const auto handoffs = s.etcd->handoffs();
  ASSERT_TRUE(s.release(name, h.token)->was_held);
  ASSERT_EQ(w2.wait_for(5s), std::future_status::ready);
  auto g = w2.get();
  ASSERT_TRUE(g.ok()) << g.error().to_string();
  EXPECT_EQ(s.etcd->handoffs(), handoffs) << "granted a request that had left";
  EXPECT_GT(g->fencing_token, h.fencing_token);
  auto info = s.describe(name);
  ASSERT_TRUE(info.ok());
  ASSERT_EQ(info->holders.size(), 1u);
  EXPECT_EQ(info->holders[0].label, "w2");
  EXPECT_TRUE(s.release(name, g->token)->was_held);
}

// A waiter that waited longer than its TTL and was granted by the release:
// its validity counts from its last keep-alive (sent before the grant), so
// it is at most the TTL, and etcd ends the lease by its own clock when
// nobody extends it.
TEST(EtcdHandoff, AWaiterGrantedAfterWaitingLongerThanItsTtlIsHonest) {
  auto t = open_test_store(shared_cluster().url());
  const TestStore& s = t;
  const std::string name = unique_name("handoff-long");
  const Lease h = contended_holder(s, name);
  const auto asked = std::chrono::steady_clock::now();
  auto w = std::async(std::launch::async,
                      [&] { return s.acquire(spec_of(name, 2s, "w"), 20s); });
  ASSERT_TRUE(eventually([&] { return waiters_of(s, name) == 1; }));
  std::this_thread::sleep_for(3s);
  const auto handed = s.etcd->handed();
  ASSERT_TRUE(s.release(name, h.token)->was_held);
  auto g = w.get();
  ASSERT_TRUE(g.ok()) << g.error().to_string();
  const auto got = std::chrono::steady_clock::now();
  EXPECT_EQ(s.etcd->handed(), handed + 1);
  EXPECT_GT(got - asked, 3s);
  // The deadline valid_for gives (from the call's send, store.h) is no
  // later than the TTL from now: the waiter's lease was last renewed
  // before the grant.
  EXPECT_GT(g->local_deadline, got);
  EXPECT_LE(g->local_deadline, got + 2s);
  // Not extended: gone within the TTL plus etcd's whole-second rounding.
  EXPECT_TRUE(eventually([&] {
    auto info = s.describe(name);
    return info.ok() && info->holders.empty();
  })) << "the lease outlived its TTL";
}

}  // namespace
}  // namespace baton::testing
