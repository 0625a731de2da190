// tests/server/batond_process_test.cc — a real batond process: interop with
// redis-cli and redis-py, durability across kill -9, session end, bad input.
#include "batond_process.h"

#include <gtest/gtest.h>

#include "baton/client.h"
#include "baton/counter.h"
#include "proto/commands.h"
#include "proto/resp.h"
#include "raw_resp.h"

namespace baton {
namespace {

using baton::testing::BatondProcess;
using baton::testing::info_field;
using baton::testing::Raw;
using baton::testing::run;
using namespace std::chrono_literals;

const std::string kTok1 = "0123456789abcdef0123456789abcdef";
const std::string kTok2 = "fedcba9876543210fedcba9876543210";

TEST(Batond, RedisCliAcquireAndRelease) {
  BatondProcess server;
  std::string cli = "redis-cli -p " + std::to_string(server.port()) + " ";
  EXPECT_EQ(run(cli + "PING"), "PONG\n");
  std::string g =
      run(cli + "LOCK.ACQUIRE cli-lock " + kTok1 + " 30000 LABEL redis-cli");
  EXPECT_EQ(g.rfind("granted\n", 0), 0u) << g;
  std::string busy = run(cli + "LOCK.ACQUIRE cli-lock " + kTok2 + " 30000");
  EXPECT_NE(busy.find("not_acquired"), std::string::npos) << busy;
  EXPECT_NE(busy.find("redis-cli"), std::string::npos) << busy;
  std::string rel = run(cli + "LOCK.RELEASE cli-lock " + kTok1);
  EXPECT_EQ(rel, "was_held\n1\nholds_left\n0\n");
  std::string again = run(cli + "LOCK.RELEASE cli-lock " + kTok1);
  EXPECT_EQ(again, "was_held\n0\nholds_left\n0\n");
}

TEST(Batond, RedisPyExecuteCommand) {
  BatondProcess server;
  std::string py =
      "import redis\n"
      "r = redis.Redis(host='127.0.0.1', port=" +
      std::to_string(server.port()) +
      ")\n"
      "g = r.execute_command('LOCK.ACQUIRE', 'py-lock', '" +
      kTok1 +
      "', 30000)\n"
      "assert g[0] == b'granted', g\n"
      "d = dict(zip(g[1::2], g[2::2]))\n"
      "assert d[b'fencing'] >= 1, d\n"
      "try:\n"
      "    r.execute_command('LOCK.ACQUIRE', '', '" +
      kTok1 +
      "', 30000)\n"
      "    raise SystemExit('no error')\n"
      "except redis.exceptions.ResponseError as e:\n"
      "    assert str(e).startswith('invalid_argument'), e\n"
      "rel = r.execute_command('LOCK.RELEASE', 'py-lock', '" +
      kTok1 +
      "')\n"
      "assert rel == [b'was_held', 1, b'holds_left', 0], rel\n"
      "print('ok')\n";
  std::string file = server.dir() + "/t.py";
  FILE* f = std::fopen(file.c_str(), "w");
  std::fputs(py.c_str(), f);
  std::fclose(f);
  EXPECT_EQ(run("/usr/bin/python3 " + file + " 2>&1"), "ok\n");
}

// Every fsync policy that acknowledges after an fsync (and the default):
// what a reply acknowledged is there after kill -9. (kill -9 keeps the page
// cache, so this checks that nothing is acknowledged before it was written
// and that replay restores it; the fsync itself is covered by the ordering:
// replies wait for durable_seq, which only a finished fdatasync raises.)
class Kill9 : public ::testing::TestWithParam<std::vector<std::string>> {};

TEST_P(Kill9, AcknowledgedLeaseSurvives) {
  BatondProcess server("", GetParam());
  auto client = Client::open(server.url());
  ASSERT_TRUE(client) << client.error().to_string();
  AcquireOptions opt;
  opt.ttl = 60s;
  opt.label = "survivor";
  auto lease = client->try_acquire("durable", opt);
  ASSERT_TRUE(lease) << lease.error().to_string();
  ASSERT_TRUE(client->counter("durable-counter").add(7));
  server.kill9();
  server.start();
  auto after = Client::open(server.url());
  ASSERT_TRUE(after);
  auto info = after->describe("durable");
  ASSERT_TRUE(info) << info.error().to_string();
  ASSERT_EQ(info->holders.size(), 1u);
  EXPECT_EQ(info->holders[0].fencing_token, lease->fencing_token);
  EXPECT_EQ(info->holders[0].label, "survivor");
  EXPECT_GT(info->holders[0].time_left, 50s);
  EXPECT_LE(info->holders[0].time_left, 60s);
  // The holder can still extend and release it: the same lease.
  EXPECT_TRUE(after->extend(*lease, 30s));
  auto next = after->try_acquire("another", opt);
  ASSERT_TRUE(next);
  EXPECT_GT(next->fencing_token, lease->fencing_token);
  auto busy = after->try_acquire("durable", opt);
  ASSERT_FALSE(busy);
  EXPECT_EQ(busy.error().code(), Errc::not_acquired);
  EXPECT_EQ(*after->counter("durable-counter").get(), 7);
}

// Rule 18: shared leases come back shared after kill -9 (the journal keeps
// the mode): a writer is still refused, another reader joins them.
TEST(Batond, SharedLeasesSurviveKill9WithTheirMode) {
  BatondProcess server("", {});
  auto client = Client::open(server.url());
  ASSERT_TRUE(client) << client.error().to_string();
  AcquireOptions opt;
  opt.ttl = 60s;
  auto r1 = client->acquire_shared("rw-durable", 0ms, opt);
  auto r2 = client->acquire_shared("rw-durable", 0ms, opt);
  ASSERT_TRUE(r1 && r2);
  server.kill9();
  server.start();
  auto after = Client::open(server.url());
  ASSERT_TRUE(after);
  auto info = after->describe("rw-durable");
  ASSERT_TRUE(info) << info.error().to_string();
  ASSERT_EQ(info->holders.size(), 2u);
  EXPECT_TRUE(info->holders[0].shared && info->holders[1].shared);
  EXPECT_EQ(info->holders[1].fencing_token, r2->fencing_token);
  auto w = after->try_acquire("rw-durable", opt);
  ASSERT_FALSE(w);
  EXPECT_EQ(w.error().code(), Errc::not_acquired) << w.error().to_string();
  auto r3 = after->acquire_shared("rw-durable", 0ms, opt);
  ASSERT_TRUE(r3) << r3.error().to_string();
  EXPECT_GT(r3->fencing_token, r2->fencing_token);
  EXPECT_TRUE(*after->release(*r1));
  EXPECT_TRUE(*after->release(*r2));
  EXPECT_TRUE(*after->release(*r3));
}

// Concurrent clients: grants that rode on a shared (group) fsync, and grants
// appended while an fsync was in flight, are all there after kill -9.
TEST_P(Kill9, ConcurrentAcknowledgedGrantsSurvive) {
  BatondProcess server("", GetParam());
  constexpr int kThreads = 8, kEach = 25;
  std::vector<std::vector<std::uint64_t>> fencing(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      auto client = Client::open(server.url());
      ASSERT_TRUE(client) << client.error().to_string();
      AcquireOptions opt;
      opt.ttl = 60s;
      for (int i = 0; i < kEach; ++i) {
        auto name = "g" + std::to_string(t) + "-" + std::to_string(i);
        auto lease = client->try_acquire(name, opt);
        ASSERT_TRUE(lease) << lease.error().to_string();
        fencing[t].push_back(lease->fencing_token);
        // A release acknowledged before it is durable must not let a later
        // durable grant of the same lock be lost either.
        if (i % 5 == 0) {
          auto rel = client->release(*lease);
          ASSERT_TRUE(rel && *rel);
          auto again = client->try_acquire(name, opt);
          ASSERT_TRUE(again) << again.error().to_string();
          fencing[t].back() = again->fencing_token;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  server.kill9();
  server.start();
  auto after = Client::open(server.url());
  ASSERT_TRUE(after);
  for (int t = 0; t < kThreads; ++t) {
    ASSERT_EQ(fencing[t].size(), std::size_t{kEach});
    for (int i = 0; i < kEach; ++i) {
      auto name = "g" + std::to_string(t) + "-" + std::to_string(i);
      auto info = after->describe(name);
      ASSERT_TRUE(info) << info.error().to_string();
      ASSERT_EQ(info->holders.size(), 1u) << name;
      EXPECT_EQ(info->holders[0].fencing_token, fencing[t][i]) << name;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Fsync, Kill9,
    ::testing::Values(std::vector<std::string>{},
                      std::vector<std::string>{"--fsync", "batch"},
                      std::vector<std::string>{"--fsync", "batch",
                                               "--fsync-interval", "20ms"},
                      std::vector<std::string>{"--fsync", "always"}),
    [](const auto& param_info) -> std::string {
      const auto& a = param_info.param;
      if (a.empty()) return "Default";
      if (a.size() == 2) return a[1] == "always" ? "Always" : "Batch";
      return "BatchInterval20ms";
    });

// fsync_interval bounds the fsync rate: a grant that arrives just after an
// fsync started waits for the interval; a release does not wait at all.
TEST(Batond, FsyncIntervalBoundsTheSyncRate) {
  BatondProcess server("", {"--fsync", "batch", "--fsync-interval", "400ms"});
  Raw c(server.port());
  ASSERT_EQ(c.call({"LOCK.ACQUIRE", "r1", kTok1, "30000"}).elements.at(0).str,
            "granted");
  auto start = std::chrono::steady_clock::now();
  ASSERT_EQ(c.call({"LOCK.ACQUIRE", "r2", kTok1, "30000"}).elements.at(0).str,
            "granted");
  EXPECT_GE(std::chrono::steady_clock::now() - start, 250ms);
  // The release is answered at once although the next fsync may not start
  // for another 400 ms.
  start = std::chrono::steady_clock::now();
  auto rel = c.call({"LOCK.RELEASE", "r1", kTok1});
  EXPECT_LT(std::chrono::steady_clock::now() - start, 250ms);
  ASSERT_EQ(rel.elements.size(), 4u);
  EXPECT_EQ(rel.elements.at(1).integer, 1);
  const std::int64_t syncs = info_field(c, "journal_syncs_total");
  EXPECT_GE(syncs, 2);
  EXPECT_LE(syncs, 3);
}

TEST(Batond, ClosedConnectionsWaiterLeavesTheQueue) {
  BatondProcess server;
  Raw holder(server.port());
  auto g = holder.call({"LOCK.ACQUIRE", "q", kTok1, "30000"});
  ASSERT_EQ(g.elements.at(0).str, "granted");
  {
    Raw waiter(server.port());
    waiter.send({"LOCK.ACQUIRE", "q", kTok2, "30000", "WAIT", "30000"});
    std::this_thread::sleep_for(100ms);
    auto info = proto::read_lock_info(holder.call({"LOCK.DESCRIBE", "q"}));
    ASSERT_TRUE(info);
    EXPECT_EQ(info->waiters.size(), 1u);
  }
  std::this_thread::sleep_for(100ms);
  auto info = proto::read_lock_info(holder.call({"LOCK.DESCRIBE", "q"}));
  ASSERT_TRUE(info);
  EXPECT_EQ(info->waiters.size(), 0u);
}

TEST(Batond, ParkedWaiterIsPushedOnRelease) {
  BatondProcess server;
  Raw holder(server.port());
  Raw waiter(server.port());
  ASSERT_EQ(
      holder.call({"LOCK.ACQUIRE", "p", kTok1, "30000"}).elements.at(0).str,
      "granted");
  waiter.send({"LOCK.ACQUIRE", "p", kTok2, "30000", "WAIT", "10000"});
  waiter.send({"PING"});  // pipelined behind the parked request
  std::this_thread::sleep_for(50ms);
  auto start = std::chrono::steady_clock::now();
  holder.call({"LOCK.RELEASE", "p", kTok1});
  auto g = waiter.read();
  ASSERT_TRUE(g);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 1s);
  auto grant = proto::read_grant(*g);
  ASSERT_TRUE(grant) << grant.error().to_string();
  EXPECT_EQ(grant->token.to_string(), kTok2);
  auto pong = waiter.read();
  ASSERT_TRUE(pong);
  EXPECT_EQ(pong->str, "PONG");
}

TEST(Batond, BadInputIsRefusedAndServerSurvives) {
  BatondProcess server;
  Raw c(server.port());
  auto r = c.call({"LOCK.ACQUIRE", std::string(600, 'n'), kTok1, "1000"});
  ASSERT_EQ(r.type, proto::Reply::Type::error);
  EXPECT_EQ(r.str.rfind("invalid_argument lock name is 600 bytes", 0), 0u)
      << r.str;
  r = c.call({"NOPE"});
  EXPECT_EQ(r.str.rfind("invalid_argument unknown command", 0), 0u) << r.str;
  r = c.call({"LOCK.RELEASE", "x"});
  EXPECT_EQ(r.str.rfind("invalid_argument wrong number", 0), 0u) << r.str;
  r = c.call({"LOCK.ACQUIRE", "x", "nothex", "1000"});
  EXPECT_EQ(r.str.rfind("invalid_argument owner token", 0), 0u) << r.str;
  r = c.call({"LOCK.ACQUIRE", "x", kTok1, "0"});
  EXPECT_EQ(r.str.rfind("invalid_argument", 0), 0u) << r.str;
  auto info = proto::read_lock_info(c.call({"LOCK.DESCRIBE", "x"}));
  ASSERT_TRUE(info);
  EXPECT_TRUE(info->holders.empty());
  // Over-limit frame: an error, then the connection is closed.
  Raw big(server.port());
  big.send_raw("*2\r\n$4\r\nPING\r\n$99999999\r\n");
  auto e = big.read();
  ASSERT_TRUE(e);
  EXPECT_EQ(e->str.rfind("invalid_argument request is over", 0), 0u) << e->str;
  EXPECT_FALSE(big.read());
  Raw junk(server.port());
  junk.send_raw("GET / HTTP/1.1\r\n\r\n");
  e = junk.read();
  ASSERT_TRUE(e);
  EXPECT_EQ(e->type, proto::Reply::Type::error);
  EXPECT_FALSE(junk.read());
  EXPECT_EQ(c.call({"PING"}).str, "PONG");
}

TEST(Batond, PasswordIsRequired) {
  char tmpl[] = "/tmp/batond-pw-XXXXXX";
  std::string dir = ::mkdtemp(tmpl);
  {
    FILE* f = std::fopen((dir + "/pw").c_str(), "w");
    std::fputs("s3cret\n", f);
    std::fclose(f);
  }
  BatondProcess server("", {"--password-file", dir + "/pw"});
  Raw c(server.port());
  auto r = c.call({"LOCK.DESCRIBE", "x"});
  EXPECT_EQ(r.str.rfind("permission_denied", 0), 0u) << r.str;
  r = c.call({"AUTH", "wrong"});
  EXPECT_EQ(r.str.rfind("permission_denied", 0), 0u) << r.str;
  EXPECT_EQ(c.call({"AUTH", "s3cret"}).str, "OK");
  EXPECT_EQ(c.call({"PING"}).str, "PONG");
  auto bad = Client::open(server.url());
  ASSERT_TRUE(bad);
  auto d = bad->describe("x");
  ASSERT_FALSE(d);
  EXPECT_EQ(d.error().code(), Errc::permission_denied);
  auto good = Client::open(server.url() + "?password=s3cret");
  ASSERT_TRUE(good);
  EXPECT_TRUE(good->describe("x"));
  std::string log = run("cat " + server.dir() + "/batond.log");
  EXPECT_EQ(log.find("s3cret"), std::string::npos);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace baton
