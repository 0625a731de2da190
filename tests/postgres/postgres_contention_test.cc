// tests/postgres/postgres_contention_test.cc — the contended paths of the
// postgres:// store: queueing without the name's advisory lock, the light
// re-check (shared advisory lock, heartbeat refresh without the flush), the
// release's hand-over to the head.
// Figures are in docs/bench/postgres.md; nothing here is timed.
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "pg_test_util.h"

namespace baton::testing {
namespace {

// Clients on one lock, each its own store (own pool and LISTEN connection,
// as separate processes). The re-check timer is 60 s, longer than any
// wait, so only a NOTIFY (or the immediate re-check after a queueing
// without the lock) can hand the lock over: a lost wake-up shows up as a
// timeout. Mutual exclusion and ever larger fencing tokens are checked on
// every grant.
TEST(PostgresContention, HandoffsNeedNoTimerAndStayExclusive) {
  constexpr int kClients = 6;
  constexpr int kRounds = 20;
  const std::string name = unique_name("contended");
  std::vector<Client> clients;
  for (int i = 0; i < kClients; ++i) {
    clients.push_back(pg_client("recheck_interval=60s"));
  }
  std::atomic<int> inside{0};
  std::atomic<int> overlaps{0};
  std::atomic<int> failures{0};
  std::mutex mu;
  std::uint64_t last_fencing = 0;
  int fencing_regressions = 0;
  std::string first_error;
  std::vector<std::thread> threads;
  for (int i = 0; i < kClients; ++i) {
    threads.emplace_back([&, i] {
      for (int r = 0; r < kRounds; ++r) {
        auto l = clients[i].acquire(name, 20s, ttl_opts(30s));
        if (!l.ok()) {
          std::lock_guard<std::mutex> lk(mu);
          if (first_error.empty()) first_error = l.error().to_string();
          ++failures;
          return;
        }
        if (inside.fetch_add(1) != 0) ++overlaps;
        {
          std::lock_guard<std::mutex> lk(mu);
          if (l->fencing_token <= last_fencing) ++fencing_regressions;
          last_fencing = l->fencing_token;
        }
        inside.fetch_sub(1);
        auto rel = clients[i].release(*l);
        if (!rel.ok() || !*rel) ++failures;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0) << first_error;
  EXPECT_EQ(overlaps.load(), 0);
  EXPECT_EQ(fencing_regressions, 0);
  Sql sql(pg_server().conninfo());
  EXPECT_EQ(sql.one("SELECT count(*) FROM baton.requests WHERE name = '" +
                    name + "'"),
            "0");
  EXPECT_EQ(sql.one("SELECT count(*) FROM baton.holders_all WHERE name = '" +
                    name + "'"),
            "0");
}

// Two clients take turns, and each release is sent while the other
// client's blocking acquire is on its way, so the release's scheduling pass
// and the queueing (without the name's lock) overlap: the pass may miss a
// request that is not yet committed. Nobody else acquires, and the re-check
// timer is 60 s, so a request left without its wake-up would sit until its
// deadline (60 s; the liveness bound checked is 15 s, the handoff normally
// takes milliseconds).
TEST(PostgresContention, ReleaseRacingAQueueingLosesNoWakeUp) {
  constexpr int kRounds = 60;
  const std::string name = unique_name("race");
  Client a = pg_client("recheck_interval=60s");
  Client b = pg_client("recheck_interval=60s");
  auto held = a.try_acquire(name, ttl_opts(30s));
  ASSERT_TRUE(held.ok()) << held.error().to_string();
  Client* owner = &a;
  Client* next = &b;
  for (int r = 0; r < kRounds; ++r) {
    std::promise<void> sent;
    auto waiting = std::async(std::launch::async, [&] {
      sent.set_value();
      return next->acquire(name, 60s, ttl_opts(30s));
    });
    sent.get_future().wait();
    if (r % 2 == 1) std::this_thread::sleep_for(std::chrono::microseconds(200));
    auto rel = owner->release(*held);
    ASSERT_TRUE(rel.ok() && *rel) << "round " << r;
    // Normally a few ms; a lost wake-up waits for the 60 s deadline.
    ASSERT_EQ(waiting.wait_for(15s), std::future_status::ready)
        << "round " << r << ": lost wake-up";
    auto got = waiting.get();
    ASSERT_TRUE(got.ok()) << "round " << r << ": " << got.error().to_string();
    EXPECT_GT(got->fencing_token, held->fencing_token);
    held = std::move(got);
    std::swap(owner, next);
  }
  EXPECT_TRUE(*owner->release(*held));
}

// A waiter that waits three heartbeat timeouts behind a holder keeps its
// place: the light re-checks refresh its heartbeat (it is neither pruned
// nor queued again, so its arrival time stays the same), and it is granted
// when the holder releases.
TEST(PostgresContention, LightRechecksKeepALongWaiterInPlace) {
  Client holder = pg_client();
  Client waiter = pg_client("waiter_timeout=1s&recheck_interval=100ms");
  Sql sql(pg_server().conninfo());
  const std::string name = unique_name("patient");
  auto held = holder.try_acquire(name, ttl_opts(30s));
  ASSERT_TRUE(held.ok()) << held.error().to_string();
  std::promise<bool> granted;
  std::thread t([&] {
    auto l = waiter.acquire(name, 30s, ttl_opts(5s, "patient"));
    granted.set_value(l.ok());
    if (l.ok()) (void)waiter.release(*l);
  });
  const std::string q =
      "SELECT arrived_at FROM baton.requests WHERE name = '" + name + "'";
  ASSERT_TRUE(eventually([&] { return !sql.one(q).empty(); }));
  const std::string arrived = sql.one(q);
  std::this_thread::sleep_for(3s);
  auto info = holder.describe(name);  // lists live waiters only
  ASSERT_TRUE(info.ok());
  ASSERT_EQ(info->waiters.size(), 1u);
  EXPECT_EQ(info->waiters[0].label, "patient");
  EXPECT_EQ(sql.one(q), arrived) << "the waiter lost its place";
  EXPECT_TRUE(*holder.release(*held));
  EXPECT_TRUE(granted.get_future().get());
  t.join();
}

// Schema version 5: a lock's only holder lives in its locks row (no
// holders row), is moved into holders when a second holder joins, comes
// back inline once the lock is idle, is replaced once expired, and a
// handoff by the release fast path grants the waiter inline too.
TEST(PostgresContention, InlineHolderSpillsForASecondHolderAndComesBack) {
  Client a = pg_client();
  Client b = pg_client("recheck_interval=60s");
  Sql sql(pg_server().conninfo());
  const std::string name = unique_name("inline");
  const std::string rows =
      "SELECT count(*) FROM baton.holders WHERE name = '" + name + "'";
  const std::string inline_fencing =
      "SELECT coalesce(h_fencing::text, 'none') FROM baton.locks "
      "WHERE name = '" +
      name + "' AND h_token IS NOT NULL";
  AcquireOptions two = ttl_opts(30s, "first");
  two.capacity = 2;
  auto l1 = a.try_acquire(name, two);
  ASSERT_TRUE(l1.ok()) << l1.error().to_string();
  EXPECT_EQ(sql.one(rows), "0");
  EXPECT_EQ(sql.one(inline_fencing), std::to_string(l1->fencing_token));
  auto info = b.describe(name);
  ASSERT_TRUE(info.ok());
  ASSERT_EQ(info->holders.size(), 1u);
  EXPECT_EQ(info->holders[0].fencing_token, l1->fencing_token);
  EXPECT_EQ(info->holders[0].label, "first");
  EXPECT_EQ(info->capacity, 2u);
  // A second holder: both are holders rows now.
  two.label = "second";
  auto l2 = b.try_acquire(name, two);
  ASSERT_TRUE(l2.ok()) << l2.error().to_string();
  EXPECT_GT(l2->fencing_token, l1->fencing_token);
  EXPECT_EQ(sql.one(rows), "2");
  EXPECT_EQ(sql.one(inline_fencing), "");
  EXPECT_FALSE(b.try_acquire(name, two).ok());  // full (2 of 2)
  ASSERT_TRUE(a.extend(*l1, 20s).ok());
  EXPECT_TRUE(*a.release(*l1));
  EXPECT_TRUE(*b.release(*l2));
  // Idle again: the next holder is inline; an expired one is replaced.
  auto l3 = a.try_acquire(name, ttl_opts(30s));
  ASSERT_TRUE(l3.ok()) << l3.error().to_string();
  EXPECT_GT(l3->fencing_token, l2->fencing_token);
  EXPECT_EQ(sql.one(rows), "0");
  EXPECT_EQ(sql.one(inline_fencing), std::to_string(l3->fencing_token));
  ASSERT_TRUE(a.extend(*l3, 100ms).ok());
  std::optional<Lease> l4;
  ASSERT_TRUE(eventually([&] {
    auto l = b.try_acquire(name, ttl_opts(30s));
    if (l.ok()) l4 = std::move(*l);
    return l4.has_value();
  }));
  EXPECT_GT(l4->fencing_token, l3->fencing_token);
  EXPECT_FALSE(*a.release(*l3));  // expired and replaced
  EXPECT_FALSE(a.extend(*l3, 30s).ok());
  // A waiter granted by the release fast path is the inline holder.
  auto waiting = std::async(
      std::launch::async, [&] { return a.acquire(name, 30s, ttl_opts(30s)); });
  ASSERT_TRUE(eventually([&] {
    return sql.one("SELECT count(*) FROM baton.requests WHERE name = '" + name +
                   "'") == "1";
  }));
  EXPECT_TRUE(*b.release(*l4));
  auto l5 = waiting.get();
  ASSERT_TRUE(l5.ok()) << l5.error().to_string();
  EXPECT_GT(l5->fencing_token, l4->fencing_token);
  EXPECT_EQ(sql.one(rows), "0");
  EXPECT_EQ(sql.one(inline_fencing), std::to_string(l5->fencing_token));
  EXPECT_TRUE(*a.release(*l5));
  EXPECT_EQ(sql.one(inline_fencing), "");
}

// The one-statement fast acquire (schema version 6) waits for the name's
// advisory lock inside its UPDATE's condition (_claim). A pass that held
// the lock meanwhile granted a lease as a holders row (the locks row keeps
// no inline holder): the acquire must see that row, committed after its
// statement began, and refuse. A plain UPDATE whose NOT EXISTS checks ran
// on the statement's snapshot would grant a second holder here.
TEST(PostgresContention, FastAcquireSeesWhatThePassItWaitedForCommitted) {
  Client a = pg_client();
  Sql pass(pg_server().conninfo()), look(pg_server().conninfo());
  const std::string name = unique_name("claim");
  ASSERT_TRUE(*a.release(*a.try_acquire(name, ttl_opts(30s))));  // its row
  ASSERT_EQ(pass.one("BEGIN"), "");
  ASSERT_EQ(pass.one("SELECT pg_advisory_xact_lock(baton._key('" + name +
                     "'))::text"),
            "");
  ASSERT_EQ(pass.one("INSERT INTO baton.holders (name, token, fencing, "
                     "ttl_ms, expires_at, granted_at) SELECT name, "
                     "gen_random_uuid(), last_fencing + 1, 60000, "
                     "clock_timestamp() + interval '60 s', clock_timestamp() "
                     "FROM baton.locks WHERE name = '" +
                     name + "'"),
            "");
  ASSERT_EQ(pass.one("UPDATE baton.locks SET last_fencing = last_fencing + 1 "
                     "WHERE name = '" +
                     name + "'"),
            "");
  auto tried = std::async(std::launch::async,
                          [&] { return a.try_acquire(name, ttl_opts(30s)); });
  // The try waits for the advisory lock (inside its statement) ...
  ASSERT_TRUE(eventually([&] {
    return look.one(
               "SELECT count(*) FROM pg_locks WHERE locktype = "
               "'advisory' AND NOT granted") == "1";
  }));
  // ... and then sees the holders row.
  ASSERT_EQ(pass.one("COMMIT"), "");
  auto got = tried.get();
  ASSERT_FALSE(got.ok()) << "granted beside a holder: fencing "
                         << got->fencing_token;
  EXPECT_EQ(got.error().code(), Errc::not_acquired);
  EXPECT_EQ(look.one("SELECT count(*) FROM baton.locks WHERE name = '" + name +
                     "' AND h_token IS NOT NULL"),
            "0");
  EXPECT_EQ(look.one("DELETE FROM baton.holders WHERE name = '" + name +
                     "' RETURNING 1"),
            "1");
}

// No release, so no scheduling pass and no NOTIFY: an inline holder that
// expires is seen by the waiter's own timed light re-check (which must
// count the inline holder as due), and the waiter is granted a few
// re-check intervals after the expiry, not at its wait deadline.
TEST(PostgresContention, ExpiredInlineHolderIsSeenByTheTimedRecheck) {
  Client holder = pg_client();
  Client waiter = pg_client("recheck_interval=100ms");
  const std::string name = unique_name("inline-expiry");
  auto held = holder.try_acquire(name, ttl_opts(500ms));
  ASSERT_TRUE(held.ok()) << held.error().to_string();
  const auto t0 = std::chrono::steady_clock::now();
  auto got = waiter.acquire(name, 20s, ttl_opts(30s));
  const auto waited = std::chrono::steady_clock::now() - t0;
  ASSERT_TRUE(got.ok()) << got.error().to_string();
  EXPECT_GT(got->fencing_token, held->fencing_token);
  EXPECT_LT(waited, 5s) << "the expiry was not noticed by the re-check";
  EXPECT_FALSE(*holder.release(*held));
  EXPECT_TRUE(*waiter.release(*got));
}

// Schema version 7: a release whose head request is a plain live one hands
// the lock over in its own update (the head becomes the inline holder,
// one fencing token more), without the pass: a request that is due behind
// the head stays until a pass reaches it, and a due head is never granted
// (the full pass prunes it and grants the next). The re-check timer is
// 60 s, so each grant here is the release's notification.
TEST(PostgresContention, ReleaseHandsOverToTheLiveHeadOnly) {
  Client a = pg_client("recheck_interval=60s");
  Client b = pg_client("recheck_interval=60s");
  Sql sql(pg_server().conninfo());
  const std::string name = unique_name("hand-over");
  const std::string queued =
      "SELECT count(*) FROM baton.requests WHERE name = '" + name + "'";
  // A request whose waiter died: its heartbeat is over.
  auto dead_request = [&](const std::string& label) {
    return sql.one(
        "INSERT INTO baton.requests (name, token, seq, kind, ttl_ms, label, "
        "arrived_at, deadline, heartbeat_until) VALUES ('" +
        name +
        "', gen_random_uuid(), nextval('baton.request_seq'), 0, 30000, '" +
        label +
        "', clock_timestamp(), clock_timestamp() + interval '60 s', "
        "clock_timestamp() - interval '1 s') RETURNING label");
  };
  auto held = a.try_acquire(name, ttl_opts(30s));
  ASSERT_TRUE(held.ok()) << held.error().to_string();
  // A due head, then a live waiter: the release must skip the head.
  ASSERT_EQ(dead_request("dead-head"), "dead-head");
  auto waiting = std::async(
      std::launch::async, [&] { return b.acquire(name, 30s, ttl_opts(30s)); });
  ASSERT_TRUE(eventually([&] { return sql.one(queued) == "2"; }));
  EXPECT_TRUE(*a.release(*held));
  ASSERT_EQ(waiting.wait_for(15s), std::future_status::ready);
  auto got = waiting.get();
  ASSERT_TRUE(got.ok()) << got.error().to_string();
  EXPECT_GT(got->fencing_token, held->fencing_token);
  EXPECT_EQ(sql.one(queued), "0") << "the pass prunes the dead head";
  // A live head, then a due request behind it: the hand-over grants the
  // head in the locks row and leaves the due request for a later pass.
  waiting = std::async(std::launch::async,
                       [&] { return a.acquire(name, 30s, ttl_opts(30s)); });
  ASSERT_TRUE(eventually([&] { return sql.one(queued) == "1"; }));
  ASSERT_EQ(dead_request("dead-behind"), "dead-behind");
  EXPECT_TRUE(*b.release(*got));
  ASSERT_EQ(waiting.wait_for(15s), std::future_status::ready);
  auto next = waiting.get();
  ASSERT_TRUE(next.ok()) << next.error().to_string();
  EXPECT_EQ(next->fencing_token, got->fencing_token + 1);
  EXPECT_EQ(sql.one("SELECT h_fencing FROM baton.locks WHERE name = '" + name +
                    "' AND h_token IS NOT NULL"),
            std::to_string(next->fencing_token));
  EXPECT_EQ(
      sql.one("SELECT count(*) FROM baton.holders WHERE name = '" + name + "'"),
      "0");
  EXPECT_EQ(sql.one("SELECT string_agg(label, ',') FROM baton.requests "
                    "WHERE name = '" +
                    name + "'"),
            "dead-behind");
  // Its release finds the due request at the head: the pass prunes it.
  EXPECT_TRUE(*a.release(*next));
  EXPECT_EQ(sql.one(queued), "0");
}

// Schema version 7 queues a waiter without waiting for the WAL flush, so a
// crash may lose a queue entry whose waiter was told "queued". Here the
// entry is deleted by hand (what such a crash leaves) and the holder then
// releases with nobody queued (no notification): the waiter's timed
// re-check finds its entry gone, queues again and is granted, long before
// its wait ends.
TEST(PostgresContention, AQueueEntryLostInACrashIsQueuedAgain) {
  Client holder = pg_client();
  Client waiter = pg_client("recheck_interval=100ms");
  Sql sql(pg_server().conninfo());
  const std::string name = unique_name("lost-entry");
  const std::string queued =
      "SELECT count(*) FROM baton.requests WHERE name = '" + name + "'";
  auto held = holder.try_acquire(name, ttl_opts(30s));
  ASSERT_TRUE(held.ok()) << held.error().to_string();
  const auto t0 = std::chrono::steady_clock::now();
  auto waiting = std::async(std::launch::async, [&] {
    return waiter.acquire(name, 20s, ttl_opts(30s));
  });
  ASSERT_TRUE(eventually([&] { return sql.one(queued) == "1"; }));
  ASSERT_EQ(sql.one("DELETE FROM baton.requests WHERE name = '" + name +
                    "' RETURNING 1"),
            "1");
  EXPECT_TRUE(*holder.release(*held));
  auto got = waiting.get();
  const auto waited = std::chrono::steady_clock::now() - t0;
  ASSERT_TRUE(got.ok()) << got.error().to_string();
  EXPECT_GT(got->fencing_token, held->fencing_token);
  EXPECT_LT(waited, 10s) << "the lost entry was not queued again";
  EXPECT_TRUE(*waiter.release(*got));
}

// One process (one store, one LISTEN connection) with four calls waiting on
// four locks. One of them reads the connection at a time (the listener's
// leader); the others are woken by whoever reads, and once the leader is
// granted and leaves, the background thread reads for them. The re-check
// timer is 60 s, so every grant here is a notification that reached its
// call; they are released in an order that makes the leader leave first in
// some rounds and last in others. (A waiting call's sleep re-checks its
// flag every 100 ms, so this catches a notification nobody reads, not a
// late wake-up.)
TEST(PostgresContention, EveryWaitingCallOfOneProcessHearsItsGrant) {
  constexpr int kLocks = 4;
  Client holder = pg_client();
  Client waiter = pg_client("recheck_interval=60s");
  Sql sql(pg_server().conninfo());
  const std::string base = unique_name("one-process");
  for (int round = 0; round < 3; ++round) {
    std::vector<std::string> names;
    std::vector<Lease> held;
    for (int i = 0; i < kLocks; ++i) {
      names.push_back(base + "/" + std::to_string(round) + "/" +
                      std::to_string(i));
      auto l = holder.try_acquire(names.back(), ttl_opts(30s));
      ASSERT_TRUE(l.ok()) << l.error().to_string();
      held.push_back(std::move(*l));
    }
    std::vector<std::future<Result<Lease>>> waiting;
    for (int i = 0; i < kLocks; ++i) {
      waiting.push_back(std::async(std::launch::async, [&, i] {
        return waiter.acquire(names[static_cast<std::size_t>(i)], 40s,
                              ttl_opts(30s));
      }));
    }
    ASSERT_TRUE(eventually([&] {
      return sql.one("SELECT count(*) FROM baton.requests WHERE name LIKE '" +
                     base + "/" + std::to_string(round) + "/%'") ==
             std::to_string(kLocks);
    }));
    for (int k = 0; k < kLocks; ++k) {
      // Round 0 releases in queueing order, round 1 in reverse, round 2
      // from the middle out.
      const int i = round == 0   ? k
                    : round == 1 ? kLocks - 1 - k
                                 : (k + kLocks / 2) % kLocks;
      const auto at = static_cast<std::size_t>(i);
      EXPECT_TRUE(*holder.release(held[at]));
      ASSERT_EQ(waiting[at].wait_for(15s), std::future_status::ready)
          << "round " << round << ", lock " << i << ": no grant heard";
      auto got = waiting[at].get();
      ASSERT_TRUE(got.ok()) << got.error().to_string();
      EXPECT_GT(got->fencing_token, held[at].fencing_token);
      EXPECT_TRUE(*waiter.release(*got));
    }
  }
}

// The flags in each locks row (has_queue, has_holders) that the fast
// statements decide from are set whenever the name has requests or holders
// rows, on every way such a row comes: a semaphore's second holder (the
// inline one spilled), a waiter queued and handed the lock, an acquire_all
// queued on two names and granted, shared holders, a lease expired by a
// pass, a request deleted by hand. A flag missing would let a fast
// statement grant beside a holder or ahead of the queue. Once the locks
// are free, releases clear them again (so the fast statements serve the
// names again).
TEST(PostgresContention, FlagsFollowTheQueueAndTheHolders) {
  Client c = pg_client("recheck_interval=60s");
  Sql sql(pg_server().conninfo());
  const std::string base = unique_name("flags");
  const std::string sem = base + "/sem", a = base + "/a", b = base + "/b",
                    rw = base + "/rw";
  auto wrong = [&] {
    return sql.one(
        "SELECT count(*) FROM baton.locks l WHERE starts_with(l.name, '" +
        base +
        "') AND ((NOT has_queue AND EXISTS (SELECT 1 FROM baton.requests r "
        "WHERE r.name = l.name)) OR (NOT has_holders AND EXISTS (SELECT 1 "
        "FROM baton.holders h WHERE h.name = l.name)))");
  };
  auto flags = [&](const std::string& name) {
    return sql.one(
        "SELECT has_queue::text || has_holders::text FROM "
        "baton.locks WHERE name = '" +
        name + "'");
  };
  AcquireOptions two = ttl_opts(30s);
  two.capacity = 2;
  auto s1 = c.try_acquire(sem, two);
  auto s2 = c.try_acquire(sem, two);
  ASSERT_TRUE(s1.ok() && s2.ok());
  EXPECT_EQ(flags(sem), "falsetrue");
  auto third =
      std::async(std::launch::async, [&] { return c.acquire(sem, 20s, two); });
  ASSERT_TRUE(eventually([&] { return flags(sem) == "truetrue"; }));
  EXPECT_EQ(wrong(), "0");
  EXPECT_TRUE(*c.release(*s1));
  auto s3 = third.get();
  ASSERT_TRUE(s3.ok()) << s3.error().to_string();
  EXPECT_EQ(wrong(), "0");

  auto held_a = c.try_acquire(a, ttl_opts(30s));
  ASSERT_TRUE(held_a.ok());
  auto both = std::async(std::launch::async, [&] {
    return c.acquire_all({a, b}, 20s, ttl_opts(30s));
  });
  ASSERT_TRUE(eventually([&] { return flags(b) == "truefalse"; }));
  EXPECT_EQ(flags(a), "truetrue");  // its inline holder was spilled
  EXPECT_EQ(wrong(), "0");
  EXPECT_TRUE(*c.release(*held_a));  // the pass grants both names
  auto ab = both.get();
  ASSERT_TRUE(ab.ok()) << ab.error().to_string();
  EXPECT_EQ(flags(a), "falsetrue");
  EXPECT_EQ(wrong(), "0");
  for (const auto& l : *ab) EXPECT_TRUE(*c.release(l));

  auto r1 = c.acquire_shared(rw, 0ms, ttl_opts(30s));
  auto r2 = c.acquire_shared(rw, 0ms, ttl_opts(200ms));
  ASSERT_TRUE(r1.ok() && r2.ok());
  std::this_thread::sleep_for(300ms);
  EXPECT_FALSE(c.try_acquire(rw, ttl_opts(5s)).ok());  // a pass expires r2
  EXPECT_EQ(flags(rw), "falsetrue");
  EXPECT_EQ(wrong(), "0");

  auto held_b = c.try_acquire(b, ttl_opts(30s));
  ASSERT_TRUE(held_b.ok()) << held_b.error().to_string();
  auto queued = std::async(std::launch::async,
                           [&] { return c.acquire(b, 1s, ttl_opts(5s)); });
  ASSERT_TRUE(eventually([&] { return flags(b) == "truefalse"; }));
  EXPECT_EQ(sql.one("DELETE FROM baton.requests WHERE name = '" + b +
                    "' RETURNING 1"),
            "1");
  (void)queued.get();
  EXPECT_EQ(wrong(), "0");
  EXPECT_TRUE(*c.release(*held_b));
  auto held_again = c.try_acquire(a, ttl_opts(30s));
  ASSERT_TRUE(held_again.ok()) << held_again.error().to_string();
  for (const auto& l : {*s2, *s3, *held_again, *r1}) EXPECT_TRUE(*c.release(l));
  EXPECT_EQ(wrong(), "0");
  EXPECT_EQ(sql.one("SELECT count(*) FROM baton.locks WHERE starts_with(name, "
                    "'" +
                    base + "') AND (has_queue OR has_holders)"),
            "0");
}

}  // namespace
}  // namespace baton::testing
