// Unit tests of core::LockTable, one or more per CONTRACT rule: single-lock
// rules (exclusion, fencing, expiry, extend, release, FIFO, waits,
// reentrancy, idempotent retries). More in lock_table_multi_test.cc.
#include "lock_table_fixture.h"

namespace baton::core {
namespace {

TEST_F(LockTableTest, MutualExclusionMutex) {
  auto a = tok(), b = tok();
  auto ra = try_acquire("m", a);
  ASSERT_TRUE(ra.ok());
  EXPECT_TRUE(ra->granted);
  EXPECT_EQ(ra->grant.valid_for, Nanos(1s));
  auto rb = try_acquire("m", b);
  ASSERT_FALSE(rb.ok());
  EXPECT_EQ(rb.error().code(), Errc::not_acquired);
  ASSERT_EQ(rb.error().holders().size(), 1u);
  EXPECT_EQ(rb.error().holders()[0].fencing_token, ra->grant.fencing_token);
  EXPECT_EQ(rb.error().holders()[0].time_left, 1000ms);
  EXPECT_EQ(rb.error().holders()[0].label, "label");
}

TEST_F(LockTableTest, MutualExclusionSemaphore) {
  std::vector<OwnerToken> t;
  for (int i = 0; i < 3; ++i) {
    t.push_back(tok());
    auto r = try_acquire("sem", t.back(), Nanos(1s), 3);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->grant.capacity, 3u);
  }
  auto r = try_acquire("sem", tok(), Nanos(1s), 3);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().holders().size(), 3u);
  EXPECT_EQ(info("sem").holders.size(), 3u);
  EXPECT_FALSE(info("sem").free());
  // Capacity mismatch while the lock exists.
  auto bad = try_acquire("sem", tok(), Nanos(1s), 2);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code(), Errc::invalid_argument);
  EXPECT_NE(bad.error().message().find("has capacity 3; request asked for 2"),
            std::string::npos)
      << bad.error().message();
  ASSERT_TRUE(table_.release("sem", t[0]).ok());
  EXPECT_TRUE(try_acquire("sem", tok(), Nanos(1s), 3).ok());
}

TEST_F(LockTableTest, FencingMonotonicAcrossReleaseExpiryRestore) {
  std::uint64_t last = 0;
  for (int i = 0; i < 5; ++i) {
    auto t = tok();
    auto r = try_acquire("f", t, Nanos(10ms));
    ASSERT_TRUE(r.ok());
    EXPECT_GT(r->grant.fencing_token, last);
    last = r->grant.fencing_token;
    if (i % 2 == 0) {
      ASSERT_TRUE(table_.release("f", t)->was_held);
    } else {
      clock_.advance(10ms);  // expiry
    }
  }
  EXPECT_EQ(table_.fencing_high_water(), last);
  // "Restart": a new table restored from the high water.
  LockTable fresh(clock_);
  fresh.raise_fencing_floor(table_.fencing_high_water());
  auto r = fresh.acquire(req("f", tok()));
  ASSERT_TRUE(r.ok());
  EXPECT_GT(r->grant.fencing_token, last);
  fresh.raise_fencing_floor(5);  // lowering is a no-op
  EXPECT_EQ(fresh.fencing_high_water(), r->grant.fencing_token);
}

TEST_F(LockTableTest, ExpiryFreesAndDeadLeaseStaysDead) {
  auto a = tok(), b = tok();
  ASSERT_TRUE(try_acquire("e", a, Nanos(100ms)).ok());
  ASSERT_TRUE(wait_acquire("e", b, Nanos(10s)).ok());
  clock_.advance(99ms);
  EXPECT_EQ(table_.next_deadline(), clock_.now() + Nanos(1ms));
  ASSERT_TRUE(table_.extend("e", a, Nanos(100ms)).ok());
  clock_.advance(100ms);  // exactly at expiry: dead
  table_.advance();
  auto events = table_.take_events();
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].kind, Event::Kind::lease_expired);
  EXPECT_EQ(events[0].token, a);
  EXPECT_EQ(events[1].kind, Event::Kind::granted);
  EXPECT_EQ(events[1].token, b);
  EXPECT_EQ(events[1].grant.valid_for, Nanos(1s) + Nanos(199ms));
  auto ext = table_.extend("e", a, Nanos(1s));
  ASSERT_FALSE(ext.ok());
  EXPECT_EQ(ext.error().code(), Errc::lock_lost);
  auto rel = table_.release("e", a);
  ASSERT_TRUE(rel.ok());
  EXPECT_FALSE(rel->was_held);
  EXPECT_EQ(info("e").holders.size(), 1u);
  EXPECT_EQ(table_.stats().expirations, 1u);
}

TEST_F(LockTableTest, ExtendSetsExpiryToNowPlusTtl) {
  auto a = tok();
  ASSERT_TRUE(try_acquire("x", a, Nanos(10s)).ok());
  clock_.advance(1s);
  auto g = table_.extend("x", a, Nanos(2s));
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->expiry, clock_.now() + Nanos(2s));  // not 9s + 2s
  EXPECT_EQ(info("x").holders[0].time_left, 2000ms);
  // Extend of a queued request is lock_lost and changes nothing.
  auto b = tok();
  ASSERT_TRUE(wait_acquire("x", b, Nanos(5s)).ok());
  auto e = table_.extend("x", b, Nanos(2s));
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.error().code(), Errc::lock_lost);
  EXPECT_EQ(info("x").waiters.size(), 1u);
  // Bad TTL on extend: invalid, nothing changes.
  auto bad = table_.extend("x", a, Nanos(0));
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code(), Errc::invalid_argument);
  EXPECT_EQ(info("x").holders[0].time_left, 2000ms);
}

TEST_F(LockTableTest, NonOwnerReleaseChangesNothing) {
  auto a = tok();
  auto g = try_acquire("r", a);
  ASSERT_TRUE(g.ok());
  auto rel = table_.release("r", tok());
  ASSERT_TRUE(rel.ok());
  EXPECT_FALSE(rel->was_held);
  EXPECT_FALSE(rel->withdrew_waiter);
  EXPECT_EQ(info("r").holders.size(), 1u);
  ASSERT_TRUE(table_.release("r", a)->was_held);
  EXPECT_FALSE(table_.release("r", a)->was_held);  // idempotent
  EXPECT_EQ(table_.stats().locks, 0u);
  // A free lock still reports a last token >= the one it granted.
  EXPECT_GE(info("r").last_fencing_token, g->grant.fencing_token);
}

TEST_F(LockTableTest, FifoOfTwentyWaiters) {
  auto holder = tok();
  ASSERT_TRUE(try_acquire("q", holder).ok());
  std::vector<OwnerToken> w;
  for (int i = 0; i < 20; ++i) {
    w.push_back(tok());
    clock_.advance(1ms);
    auto r = wait_acquire("q", w.back(), Nanos(1h));
    ASSERT_TRUE(r.ok());
    EXPECT_FALSE(r->granted);
    EXPECT_EQ(r->position, static_cast<std::size_t>(i + 1));
  }
  // A try does not overtake even when capacity frees up momentarily.
  LockInfo li = info("q");
  ASSERT_EQ(li.waiters.size(), 20u);
  EXPECT_EQ(li.waiters[0].waited, 19ms);
  OwnerToken current = holder;
  std::uint64_t last_fence = 0;
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(table_.release("q", current)->was_held);
    std::vector<Event> ev;
    ASSERT_EQ(granted_events(&ev), 1u);
    EXPECT_EQ(ev[0].token, w[i]);
    EXPECT_GT(ev[0].grant.fencing_token, last_fence);
    last_fence = ev[0].grant.fencing_token;
    EXPECT_FALSE(try_acquire("q", tok()).ok());
    current = w[i];
  }
}

TEST_F(LockTableTest, TryIsNotGrantedWhileWaitersQueue) {
  // capacity 2: one holder, an all-or-nothing head blocked elsewhere.
  ASSERT_TRUE(try_acquire("other", tok()).ok());
  ASSERT_TRUE(try_acquire("s2", tok(), Nanos(1s), 2).ok());
  MultiRequest m;
  std::vector<std::string_view> names = {"s2", "other"};
  m.names = names;
  m.reservation = tok();
  m.ttl = Nanos(1s);
  m.capacity = 2;
  m.all_or_nothing = true;
  // "other" has capacity 1: mismatched capacity is refused.
  m.queue_deadline = clock_.now() + Nanos(10s);
  auto mm = table_.acquire_multi(m);
  ASSERT_FALSE(mm.ok());
  EXPECT_EQ(mm.error().code(), Errc::invalid_argument);
  names = {"s2", "s2b"};
  m.names = names;
  ASSERT_TRUE(try_acquire("s2b", tok(), Nanos(1s), 2).ok());
  ASSERT_TRUE(try_acquire("s2b", tok(), Nanos(1s), 2).ok());
  auto q = table_.acquire_multi(m);
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q->pending, 2u);
  auto t = try_acquire("s2", tok(), Nanos(1s), 2);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.error().code(), Errc::not_acquired);
  EXPECT_EQ(info("s2").holders.size(), 1u);
  EXPECT_TRUE(info("s2").waiters[0].all_or_nothing);
}

TEST_F(LockTableTest, WaitTimeoutLeavesNoTrace) {
  auto a = tok(), b = tok(), c = tok();
  ASSERT_TRUE(try_acquire("w", a).ok());
  ASSERT_TRUE(wait_acquire("w", b, Nanos(100ms)).ok());
  ASSERT_TRUE(wait_acquire("w", c, Nanos(10s)).ok());
  clock_.advance(100ms);
  table_.advance();
  auto ev = table_.take_events();
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].kind, Event::Kind::wait_timed_out);
  EXPECT_EQ(ev[0].token, b);
  LockInfo li = info("w");
  ASSERT_EQ(li.waiters.size(), 1u);
  EXPECT_EQ(table_.stats().waiters, 1u);
  EXPECT_EQ(table_.stats().wait_timeouts, 1u);
  // b's retry after the timeout is a new request.
  ASSERT_TRUE(table_.release("w", a)->was_held);
  EXPECT_EQ(info("w").holders.size(), 1u);
  EXPECT_FALSE(table_.release("w", b)->was_held);
  // A deadline that already passed: timeout, no trace.
  auto late = wait_acquire("w", tok(), Nanos(0));
  ASSERT_FALSE(late.ok());
  EXPECT_EQ(late.error().code(), Errc::timeout);
  EXPECT_TRUE(info("w").waiters.empty());
}

TEST_F(LockTableTest, ReentrancyHoldCountsAndAliases) {
  auto a = tok(), a2 = tok(), a3 = tok();
  AcquireRequest r = req("re", a, Nanos(1s));
  r.reentrancy_key = "thread-1";
  auto g1 = table_.acquire(r);
  ASSERT_TRUE(g1.ok());
  clock_.advance(500ms);
  r.token = a2;
  r.ttl = Nanos(2s);
  auto g2 = table_.acquire(r);
  ASSERT_TRUE(g2.ok());
  EXPECT_TRUE(g2->granted);
  EXPECT_EQ(g2->grant.token, a);  // the lease's token
  EXPECT_EQ(g2->grant.holds, 2u);
  EXPECT_EQ(g2->grant.fencing_token, g1->grant.fencing_token);
  EXPECT_EQ(g2->grant.expiry, clock_.now() + Nanos(2s));
  // A retry with the alias is idempotent.
  auto g3 = table_.acquire(r);
  ASSERT_TRUE(g3.ok());
  EXPECT_EQ(g3->grant.holds, 2u);
  // A shorter TTL never shortens the lease.
  r.token = a3;
  r.ttl = Nanos(1ms);
  auto g4 = table_.acquire(r);
  ASSERT_TRUE(g4.ok());
  EXPECT_EQ(g4->grant.holds, 3u);
  EXPECT_EQ(g4->grant.expiry, g2->grant.expiry);
  // Another key waits.
  AcquireRequest other = req("re", tok());
  other.reentrancy_key = "thread-2";
  EXPECT_FALSE(table_.acquire(other).ok());
  EXPECT_EQ(table_.release("re", a)->holds_left, 2u);
  EXPECT_EQ(table_.release("re", a)->holds_left, 1u);
  EXPECT_EQ(info("re").holders[0].holds, 1u);
  auto last = table_.release("re", a);
  EXPECT_TRUE(last->was_held);
  EXPECT_EQ(last->holds_left, 0u);
  EXPECT_TRUE(info("re").holders.empty());
  EXPECT_TRUE(table_.acquire(other).ok());
}

TEST_F(LockTableTest, IdempotentAcquireRetry) {
  auto a = tok();
  auto g1 = try_acquire("i", a);
  ASSERT_TRUE(g1.ok());
  clock_.advance(300ms);
  auto g2 = try_acquire("i", a);
  ASSERT_TRUE(g2.ok());
  EXPECT_TRUE(g2->granted);
  EXPECT_EQ(g2->grant.fencing_token, g1->grant.fencing_token);
  EXPECT_EQ(g2->grant.expiry, g1->grant.expiry);
  EXPECT_EQ(g2->grant.valid_for, Nanos(700ms));
  EXPECT_EQ(info("i").holders.size(), 1u);
  EXPECT_EQ(table_.stats().grants, 1u);
  // A queued request retried keeps its place and gets a new deadline.
  auto b = tok(), c = tok();
  ASSERT_TRUE(wait_acquire("i", b, Nanos(100ms)).ok());
  ASSERT_TRUE(wait_acquire("i", c, Nanos(10s)).ok());
  auto rb = wait_acquire("i", b, Nanos(10s));
  ASSERT_TRUE(rb.ok());
  EXPECT_FALSE(rb->granted);
  EXPECT_EQ(rb->position, 1u);
  clock_.advance(200ms);
  EXPECT_EQ(info("i").waiters.size(), 2u);
  ASSERT_TRUE(table_.release("i", a)->was_held);
  std::vector<Event> ev;
  ASSERT_EQ(granted_events(&ev), 1u);
  EXPECT_EQ(ev[0].token, b);
}

// change_count() moves on every change describe/list/counters show, and
// only then (batond's status page redraws when it moved).
TEST_F(LockTableTest, ChangeCountMovesOnVisibleChangesOnly) {
  std::uint64_t last = table_.change_count();
  auto moved = [&] {
    const std::uint64_t now = table_.change_count();
    const bool m = now != last;
    last = now;
    return m;
  };
  auto a = tok(), b = tok();
  ASSERT_TRUE(try_acquire("c", a, Nanos(1s)).value().granted);
  EXPECT_TRUE(moved()) << "grant";
  ASSERT_TRUE(wait_acquire("c", b, Nanos(10s)).ok());
  EXPECT_TRUE(moved()) << "enqueue";
  ASSERT_TRUE(table_.extend("c", a, Nanos(2s)).ok());
  EXPECT_TRUE(moved()) << "extend";
  // Reads, a refused try and time passing without expiry change nothing.
  (void)table_.describe("c");
  (void)table_.list("", 10);
  (void)table_.counter_get("n");
  EXPECT_FALSE(try_acquire("c", tok()).ok());
  clock_.advance(100ms);
  table_.advance();
  EXPECT_FALSE(moved()) << "reads";
  ASSERT_TRUE(table_.release("c", a)->was_held);
  EXPECT_TRUE(moved()) << "release hands over to the waiter";
  clock_.advance(3s);
  table_.advance();
  EXPECT_TRUE(moved()) << "expiry";
  ASSERT_TRUE(table_.counter_add("n", 1).ok());
  EXPECT_TRUE(moved()) << "counter";
  ASSERT_TRUE(wait_acquire("d", tok(), Nanos(10s)).value().granted);
  auto w = tok();
  ASSERT_TRUE(wait_acquire("d", w, Nanos(1s)).ok());
  EXPECT_TRUE(moved());
  clock_.advance(2s);  // the holder (1 s) expires, the waiter is granted
  table_.advance();
  EXPECT_TRUE(moved()) << "expiry + grant";
}

}  // namespace
}  // namespace baton::core
