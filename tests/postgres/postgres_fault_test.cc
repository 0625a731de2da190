// tests/postgres/postgres_fault_test.cc — postgres:// under faults: a
// connection killed mid-acquire (pg_terminate_backend), a blocking acquire
// stuck in the server past its wait, a LISTEN connection killed under a
// waiting call, and a PostgreSQL restart mid-run.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "baton/fence.h"
#include "pg_test_util.h"

namespace baton::testing {
namespace {

int holders_of(Client& c, const std::string& name) {
  auto info = c.describe(name);
  return info.ok() ? static_cast<int>(info->holders.size()) : -1;
}

// The victim's backend is killed while its acquire waits inside the
// scheduling transaction: the transaction rolls back (no lease); a retry
// with the same owner token grants exactly once.
TEST(PostgresFault, BackendKilledMidAcquireLeavesNoLeaseThenRetryGrantsOnce) {
  Sql blocker(pg_server().conninfo());
  Sql killer(pg_server().conninfo());
  ClientOptions no_retry;
  no_retry.max_retries = 0;
  Client victim = pg_client("application_name=victim1", no_retry);
  Client judge = pg_client();
  const std::string name = unique_name("killed");
  // Hold the name's scheduling lock so the victim's call parks inside it.
  ASSERT_EQ(blocker.one("SELECT pg_advisory_lock(hashtextextended('" + name +
                        "', 7))"),
            "");
  AcquireOptions o = ttl_opts(30s);
  o.token = OwnerToken::random();
  auto pending = std::async(std::launch::async,
                            [&] { return victim.try_acquire(name, o); });
  ASSERT_TRUE(eventually([&] {
    return killer.one(
               "SELECT count(*) FROM pg_stat_activity WHERE "
               "application_name = 'victim1' AND wait_event_type = "
               "'Lock'") == "1";
  }));
  EXPECT_EQ(killer.one("SELECT count(*) FROM (SELECT pg_terminate_backend(pid) "
                       "FROM pg_stat_activity WHERE application_name = "
                       "'victim1' AND wait_event_type = 'Lock') s"),
            "1");
  auto lost = pending.get();
  ASSERT_FALSE(lost.ok());
  EXPECT_EQ(lost.error().code(), Errc::unavailable) << lost.error().to_string();
  (void)blocker.one("SELECT pg_advisory_unlock_all()");
  EXPECT_EQ(holders_of(judge, name), 0) << "a lease leaked from the kill";
  // Rule 17: the retry with the same token grants once; a second retry
  // returns the same lease.
  auto retry = victim.try_acquire(name, o);
  ASSERT_TRUE(retry.ok()) << retry.error().to_string();
  auto again = victim.try_acquire(name, o);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->fencing_token, retry->fencing_token);
  EXPECT_EQ(holders_of(judge, name), 1);
  EXPECT_TRUE(*judge.release(*retry));
  EXPECT_EQ(holders_of(judge, name), 0);
}

// Rule 7 under a stuck server: a blocking acquire whose store call parks
// inside the database (the name's scheduling lock held elsewhere) returns
// `timeout` at its call deadline (end of the wait + 50 ms), naming the cause,
// instead of after request_timeout (5 s). The 2 s bound is far from both.
TEST(PostgresFault, BlockingAcquireStuckInTheServerReturnsAtItsCallDeadline) {
  Sql blocker(pg_server().conninfo());
  ClientOptions no_retry;
  no_retry.max_retries = 0;
  Client victim = pg_client("application_name=victim_deadline", no_retry);
  const std::string name = unique_name("stuck");
  ASSERT_EQ(blocker.one("SELECT pg_advisory_lock(hashtextextended('" + name +
                        "', 7))"),
            "");
  const auto t0 = std::chrono::steady_clock::now();
  auto r = victim.acquire(name, 300ms, ttl_opts(2s));
  const auto took = std::chrono::steady_clock::now() - t0;
  (void)blocker.one("SELECT pg_advisory_unlock_all()");
  ASSERT_FALSE(r.ok()) << "granted although the name's lock was held";
  EXPECT_EQ(r.error().code(), Errc::timeout) << r.error().to_string();
  EXPECT_NE(r.error().message().find("call deadline"), std::string::npos)
      << r.error().to_string();
  EXPECT_LT(took, 2s) << "the acquire outlived its wait by far";
}

// Backends killed at random moments during a stream of acquires: each
// acquire, retried with its own token until it answers, leaves exactly one
// lease (the one it returns), never two and never a leaked one.
//
// The killer polls for the victim's busy backend every 0-3 ms and kills it,
// then waits (bounded) until that acquire has answered before the next
// kill. A fixed-period storm starved every acquire on a loaded machine (a
// CI run checked 1 in 10 s); one kill per acquire at most keeps both the
// kills and the progress.
TEST(PostgresFault, RandomBackendKillsNeverLeaveTwoLeases) {
  ClientOptions retrying;
  retrying.max_retries = 2;
  retrying.retry_interval = 2ms;
  Client victim = pg_client("application_name=victim2", retrying);
  Client judge = pg_client();
  Sql killer(pg_server().conninfo());
  std::atomic<bool> stop{false};
  std::atomic<int> kills{0}, completed{0};
  std::thread k([&] {
    for (int n = 0; !stop; ++n) {
      std::this_thread::sleep_for(std::chrono::milliseconds(n % 4));
      const int seen = completed;
      const int hit = std::stoi(killer.one(
          "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM "
          "pg_stat_activity WHERE application_name = 'victim2' "
          "AND state = 'active') s"));
      if (hit == 0) continue;
      kills += hit;
      for (int i = 0; i < 400 && !stop && completed == seen; ++i) {
        std::this_thread::sleep_for(5ms);
      }
    }
  });
  const std::string base = unique_name("storm");
  int bad = 0, checked = 0;
  const auto end = std::chrono::steady_clock::now() + 20s;
  for (int i = 0;
       (checked < 40 || kills < 10) && std::chrono::steady_clock::now() < end;
       ++i) {
    const std::string name = base + "/" + std::to_string(i);
    AcquireOptions o = ttl_opts(60s);
    o.token = OwnerToken::random();
    Result<Lease> l = Error(Errc::unavailable, "not tried");
    for (int attempt = 0; attempt < 200 && !l.ok(); ++attempt) {
      l = victim.try_acquire(name, o);
      if (!l.ok() && l.error().code() != Errc::unavailable) break;
    }
    ++completed;
    if (!l.ok()) continue;  // could not get through at all: checked below
    ++checked;
    auto info = judge.describe(name);
    if (!info.ok() || info->holders.size() != 1 ||
        info->holders[0].fencing_token != l->fencing_token) {
      ++bad;
    }
    if (!*judge.release(*l)) ++bad;
    if (holders_of(judge, name) != 0) ++bad;
  }
  stop = true;
  k.join();
  EXPECT_EQ(bad, 0);
  EXPECT_GE(checked, 20) << kills << " kills";
  EXPECT_GT(kills.load(), 0) << "the storm never hit a backend";
  // Nothing left behind under the storm's names.
  auto left = judge.list(base);
  ASSERT_TRUE(left.ok()) << left.error().to_string();
  EXPECT_TRUE(left->empty());
}

// PostgreSQL restarts while two clients take turns on a lock and write to
// a fenced resource: both recover, and fencing tokens continue upward.
TEST(PostgresFault, RestartMidRunClientsRecoverAndFencingContinuesUpward) {
  const std::string name = unique_name("restart");
  FencedResource resource;
  std::mutex mu;
  std::uint64_t max_before = 0, min_after = UINT64_MAX;
  std::atomic<int> phase{0};  // 0 before the restart, 1 during, 2 after
  std::atomic<int> after_ok[2] = {0, 0};
  std::atomic<bool> stop{false};
  auto worker = [&](int id) {
    ClientOptions co;
    co.max_retries = 10;
    co.retry_interval = 50ms;
    Client c = pg_client("", co);
    while (!stop) {
      const int seen = phase.load();
      auto l = c.acquire(name, 3s, ttl_opts(3s));
      if (!l.ok()) {
        std::this_thread::sleep_for(20ms);
        continue;
      }
      (void)resource.try_write(l->fencing_token);
      {
        std::lock_guard<std::mutex> lk(mu);
        if (seen == 0 && phase.load() == 0) {
          max_before = std::max(max_before, l->fencing_token);
        }
        if (seen == 2) {
          min_after = std::min(min_after, l->fencing_token);
          after_ok[id].fetch_add(1);
        }
      }
      std::this_thread::sleep_for(2ms);
      (void)c.release(*l);
    }
  };
  std::thread a(worker, 0), b(worker, 1);
  std::this_thread::sleep_for(800ms);
  phase = 1;
  pg_server().restart();
  phase = 2;
  EXPECT_TRUE(eventually(
      [&] { return after_ok[0].load() >= 5 && after_ok[1].load() >= 5; }, 30s))
      << "clients did not recover: " << after_ok[0] << ", " << after_ok[1];
  stop = true;
  a.join();
  b.join();
  EXPECT_GT(max_before, 0u);
  EXPECT_GT(min_after, max_before) << "fencing went backwards after restart";
  EXPECT_EQ(resource.rejected(), 0u);
}

// A waiting call reads its store's LISTEN connection itself (the listener's
// leader). That connection is killed while the call waits, then the holder
// releases: the notification went nowhere, and the re-check timer is 60 s,
// so only the reconnect (which wakes every waiter for a re-check) can
// hand the lock over in time. Twice, so the second wait reads the new
// connection.
TEST(PostgresFault, ListenConnectionKilledUnderAWaitingCallLosesNoGrant) {
  Client holder = pg_client();
  Client waiter = pg_client("application_name=lsn_victim&recheck_interval=60s");
  Sql sql(pg_server().conninfo());
  const std::string name = unique_name("listen-kill");
  const std::string queued =
      "SELECT count(*) FROM baton.requests WHERE name = '" + name + "'";
  for (int round = 0; round < 2; ++round) {
    auto held = holder.try_acquire(name, ttl_opts(30s));
    ASSERT_TRUE(held.ok()) << held.error().to_string();
    auto waiting = std::async(std::launch::async, [&] {
      return waiter.acquire(name, 40s, ttl_opts(30s));
    });
    ASSERT_TRUE(eventually([&] { return sql.one(queued) == "1"; }));
    // (After round 0 the listener may still be reconnecting: the waiter
    // can be granted by the look it makes when its connection fails.)
    ASSERT_TRUE(eventually([&] {
      return sql.one(
                 "SELECT count(*) FROM pg_stat_activity WHERE "
                 "application_name = 'lsn_victim' AND query LIKE "
                 "'LISTEN%'") == "1";
    }));
    ASSERT_EQ(sql.one("SELECT count(*) FROM (SELECT pg_terminate_backend(pid) "
                      "FROM pg_stat_activity WHERE application_name = "
                      "'lsn_victim' AND query LIKE 'LISTEN%') s"),
              "1")
        << "round " << round;
    EXPECT_TRUE(*holder.release(*held));
    ASSERT_EQ(waiting.wait_for(15s), std::future_status::ready)
        << "round " << round << ": the grant was lost with the connection";
    auto got = waiting.get();
    ASSERT_TRUE(got.ok()) << got.error().to_string();
    EXPECT_GT(got->fencing_token, held->fencing_token);
    EXPECT_TRUE(*waiter.release(*got));
  }
}

}  // namespace
}  // namespace baton::testing
