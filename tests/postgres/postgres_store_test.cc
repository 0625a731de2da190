// tests/postgres/postgres_store_test.cc — postgres:// specifics: the
// database clock, the fenced-write helper, dead waiters, concurrent schema
// creation, the micro-batch scheduler's shard workers, URL/pool settings,
// global mode.
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "baton/fence.h"
#include "pg_test_util.h"
#include "stores/postgres/schema.h"

namespace baton::testing {
namespace {

std::int64_t db_now_ms(Sql& sql) {
  return std::stoll(
      sql.one("SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint"));
}

// The store has no clock of its own: expiry and time left come from the
// database's clock_timestamp(), whatever the client's clock says.
TEST(PostgresStore, ExpiryFollowsTheDatabaseClock) {
  Sql sql(pg_server().conninfo());
  ASSERT_TRUE(sql.ok());
  Client c = pg_client();
  const std::string name = unique_name("clock");
  const std::int64_t before = db_now_ms(sql);
  auto lease = c.try_acquire(name, ttl_opts(2s));
  const std::int64_t after = db_now_ms(sql);
  ASSERT_TRUE(lease.ok()) << lease.error().to_string();
  EXPECT_GE(lease->store_expires_at_ms, before + 2000);
  EXPECT_LE(lease->store_expires_at_ms, after + 2000);
  // The stored expiry is the database's now() + TTL, to the microsecond.
  const std::string stored = sql.one(
      "SELECT (extract(epoch FROM expires_at - granted_at) * 1000)::bigint "
      "FROM baton.holders_all WHERE name = '" +
      name + "'");
  EXPECT_EQ(stored, "2000");
  // Expiry is decided by database time: a short lease is free again for a
  // second client once the database says so, with nobody renewing it.
  auto brief = c.extend(*lease, 200ms);
  ASSERT_TRUE(brief.ok());
  Client other = pg_client();
  EXPECT_TRUE(eventually([&] {
    auto l = other.try_acquire(name, ttl_opts(5s));
    if (l.ok()) (void)other.release(*l);
    return l.ok();
  }));
  EXPECT_GE(db_now_ms(sql), brief->store_expires_at_ms);
}

// The fenced write (the resource rejects a token lower than the highest it
// has seen) as one SQL call, judged against real grants.
TEST(PostgresStore, FencedWriteAcceptsOnlyTheNewestToken) {
  Sql sql(pg_server().conninfo());
  Client c = pg_client();
  const std::string name = unique_name("fenced");
  auto first = c.try_acquire(name, ttl_opts(5s));
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE(*c.release(*first));
  auto second = c.try_acquire(name, ttl_opts(5s));
  ASSERT_TRUE(second.ok());
  auto write = [&](std::uint64_t token) {
    return sql.one("SELECT baton.fenced_write('" + name + "', " +
                   std::to_string(token) + ")");
  };
  EXPECT_EQ(write(second->fencing_token), "t");
  EXPECT_EQ(write(second->fencing_token), "t");  // same grant, again
  EXPECT_EQ(write(first->fencing_token), "f");   // the paused old holder
  EXPECT_EQ(sql.one("SELECT highest FROM baton.fences WHERE resource = '" +
                    name + "'"),
            std::to_string(second->fencing_token));
  (void)c.release(*second);
}

// A waiter whose client died (no re-check refreshes its heartbeat) is
// pruned by the next scheduling pass and does not block the queue.
TEST(PostgresStore, DeadWaiterIsPrunedAfterItsHeartbeat) {
  Sql sql(pg_server().conninfo());
  Client c = pg_client();
  const std::string name = unique_name("dead");
  auto held = c.try_acquire(name, ttl_opts(30s));
  ASSERT_TRUE(held.ok());
  // A "client" that queues with a 300 ms heartbeat and then vanishes.
  const std::string r = sql.one("SELECT kind FROM baton.acquire('" + name +
                                "', '" + OwnerToken::random().to_string() +
                                "', 5000, 1, 'dead', '', 'wait', 60000, 300)");
  ASSERT_EQ(r, "queued");
  auto info = c.describe(name);
  ASSERT_TRUE(info.ok());
  ASSERT_EQ(info->waiters.size(), 1u);
  EXPECT_EQ(info->waiters[0].label, "dead");
  std::promise<bool> patient;
  std::thread t([&] {
    auto l = c.acquire(name, 20s, ttl_opts(5s, "patient"));
    patient.set_value(l.ok());
    if (l.ok()) (void)c.release(*l);
  });
  EXPECT_TRUE(eventually([&] {
    auto i = c.describe(name);
    return i.ok() && i->waiters.size() == 1 && i->waiters[0].label == "patient";
  }));
  EXPECT_TRUE(*c.release(*held));
  EXPECT_TRUE(patient.get_future().get());
  t.join();
  EXPECT_EQ(sql.one("SELECT count(*) FROM baton.requests WHERE name = '" +
                    name + "'"),
            "0");
}

// Eight stores opening a fresh schema at once: one creates it, nobody
// fails, one version row.
TEST(PostgresStore, ConcurrentFirstSchemaCreationFrom8Connections) {
  const std::string schema =
      "fresh_" + OwnerToken::random().to_string().substr(0, 10);
  std::atomic<int> ready{0}, ok{0};
  std::vector<std::string> errors(8);
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&, i] {
      ready.fetch_add(1);
      while (ready.load() < 8) std::this_thread::yield();
      auto s = open_store(pg_server().url("schema=" + schema));
      if (!s.ok()) {
        errors[i] = s.error().to_string();
        return;
      }
      Client c = Client::wrap(std::shared_ptr<Store>(std::move(*s)));
      auto l = c.try_acquire("schema-test/" + std::to_string(i), ttl_opts(5s));
      if (l.ok() && *c.release(*l)) ok.fetch_add(1);
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& e : errors) EXPECT_EQ(e, "");
  EXPECT_EQ(ok.load(), 8);
  Sql sql(pg_server().conninfo());
  EXPECT_EQ(sql.one("SELECT count(*) FROM " + schema + ".schema_version"), "1");
}

// A version-1 schema (before the fast paths: without the helpers version 2
// added, version row 1) is migrated on open: one transaction replaces the
// functions and records version 2; opening again changes nothing; a schema
// newer than this build is refused with a clear error.
TEST(PostgresStore, OldSchemaIsMigratedAndNewerSchemaIsRefused) {
  const std::string schema =
      "old_" + OwnerToken::random().to_string().substr(0, 10);
  const std::string name = unique_name("migrate");
  Sql sql(pg_server().conninfo());
  {
    Client c = pg_client("schema=" + schema);
    auto l = c.try_acquire(name, ttl_opts(30s));
    ASSERT_TRUE(l.ok()) << l.error().to_string();
    EXPECT_EQ(l->fencing_token, 1u);
  }
  // Make it look like version 1 (with a lease held by it): the lease in a
  // holders row, no inline holder in locks (version 5) ...
  ASSERT_EQ(sql.one("DROP VIEW " + schema + ".holders_all"), "");
  ASSERT_EQ(sql.one("INSERT INTO " + schema +
                    ".holders (name, token, fencing, ttl_ms, expires_at, "
                    "granted_at) SELECT name, h_token, h_fencing, h_ttl_ms, "
                    "h_expires, h_granted FROM " +
                    schema + ".locks WHERE h_token IS NOT NULL"),
            "");
  for (const char* col : {"h_token", "h_fencing", "h_ttl_ms", "h_expires",
                          "h_label", "h_rkey", "h_shared", "h_granted"}) {
    ASSERT_EQ(sql.one("ALTER TABLE " + schema + ".locks DROP COLUMN " + col),
              "")
        << col;
  }
  ASSERT_EQ(sql.one("SELECT count(*) FROM " + schema + ".holders"), "1");
  for (const char* f :
       {"_grant_new(text, uuid, bigint, int, text, text, timestamptz, "
        "boolean)",
        "_join(text, text, uuid, bigint, timestamptz)",
        "_enqueue(text, uuid, bigint, int, bigint, text, text, timestamptz, "
        "timestamptz, timestamptz, boolean)",
        "_capacity_conflict(text, int)", "_check_capacity(int)",
        "_durable()"}) {
    ASSERT_EQ(sql.one("DROP FUNCTION " + schema + "." + f), "") << f;
  }
  // ... and before version 4's shared mode (rule 18): no `shared` columns.
  for (const char* t : {"holders", "requests"}) {
    ASSERT_EQ(
        sql.one("ALTER TABLE " + schema + "." + t + " DROP COLUMN shared"), "")
        << t;
  }
  ASSERT_EQ(sql.one("UPDATE " + schema + ".schema_version SET version = 1"),
            "");
  Client c = pg_client("schema=" + schema);
  EXPECT_EQ(sql.one("SELECT string_agg(version::text, ',' ORDER BY version) "
                    "FROM " +
                    schema + ".schema_version"),
            "1," + std::to_string(store::pg::kSchemaVersion));
  EXPECT_EQ(sql.one("SELECT count(*) FROM pg_proc p JOIN pg_namespace n ON "
                    "n.oid = p.pronamespace WHERE n.nspname = '" +
                    schema + "' AND p.proname = '_grant_new'"),
            "1");
  // The lease taken before the migration is still there; fencing goes on.
  auto busy = c.try_acquire(name, ttl_opts(5s));
  ASSERT_FALSE(busy.ok());
  EXPECT_EQ(busy.error().code(), Errc::not_acquired);
  auto next = c.try_acquire(name + "/2", ttl_opts(5s));
  ASSERT_TRUE(next.ok()) << next.error().to_string();
  EXPECT_TRUE(*c.release(*next));
  // The migrated schema has shared mode: the old lease is exclusive.
  auto reader = c.acquire_shared(name, 0ms, ttl_opts(5s));
  ASSERT_FALSE(reader.ok());
  ASSERT_EQ(reader.error().holders().size(), 1u);
  EXPECT_FALSE(reader.error().holders()[0].shared);
  auto r1 = c.acquire_shared(name + "/3", 0ms, ttl_opts(5s));
  auto r2 = c.acquire_shared(name + "/3", 0ms, ttl_opts(5s));
  ASSERT_TRUE(r1.ok() && r2.ok());
  EXPECT_TRUE(r1->shared && r2->shared);
  EXPECT_TRUE(*c.release(*r1));
  EXPECT_TRUE(*c.release(*r2));
  // Opening again is a no-op.
  Client again = pg_client("schema=" + schema);
  EXPECT_EQ(sql.one("SELECT count(*) FROM " + schema + ".schema_version"), "2");
  // A newer schema than this build knows is refused, naming the versions.
  ASSERT_EQ(sql.one("INSERT INTO " + schema +
                    ".schema_version (version) VALUES (99)"),
            "");
  auto refused = open_store(pg_server().url("schema=" + schema));
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message().find("version 99"), std::string::npos)
      << refused.error().to_string();
}

// The micro-batch scheduler: a frequent "recent" shard over every namespace and
// an occasional "late" shard over half of them, both with acquire_some: take
// what is granted, process, release, ask for the rest. Both finish (no
// deadlock, the late one is not starved) and no namespace is ever
// processed by both at once.
TEST(PostgresStore, MicroBatchShardWorkersWithOverlappingNamespaces) {
  constexpr int kNamespaces = 12;
  const std::string base = unique_name("microbatch");
  std::vector<std::string> ns;
  for (int i = 0; i < kNamespaces; ++i) {
    ns.push_back(base + "/namespace" + std::to_string(i) + "-event");
  }
  std::vector<std::atomic<int>> busy(kNamespaces);
  std::atomic<int> overlaps{0}, errors{0};
  auto worker = [&](std::set<int> mine, int rounds, std::atomic<int>* done) {
    Client c = pg_client();
    for (int round = 0; round < rounds; ++round) {
      const OwnerToken reservation = OwnerToken::random();
      std::set<int> left = mine;
      while (!left.empty()) {
        std::vector<std::string> names;
        for (int i : left) names.push_back(ns[i]);
        auto got = c.acquire_some(names, reservation, 2s, ttl_opts(10s));
        if (!got.ok()) {
          errors.fetch_add(1);
          return;
        }
        for (const Lease& l : *got) {
          const int i = static_cast<int>(
              std::find(ns.begin(), ns.end(), l.name) - ns.begin());
          if (busy[i].fetch_add(1) != 0) overlaps.fetch_add(1);
          std::this_thread::sleep_for(2ms);  // "update the namespace table"
          busy[i].fetch_sub(1);
          if (!*c.release(l)) errors.fetch_add(1);
          left.erase(i);
        }
      }
      done->fetch_add(1);
    }
  };
  std::set<int> all, half;
  for (int i = 0; i < kNamespaces; ++i) {
    all.insert(i);
    if (i % 2 == 0) half.insert(i);
  }
  std::atomic<int> recent_done{0}, late_done{0};
  auto recent = std::async(std::launch::async, worker, all, 8, &recent_done);
  auto late = std::async(std::launch::async, worker, half, 4, &late_done);
  ASSERT_EQ(recent.wait_for(120s), std::future_status::ready) << "deadlock?";
  ASSERT_EQ(late.wait_for(120s), std::future_status::ready) << "deadlock?";
  EXPECT_EQ(recent_done.load(), 8);
  EXPECT_EQ(late_done.load(), 4);
  EXPECT_EQ(overlaps.load(), 0);
  EXPECT_EQ(errors.load(), 0);
}

TEST(PostgresStore, UrlCarriesThePoolSettings) {
  const std::string url = pg_server().url(
      "schema=s1&MaxOpenConnections=3&MaxIdleConnections=2&"
      "ConnectionMaxLifetime=10m&ConnectionMaxIdleTime=30s&"
      "request_timeout=2s&serialize=global");
  store::pg::ConnParams params;
  std::string where;
  auto o = pg_settings(url, &params, &where);
  ASSERT_TRUE(o.ok()) << o.error().to_string();
  EXPECT_EQ(o->schema, "s1");
  EXPECT_EQ(o->pool.max_open, 3);
  EXPECT_EQ(o->pool.max_idle, 2);
  EXPECT_EQ(o->pool.max_lifetime, std::chrono::minutes(10));
  EXPECT_EQ(o->pool.max_idle_time, 30s);
  EXPECT_EQ(o->request_timeout, 2s);
  EXPECT_TRUE(o->global_serialize);
  EXPECT_EQ(where.find("***"), std::string::npos);
  // 0 = no limit for the pool's ages.
  auto unlimited = pg_settings(
      pg_server().url("ConnectionMaxLifetime=0&connection_max_idle_time=0"),
      &params, &where);
  ASSERT_TRUE(unlimited.ok()) << unlimited.error().to_string();
  EXPECT_EQ(unlimited->pool.max_lifetime, 0ms);
  EXPECT_EQ(unlimited->pool.max_idle_time, 0ms);
  for (const char* bad : {"Bogus=1", "schema=Bad-Name", "MaxOpenConnections=x",
                          "MaxOpenConnections=0", "ConnectionMaxLifetime=soon",
                          "serialize=table"}) {
    auto r = pg_settings(pg_server().url(bad), &params, &where);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.error().code(), Errc::invalid_argument) << bad;
  }
  // A password never shows in the store's URL or its errors.
  auto refused = open_store("postgres://u:s3cret@127.0.0.1:1/db");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code(), Errc::unavailable);
  EXPECT_EQ(refused.error().message().find("s3cret"), std::string::npos);
}

// MaxOpenConnections bounds the pool: 8 threads share 2 connections.
TEST(PostgresStore, PoolNeverOpensMoreThanMaxOpenConnections) {
  Client c = pg_client(
      "MaxOpenConnections=2&MaxIdleConnections=2&application_name=pooltest");
  Sql sql(pg_server().conninfo());
  const std::string name = unique_name("pool");
  std::atomic<int> failures{0}, peak{0};
  std::atomic<bool> stop{false};
  std::thread watch([&] {
    while (!stop) {
      const int n =
          std::stoi(sql.one("SELECT count(*) FROM pg_stat_activity "
                            "WHERE application_name = 'pooltest'"));
      peak = std::max(peak.load(), n);
      std::this_thread::sleep_for(5ms);
    }
  });
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 40; ++i) {
        auto l = c.acquire(name, 30s, ttl_opts(10s));
        if (!l.ok() || !*c.release(*l)) failures.fetch_add(1);
      }
    });
  }
  for (auto& t : threads) t.join();
  stop = true;
  watch.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_LE(peak.load(), 3);  // 2 pooled + the LISTEN connection
}

// The micro-batch scheduler's single scheduling lock (serialize=global) keeps
// every rule the per-name locks keep: spot-check exclusion, FIFO and
// acquire_all.
TEST(PostgresStore, GlobalSerializationModeWorks) {
  Client c = pg_client("serialize=global");
  const std::string a = unique_name("global-a"), b = unique_name("global-b");
  std::atomic<int> inside{0}, violations{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 50; ++i) {
        auto l = c.acquire(a, 30s, ttl_opts(10s));
        if (!l.ok()) {
          violations.fetch_add(1);
          continue;
        }
        if (inside.fetch_add(1) != 0) violations.fetch_add(1);
        inside.fetch_sub(1);
        (void)c.release(*l);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(violations.load(), 0);
  auto both = c.acquire_all({a, b}, 5s, ttl_opts(5s));
  ASSERT_TRUE(both.ok()) << both.error().to_string();
  EXPECT_EQ(both->size(), 2u);
  for (const auto& l : *both) EXPECT_TRUE(*c.release(l));
}

}  // namespace
}  // namespace baton::testing
