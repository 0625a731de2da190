// tests/redis/redlock_store_test.cc — Redlock over private instances:
// failures of a minority and of a majority, a restart without persistence,
// a paused instance, a lost reply, the waiters' order (tickets), a pushed
// grant taken too late.
#include <gtest/gtest.h>

#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "redis_process.h"
#include "stores/redis/common.h"

namespace baton::testing {
namespace {

using namespace std::chrono_literals;
using Servers = std::vector<std::unique_ptr<RedisProcess>>;

Servers make(int n) {
  Servers s;
  for (int i = 0; i < n; ++i) s.push_back(std::make_unique<RedisProcess>());
  return s;
}

ClientOptions no_retry() {
  ClientOptions o;
  o.max_retries = 0;
  return o;
}

AcquireOptions opts(std::chrono::milliseconds ttl) {
  AcquireOptions o;
  o.ttl = ttl;
  return o;
}

std::string unique(const std::string& base) {
  return "redlock-test/" + base + "/" + OwnerToken::random().to_string();
}

// The view of one instance alone.
LockInfo on(const RedisProcess& p, const std::string& name) {
  auto c = open_client(p.url());
  EXPECT_TRUE(c.ok());
  auto info = c->describe(name);
  EXPECT_TRUE(info.ok());
  return info.ok() ? *info : LockInfo{};
}

// Waits (up to 2 s) until `n` requests wait on `name` on instance p.
void await_waiters(const RedisProcess& p, const std::string& name,
                   std::size_t n) {
  for (int i = 0; i < 400 && on(p, name).waiters.size() != n; ++i) {
    std::this_thread::sleep_for(5ms);
  }
}

TEST(Redlock, KillOneOfThreeStillGrants) {
  Servers s = make(3);
  auto c = open_client(redlock_url(s), no_retry());
  ASSERT_TRUE(c.ok()) << c.error().to_string();
  const std::string name = unique("one-down");
  auto before = c->try_acquire(name, opts(10s));
  ASSERT_TRUE(before.ok()) << before.error().to_string();
  ASSERT_TRUE(*c->release(*before));
  s[1]->kill9();
  auto l = c->try_acquire(name, opts(10s));
  ASSERT_TRUE(l.ok()) << l.error().to_string();
  EXPECT_GT(l->fencing_token, before->fencing_token);
  auto other = c->try_acquire(name, opts(10s));
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.error().code(), Errc::not_acquired);
  auto ext = c->extend(*l, 5s);
  ASSERT_TRUE(ext.ok()) << ext.error().to_string();
  EXPECT_TRUE(*c->release(*ext));
}

// A semaphore of capacity 3 on 3 instances needs all 3 (quorum_for): with
// one down it is unavailable, and the error names that quorum, not the
// majority of 2 that would grant a mutex.
TEST(Redlock, ASemaphoreShortOfItsQuorumSaysWhatItNeeds) {
  Servers s = make(3);
  auto c = open_client(redlock_url(s), no_retry());
  ASSERT_TRUE(c.ok()) << c.error().to_string();
  s[1]->kill9();
  AcquireOptions o = opts(10s);
  o.capacity = 3;
  auto l = c->try_acquire(unique("sem-quorum"), o);
  ASSERT_FALSE(l.ok());
  EXPECT_EQ(l.error().code(), Errc::unavailable);
  EXPECT_NE(l.error().message().find("only 2 of 3 instances answered; a lock "
                                     "of this capacity needs 3"),
            std::string::npos)
      << l.error().message();
}

TEST(Redlock, KillTwoOfThreeIsUnavailableWithoutAFalseGrant) {
  Servers s = make(3);
  auto c = open_client(redlock_url(s), no_retry());
  ASSERT_TRUE(c.ok());
  const std::string name = unique("two-down");
  s[0]->kill9();
  s[2]->kill9();
  auto l = c->try_acquire(name, opts(10s));
  ASSERT_FALSE(l.ok());
  EXPECT_EQ(l.error().code(), Errc::unavailable);
  EXPECT_NE(l.error().message().find("only 1 of 3"), std::string::npos)
      << l.error().message();
  auto w = c->acquire(name, 300ms, opts(10s));
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.error().code(), Errc::unavailable);
  // The surviving instance keeps no lease and no waiter.
  LockInfo info = on(*s[1], name);
  EXPECT_TRUE(info.holders.empty());
  EXPECT_TRUE(info.waiters.empty());
}

// Documented behaviour (docs/stores/redis.md): an instance restarted without
// persistence forgets its leases and counters. One such restart keeps mutual
// exclusion (the others are still a majority); restarting a second one
// within the TTL lets a second holder in — the Redlock limit we document —
// but its fencing token still increases while one instance remembers.
TEST(Redlock, RestartWithoutPersistenceBehavesAsDocumented) {
  Servers s = make(3);
  auto c = open_client(redlock_url(s), no_retry());
  ASSERT_TRUE(c.ok());
  const std::string name = unique("amnesia");
  for (int i = 0; i < 3; ++i) {
    auto l = c->try_acquire(name, opts(10s));
    ASSERT_TRUE(l.ok());
    ASSERT_TRUE(*c->release(*l));
  }
  auto first = c->try_acquire(name, opts(30s));
  ASSERT_TRUE(first.ok());
  s[0]->kill9();
  s[0]->start();  // same port, empty: no appendonly file
  EXPECT_TRUE(on(*s[0], name).holders.empty());
  auto second = c->try_acquire(name, opts(30s));
  ASSERT_FALSE(second.ok()) << "one amnesiac instance must not break safety";
  EXPECT_EQ(second.error().code(), Errc::not_acquired);
  s[1]->kill9();
  s[1]->start();
  auto third = c->try_acquire(name, opts(30s));
  ASSERT_TRUE(third.ok()) << "documented: a majority of amnesiac instances "
                             "grants again: "
                          << third.error().to_string();
  EXPECT_GT(third->fencing_token, first->fencing_token)
      << "the instance that kept its data still pushes the token up";
}

// restart_guard (docs/stores/redis.md): an instance whose lock data is
// younger than the guard does not vote. Two of three instances restarted
// empty while a lease is held: a client without the guard is granted the
// lock beside the holder (the test above), one with it is refused, naming
// the guard, until the guard has passed since the restart. A new
// deployment's instances are young too: the first call waits it out.
TEST(Redlock, RestartGuardKeepsAmnesiacInstancesFromVotingAwayALease) {
  Servers s = make(3);
  const std::string guarded = redlock_url(s, "?restart_guard=3s");
  auto c = open_client(guarded, no_retry());
  ASSERT_TRUE(c.ok());
  const std::string name = unique("guard");
  auto fresh = c->try_acquire(name, opts(3s));
  ASSERT_FALSE(fresh.ok()) << "every instance's data is new";
  EXPECT_EQ(fresh.error().code(), Errc::unavailable);
  EXPECT_NE(fresh.error().message().find("younger than restart_guard=3s"),
            std::string::npos)
      << fresh.error().to_string();
  std::this_thread::sleep_for(3100ms);
  auto first = c->try_acquire(name, opts(3s));
  ASSERT_TRUE(first.ok()) << first.error().to_string();

  s[0]->kill9();
  s[0]->start();  // same port, empty: no appendonly file
  s[1]->kill9();
  s[1]->start();
  const auto restarted = std::chrono::steady_clock::now();
  auto other = open_client(guarded, no_retry());
  ASSERT_TRUE(other.ok());
  auto second = other->try_acquire(name, opts(3s));
  ASSERT_FALSE(second.ok()) << "two amnesiac instances voted the lease away";
  EXPECT_EQ(second.error().code(), Errc::unavailable);
  EXPECT_NE(second.error().message().find("restart_guard=3s"),
            std::string::npos)
      << second.error().to_string();
  // The same moment without the guard: the documented double grant.
  auto unguarded = open_client(redlock_url(s), no_retry());
  ASSERT_TRUE(unguarded.ok());
  auto twice = unguarded->try_acquire(name, opts(1s));
  ASSERT_TRUE(twice.ok()) << "without restart_guard the amnesiac majority "
                             "grants: "
                          << twice.error().to_string();
  EXPECT_TRUE(*unguarded->release(*twice));

  // Until then the store is unavailable to it, as with two instances down.
  // The error says when the votes count: a blocking acquire whose wait ends
  // sooner answers at once, naming the guard.
  ASSERT_GT(second.error().retry_after(), 0ms);
  EXPECT_LE(second.error().retry_after(), 3001ms);
  const auto short_start = std::chrono::steady_clock::now();
  auto short_wait = other->acquire(name, 500ms, opts(3s));
  ASSERT_FALSE(short_wait.ok());
  EXPECT_EQ(short_wait.error().code(), Errc::unavailable);
  EXPECT_NE(short_wait.error().message().find("votes count in"),
            std::string::npos)
      << short_wait.error().to_string();
  EXPECT_LT(std::chrono::steady_clock::now() - short_start, 500ms);
  // One whose wait outlasts the guard waits it out, although this client
  // retries nothing (max_retries = 0), and is granted once the guard has
  // passed since the restart (the holder's 3 s lease ran out before).
  auto later = other->acquire(name, 10s, opts(3s));
  ASSERT_TRUE(later.ok()) << later.error().to_string();
  EXPECT_GE(std::chrono::steady_clock::now() - restarted, 2900ms)
      << "granted while the restarted instances were younger than the guard";
  EXPECT_GT(later->fencing_token, first->fencing_token);
  EXPECT_TRUE(*other->release(*later));
}

TEST(Redlock, PausedInstanceDoesNotStallAcquire) {
  Servers s = make(3);
  auto c = open_client(redlock_url(s, "?timeout=100"), no_retry());
  ASSERT_TRUE(c.ok());
  const std::string name = unique("paused");
  s[2]->pause();
  for (int i = 0; i < 3; ++i) {
    const auto start = std::chrono::steady_clock::now();
    auto l = c->try_acquire(name, opts(10s));
    const auto took = std::chrono::steady_clock::now() - start;
    ASSERT_TRUE(l.ok()) << l.error().to_string();
    // Per-instance timeout 100 ms; generous slack for a loaded machine.
    EXPECT_LT(took, 1500ms);
    const auto rstart = std::chrono::steady_clock::now();
    EXPECT_TRUE(*c->release(*l));
    EXPECT_LT(std::chrono::steady_clock::now() - rstart, 1500ms);
  }
  s[2]->resume();
}

TEST(Redlock, LostReplyIsResolvedByTheOwnerToken) {
  Servers s = make(3);
  auto st = open_client(redlock_url(s));
  ASSERT_TRUE(st.ok());
  const std::string name = unique("lost-reply");
  AcquireOptions o = opts(10s);
  o.token = OwnerToken::random();
  auto first = st->try_acquire(name, o);
  ASSERT_TRUE(first.ok()) << first.error().to_string();
  auto retry = st->acquire(name, 2s, o);
  ASSERT_TRUE(retry.ok()) << retry.error().to_string();
  EXPECT_EQ(retry->fencing_token, first->fencing_token);
  for (auto& p : s) EXPECT_EQ(on(*p, name).holders.size(), 1u);
  EXPECT_TRUE(*st->release(*retry));
  EXPECT_FALSE(*st->release(*retry));
}

// Rule 10 on Redlock: a release grants the waiter on every instance, and
// each pushes that grant to the waiter's inbox there; the waiter returns
// those grants as its round, with no refresh round (re-check set to 20 s,
// so only pushes can hand over), and every instance agrees on the lease.
TEST(Redlock, WaiterTakesTheGrantsPushedByEveryInstance) {
  auto& hooks = store::redis::test_hooks();
  hooks.recheck_ms = 20'000;
  Servers s = make(3);
  auto a = open_client(redlock_url(s), no_retry());
  auto b = open_client(redlock_url(s), no_retry());
  ASSERT_TRUE(a.ok() && b.ok());
  const std::string name = unique("pushed");
  auto held = a->try_acquire(name, opts(30s));
  ASSERT_TRUE(held.ok()) << held.error().to_string();
  Result<Lease> got = Error(Errc::internal, "not run");
  std::thread waiter([&] { got = b->acquire(name, 20s, opts(30s)); });
  await_waiters(*s[2], name, 1);
  std::this_thread::sleep_for(300ms);  // the inboxes are subscribed
  const auto pushed = hooks.pushed_grants.load();
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(*a->release(*held));
  waiter.join();
  hooks.recheck_ms = 0;
  ASSERT_TRUE(got.ok()) << got.error().to_string();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
  EXPECT_EQ(hooks.pushed_grants.load(), pushed + 1);
  EXPECT_GT(got->fencing_token, held->fencing_token);
  for (auto& p : s) {
    const LockInfo info = on(*p, name);
    ASSERT_EQ(info.holders.size(), 1u);
    EXPECT_EQ(info.holders[0].fencing_token, got->fencing_token);
    EXPECT_TRUE(info.waiters.empty());
  }
  EXPECT_TRUE(*b->release(*got));
}

// A pushed grant whose validity is gone by the time the waiter takes it
// (its last round was sent longer than its TTL ago) is given back, and the
// wait goes on in its place. Here a quorum pushed: the give-back frees the
// two instances that granted (the waiter behind, d, takes them) and takes
// the request out of the third one's queue, marked withdrawn there. That
// mark must not end the wait as a withdrawal by its owner: the next round
// enqueues again by the request's ticket, and it is granted after d.
TEST(Redlock, APushedGrantWithoutValidityIsGivenBackAndTheWaitGoesOn) {
  auto& hooks = store::redis::test_hooks();
  hooks.recheck_ms = 20'000;
  Servers s = make(3);
  auto a = open_client(redlock_url(s), no_retry());
  auto b = open_client(redlock_url(s), no_retry());
  auto c = open_client(s[2]->url(), no_retry());
  auto d = open_client(redlock_url(s), no_retry());
  ASSERT_TRUE(a.ok() && b.ok() && c.ok() && d.ok());
  const std::string name = unique("late-push");
  auto held = a->try_acquire(name, opts(30s));
  ASSERT_TRUE(held.ok()) << held.error().to_string();
  Result<Lease> got_c = Error(Errc::internal, "not run");
  std::thread third([&] { got_c = c->acquire(name, 20s, opts(30s)); });
  await_waiters(*s[2], name, 1);
  Result<Lease> got = Error(Errc::internal, "not run");
  std::thread waiter([&] { got = b->acquire(name, 20s, opts(250ms)); });
  await_waiters(*s[2], name, 2);
  Result<Lease> got_d = Error(Errc::internal, "not run");
  std::thread behind([&] {
    got_d = d->acquire(name, 20s, opts(30s));
    if (got_d.ok()) (void)d->release(*got_d);
  });
  await_waiters(*s[2], name, 3);
  std::this_thread::sleep_for(400ms);  // past b's 250 ms TTL
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(*a->release(*held));
  waiter.join();
  behind.join();
  third.join();
  hooks.recheck_ms = 0;
  ASSERT_TRUE(got.ok()) << got.error().to_string();
  ASSERT_TRUE(got_d.ok()) << got_d.error().to_string();
  ASSERT_TRUE(got_c.ok()) << got_c.error().to_string();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
  EXPECT_GT(got->fencing_token, got_d->fencing_token);
  EXPECT_TRUE(*c->release(*got_c));
  EXPECT_TRUE(*b->release(*got));
}

// Instances that queued waiters in different orders grant different
// waiters, and the push a waiter still lacks never comes: pushes from a
// quorum are its grant after a moment (1 ms), with no refresh round.
// Here a redis:// client queued on the third instance alone takes that
// instance's grant, so the Redlock waiter gets pushes from two of three.
TEST(Redlock, WaiterTakesTheGrantsPushedByAQuorum) {
  auto& hooks = store::redis::test_hooks();
  hooks.recheck_ms = 20'000;
  Servers s = make(3);
  auto a = open_client(redlock_url(s), no_retry());
  auto b = open_client(redlock_url(s), no_retry());
  auto c = open_client(s[2]->url(), no_retry());
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  const std::string name = unique("pushed-quorum");
  auto held = a->try_acquire(name, opts(30s));
  ASSERT_TRUE(held.ok()) << held.error().to_string();
  Result<Lease> got_c = Error(Errc::internal, "not run");
  std::thread third([&] { got_c = c->acquire(name, 20s, opts(30s)); });
  await_waiters(*s[2], name, 1);
  Result<Lease> got = Error(Errc::internal, "not run");
  std::thread waiter([&] { got = b->acquire(name, 20s, opts(30s)); });
  await_waiters(*s[2], name, 2);
  std::this_thread::sleep_for(300ms);  // the inboxes are subscribed
  const auto pushed = hooks.pushed_grants.load();
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(*a->release(*held));
  waiter.join();
  third.join();
  hooks.recheck_ms = 0;
  ASSERT_TRUE(got.ok()) << got.error().to_string();
  ASSERT_TRUE(got_c.ok()) << got_c.error().to_string();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
  // Both waiters took their grants from pushes (the old 5 ms wait for
  // every push would have ended in a refresh round for b).
  EXPECT_EQ(hooks.pushed_grants.load(), pushed + 2);
  EXPECT_GT(got->fencing_token, held->fencing_token);
  for (int k = 0; k < 2; ++k) {
    const LockInfo info = on(*s[k], name);
    ASSERT_EQ(info.holders.size(), 1u);
    EXPECT_EQ(info.holders[0].fencing_token, got->fencing_token);
  }
  const LockInfo third_view = on(*s[2], name);
  ASSERT_EQ(third_view.holders.size(), 1u);
  EXPECT_EQ(third_view.holders[0].fencing_token, got_c->fencing_token);
  ASSERT_EQ(third_view.waiters.size(), 1u);  // b, still queued there
  EXPECT_TRUE(*c->release(*got_c));
  EXPECT_TRUE(*b->release(*got));
  for (auto& p : s) {
    const LockInfo info = on(*p, name);
    EXPECT_TRUE(info.holders.empty());
    EXPECT_TRUE(info.waiters.empty());
  }
}

// Waiters that race to the instances reach them in different orders; their
// tickets (docs/stores/redis.md, "Order") must give every instance the same
// queue, and the lock must be handed over in that order.
TEST(Redlock, RacingWaitersAreQueuedInOneOrderOnEveryInstance) {
  Servers s = make(3);
  auto holder = open_client(redlock_url(s), no_retry());
  ASSERT_TRUE(holder.ok()) << holder.error().to_string();
  const std::string name = unique("tickets");
  auto first = holder->try_acquire(name, opts(30s));
  ASSERT_TRUE(first.ok()) << first.error().to_string();
  constexpr int kWaiters = 8;
  std::mutex mu;
  std::vector<std::string> granted;
  std::vector<std::thread> threads;
  for (int i = 0; i < kWaiters; ++i) {
    threads.emplace_back([&, i] {
      auto c = open_client(redlock_url(s), no_retry());
      if (!c.ok()) return;
      AcquireOptions o = opts(30s);
      o.label = "w" + std::to_string(i);
      auto l = c->acquire(name, 20s, o);
      if (!l.ok()) return;
      {
        std::lock_guard<std::mutex> lk(mu);
        granted.push_back(o.label);
      }
      (void)c->release(*l);
    });
  }
  // Bounded: the tickets are raised by each waiter's next re-check.
  std::vector<std::string> order;
  bool same = false;
  for (int round = 0; round < 100 && !same; ++round) {
    std::this_thread::sleep_for(50ms);
    std::vector<std::vector<std::string>> views;
    for (const auto& p : s) {
      std::vector<std::string> v;
      for (const auto& w : on(*p, name).waiters) v.push_back(w.label);
      views.push_back(std::move(v));
    }
    same = views[0].size() == kWaiters && views[1] == views[0] &&
           views[2] == views[0];
    if (same) order = views[0];
  }
  EXPECT_TRUE(same) << "the instances never agreed on the queue order";
  ASSERT_TRUE(*holder->release(*first));
  for (auto& t : threads) t.join();
  ASSERT_EQ(granted.size(), static_cast<std::size_t>(kWaiters));
  if (same) {
    EXPECT_EQ(granted, order);
  }
}

// Sets the fencing counter of `name` on one instance (as another grant's
// INCR there would have).
void set_counter(const RedisProcess& p, const std::string& name, int v) {
  timeval tv{2, 0};
  redisContext* c = redisConnectWithTimeout("127.0.0.1", p.port(), tv);
  ASSERT_TRUE(c != nullptr && c->err == 0);
  auto* r = static_cast<redisReply*>(
      redisCommand(c, "SET baton:f:%s %d", name.c_str(), v));
  ASSERT_NE(r, nullptr);
  freeReplyObject(r);
  redisFree(c);
}

// Fencing uniqueness across a majority: the grant's token is the maximum
// over the instances that granted. If another grant already holds that
// value on an instance outside this majority (here: a holder on C whose
// INCR there issued 5), raising C to 5 must not hand out 5 a second time:
// a raise that took "counter == 5" as settled would return 5 (duplicate
// fencing tokens).
TEST(Redlock, FencingTokenIsNeverOneAnotherGrantHolds) {
  Servers s = make(3);
  const std::string name = unique("fence-unique");
  set_counter(*s[0], name, 4);  // A issues 5 next
  set_counter(*s[2], name, 4);  // C issues 5 next: to the other holder
  auto z = open_client(s[2]->url(), no_retry());
  ASSERT_TRUE(z.ok());
  auto other = z->try_acquire(name, opts(30s));
  ASSERT_TRUE(other.ok()) << other.error().to_string();
  ASSERT_EQ(other->fencing_token, 5u);
  auto c = open_client(redlock_url(s), no_retry());
  ASSERT_TRUE(c.ok());
  // Granted on A (5) and B (1); C is held: the majority's maximum is 5.
  auto l = c->try_acquire(name, opts(30s));
  ASSERT_TRUE(l.ok()) << l.error().to_string();
  EXPECT_NE(l->fencing_token, other->fencing_token);
  EXPECT_GT(l->fencing_token, 5u);
  // Every instance's counter is at least the grant's token, so later
  // grants get larger ones.
  for (const auto& p : s) {
    EXPECT_GE(on(*p, name).last_fencing_token, l->fencing_token);
  }
  EXPECT_TRUE(*c->release(*l));
  EXPECT_TRUE(*z->release(*other));
}

// A split waiter keeps its place. X is granted on C but A and B are held
// (each by a redis:// client on that instance alone), so X holds 1 of 3 and
// waits with the lowest ticket; Y arrives after X and queues everywhere.
// When X's split lasts longer than the split timeout it gives C back; it
// must keep its ticket (C goes back to X, the head), so that when A and B
// are released X — not Y — reaches the quorum. Had X queued again at the
// tail with a new ticket, C would go to Y at once, then A as well, and Y
// would overtake X.
TEST(Redlock, SplitWaiterKeepsItsPlaceInTheQueue) {
  Servers s = make(3);
  const std::string name = unique("split-order");
  auto ha = open_client(s[0]->url(), no_retry());
  auto hb = open_client(s[1]->url(), no_retry());
  ASSERT_TRUE(ha.ok() && hb.ok());
  auto la = ha->try_acquire(name, opts(30s));
  auto lb = hb->try_acquire(name, opts(30s));
  ASSERT_TRUE(la.ok() && lb.ok());
  std::mutex mu;
  std::vector<std::string> granted;
  auto waiter = [&](const std::string& who) {
    auto c = open_client(redlock_url(s), no_retry());
    if (!c.ok()) return;
    AcquireOptions o = opts(30s);
    o.label = who;
    auto l = c->acquire(name, 10s, o);
    if (!l.ok()) return;
    {
      std::lock_guard<std::mutex> lk(mu);
      granted.push_back(who);
    }
    (void)c->release(*l);
  };
  std::thread x(waiter, "x");
  std::this_thread::sleep_for(150ms);
  EXPECT_EQ(on(*s[2], name).holders.size(), 1u);  // X holds C
  std::thread y(waiter, "y");
  // Long enough for X's split timeout (0.3–0.9 s) to pass at least once.
  std::this_thread::sleep_for(1200ms);
  {
    std::lock_guard<std::mutex> lk(mu);
    EXPECT_TRUE(granted.empty()) << "granted while A and B were held";
  }
  ASSERT_TRUE(*ha->release(*la));
  ASSERT_TRUE(*hb->release(*lb));
  x.join();
  y.join();
  ASSERT_EQ(granted.size(), 2u);
  EXPECT_EQ(granted[0], "x") << "the later waiter Y overtook X";
}

// An extend reports the token the grant's quorum agreed on. Instance C
// forgets the lease (restart without persistence) and then grants it again
// on its own to a retry with the same owner token, under a local counter
// far above the quorum's token: the extend must not report C's token (a
// resource would then see two holders' writes under one token, as in the
// torture test's duplicate tokens).
TEST(Redlock, ExtendReportsTheQuorumsTokenNotAMinoritys) {
  Servers s = make(3);
  auto st = open_client(redlock_url(s));
  ASSERT_TRUE(st.ok());
  const std::string name = unique("extend-token");
  AcquireOptions o = opts(30s);
  o.token = OwnerToken::random();
  auto g = st->try_acquire(name, o);
  ASSERT_TRUE(g.ok()) << g.error().to_string();
  s[2]->kill9();
  s[2]->start();  // empty: no appendonly file
  set_counter(*s[2], name, 100);
  auto c = open_client(s[2]->url());
  ASSERT_TRUE(c.ok());
  auto local = c->try_acquire(name, o);  // the same owner token, on C only
  ASSERT_TRUE(local.ok()) << local.error().to_string();
  ASSERT_EQ(local->fencing_token, 101u);
  auto e = st->extend(*g, 30s);
  ASSERT_TRUE(e.ok()) << e.error().to_string();
  EXPECT_EQ(e->fencing_token, g->fencing_token);
  EXPECT_TRUE(*st->release(*g));
}

}  // namespace
}  // namespace baton::testing
