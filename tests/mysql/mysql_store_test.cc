// tests/mysql/mysql_store_test.cc — what the mysql:// store promises beyond
// the conformance suite, against one private MariaDB 10.11 for
// the binary (tests/mysql/my_process.h): URL checks, the durability check,
// concurrent schema creation (migrations: mysql_fast_test.cc), 50 first-time
// acquires of new names with no deadlock surfacing (each serialization mode),
// guarded modifications and the prize test, connections killed
// mid-acquire, a server restart (fencing keeps increasing) and client clocks
// hours off.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <future>
#include <mutex>
#include <regex>
#include <set>
#include <thread>
#include <vector>

#include "baton/client.h"
#include "baton/counter.h"
#include "my_process.h"
#include "tcp_proxy.h"

namespace baton {

namespace testing {
namespace {
MyProcess* g_server = nullptr;
}  // namespace

// One server for the binary (mysql_doorbell_test.cc shares it), stopped by
// pid at exit.
MyProcess& shared_my_server() {
  // Once, also when the first callers are threads of one test; but
  // mariadbd dies with the thread that forked it (PR_SET_PDEATHSIG), so a
  // test that calls this first from its own threads calls it on the main
  // thread before them (EightConcurrentFirstStartsAgree alone did not).
  static std::once_flag once;
  std::call_once(once, [] {
    g_server = new MyProcess();
    std::atexit([] { delete g_server; });
  });
  return *g_server;
}
}  // namespace testing

namespace {

using namespace std::chrono_literals;
using testing::MyProcess;

MyProcess& server() { return testing::shared_my_server(); }

std::string unique(const std::string& what) {
  static std::atomic<int> n{0};
  return "mytest/" + std::to_string(::getpid()) + "/" + what + "/" +
         std::to_string(n.fetch_add(1));
}

AcquireOptions opts(std::chrono::milliseconds ttl, std::string label = "") {
  AcquireOptions o;
  o.ttl = ttl;
  o.label = std::move(label);
  return o;
}

Client open(const std::string& query = "") {
  auto c = Client::open(server().url(query));
  EXPECT_TRUE(c.ok()) << c.error().to_string();
  return std::move(*c);
}

// True once `name` has a waiter (polls for up to 10 s).
bool eventually_queued(const Client& c, const std::string& name) {
  const auto end = std::chrono::steady_clock::now() + 10s;
  while (std::chrono::steady_clock::now() < end) {
    auto info = c.describe(name);
    if (info.ok() && !info->waiters.empty()) return true;
    std::this_thread::sleep_for(5ms);
  }
  return false;
}

TEST(MyUrl, BadSettingsAreRefusedNamingThem) {
  auto c = Client::open(server().url("colour=blue"));
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().code(), Errc::invalid_argument);
  EXPECT_NE(c.error().message().find("colour"), std::string::npos)
      << c.error().message();
  c = Client::open(server().url("serialize=sometimes"));
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.error().message().find("serialize"), std::string::npos);
  c = Client::open(server().url("segments=0"));
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().code(), Errc::invalid_argument);
}

// The spellings of the options before the shared vocabulary still work.
TEST(MyUrl, OlderSpellingsAreAccepted) {
  auto c = Client::open(
      server().url("RequestTimeout=3s&recheck_max=20ms&max_idle=4"));
  ASSERT_TRUE(c.ok()) << c.error().to_string();
  auto l = c->try_acquire(unique("spelling"), opts(5s));
  ASSERT_TRUE(l.ok()) << l.error().to_string();
  EXPECT_TRUE(*c->release(*l));
  // An option given twice under two spellings is refused, naming it.
  auto twice =
      Client::open(server().url("recheck_max=20ms&recheck_interval=1s"));
  ASSERT_FALSE(twice.ok());
  EXPECT_NE(twice.error().message().find("recheck_interval"), std::string::npos)
      << twice.error().message();
}

TEST(MyUrl, WrongPasswordIsPermissionDeniedAndNeverEchoed) {
  const std::string url = "mysql://baton:not-the-password@127.0.0.1:" +
                          std::to_string(server().port()) + "/baton_test";
  auto c = Client::open(url);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().code(), Errc::permission_denied) << c.error().to_string();
  EXPECT_EQ(c.error().message().find("not-the-password"), std::string::npos);
}

TEST(MyUrl, MariadbSchemeAndPasswordFromTheEnvironment) {
  ::setenv("MYSQL_PWD", MyProcess::kPassword, 1);
  auto c = Client::open("mariadb://baton@127.0.0.1:" +
                        std::to_string(server().port()) + "/baton_test");
  ::unsetenv("MYSQL_PWD");
  ASSERT_TRUE(c.ok()) << c.error().to_string();
  auto l = c->try_acquire(unique("env"), opts(5s));
  ASSERT_TRUE(l.ok()) << l.error().to_string();
  EXPECT_TRUE(*c->release(*l));
}

// This server offers no TLS (mysql_tls_test.cc has the one that does):
// the modes that require TLS refuse it at open and create nothing; the
// default, preferred, goes on in clear as MariaDB's and MySQL's clients do.
TEST(MyUrl, ModesThatRequireTlsRefuseAServerWithoutIt) {
  // Never read: no TLS handshake happens with this server.
  const std::string ca = server().dir() + "/unused-ca.pem";
  std::ofstream(ca) << "not read\n";
  for (const char* mode : {"required", "verify_ca", "verify_identity"}) {
    const std::string prefix = std::string("notls_") + mode + "_";
    const std::string m = std::string("ssl_mode=") + mode;
    auto c = Client::open(
        server().url(m + "&prefix=" + prefix +
                     (m == "ssl_mode=required" ? "" : "&ca=" + ca)));
    ASSERT_FALSE(c.ok()) << mode;
    const std::string text = c.error().to_string();
    std::printf("  -> %s\n", text.c_str());
    EXPECT_EQ(c.error().code(), Errc::unavailable) << text;
    EXPECT_NE(text.find("mysql://127.0.0.1:" + std::to_string(server().port()) +
                        "/baton_test"),
              std::string::npos)
        << text;
    EXPECT_NE(text.find("the server offers no TLS and " + m + " requires it"),
              std::string::npos)
        << text;
    EXPECT_EQ(text.find(MyProcess::kPassword), std::string::npos) << text;
    EXPECT_EQ(server().sql("SELECT COUNT(*) FROM information_schema.tables "
                           "WHERE table_schema = 'baton_test' AND table_name "
                           "LIKE '" +
                           prefix + "%'"),
              "0")
        << mode;
  }
  for (const char* mode : {"preferred", "disabled"}) {
    auto c = Client::open(server().url(std::string("ssl_mode=") + mode));
    ASSERT_TRUE(c.ok()) << c.error().to_string();
    auto l = c->try_acquire(unique("notls"), opts(5s));
    ASSERT_TRUE(l.ok()) << l.error().to_string();
    EXPECT_TRUE(*c->release(*l));
  }
}

// A server that could lose acknowledged commits in a crash is refused,
// unless the URL allows it explicitly.
TEST(MyDurability, NonDurableServerIsRefused) {
  server().sql("SET GLOBAL innodb_flush_log_at_trx_commit = 2");
  auto c = Client::open(server().url());
  auto allowed = Client::open(server().url("allow_non_durable=true"));
  server().sql("SET GLOBAL innodb_flush_log_at_trx_commit = 1");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().code(), Errc::invalid_argument);
  EXPECT_NE(c.error().message().find("innodb_flush_log_at_trx_commit"),
            std::string::npos);
  EXPECT_TRUE(allowed.ok()) << allowed.error().to_string();
}

// Eight processes' worth of stores creating the same fresh tables at once.
TEST(MySchema, EightConcurrentFirstStartsAgree) {
  const std::string prefix = "cc" + std::to_string(::getpid()) + "_";
  (void)server();  // started on this thread (see shared_my_server)
  std::atomic<int> ok{0};
  std::vector<std::thread> ts;
  for (int i = 0; i < 8; ++i) {
    ts.emplace_back([&] {
      auto c = Client::open(server().url("prefix=" + prefix));
      if (c.ok() && c->try_acquire(unique("schema"), opts(5s)).ok()) {
        ok.fetch_add(1);
      }
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(ok.load(), 8);
  EXPECT_EQ(server().sql("SELECT COUNT(*) FROM baton_test." + prefix +
                         "schema_version"),
            "1");
}

class MyModes : public ::testing::TestWithParam<std::string> {};

// A store that took gap locks deadlocked when many threads created new lock
// rows at once; here no deadlock reaches the caller.
TEST_P(MyModes, FiftyFirstTimeAcquiresOfNewNamesNeverFail) {
  Client c = open("serialize=" + GetParam());
  std::atomic<int> failures{0};
  std::string first_error;
  std::mutex mu;
  std::vector<std::thread> ts;
  const std::string base = unique("new-" + GetParam());
  for (int i = 0; i < 50; ++i) {
    ts.emplace_back([&, i] {
      auto l = c.acquire(base + "/" + std::to_string(i), 10s, opts(10s));
      if (!l.ok()) {
        failures.fetch_add(1);
        std::lock_guard<std::mutex> lk(mu);
        first_error = l.error().to_string();
        return;
      }
      if (!c.release(*l).ok()) failures.fetch_add(1);
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(failures.load(), 0) << first_error;
}

// One name's scheduling step never waits for another name's: the locking
// read of the queue goes through the (name, token) index. On a queue table
// with one row, MariaDB's optimizer preferred a scan of the primary key
// (it spares the sort by id), and a locking scan waits on every row it
// meets: a try on an unrelated name waited out innodb_lock_wait_timeout
// (5 s) behind a transaction holding another name's waiter.
TEST(MySchema, LockingReadsOfOneNameDoNotWaitForAnother) {
  const std::string prefix = "ix" + std::to_string(::getpid()) + "_";
  Client c = open("serialize=name&prefix=" + prefix);
  const std::string a = unique("ix-a"), b = unique("ix-b");
  auto held = c.try_acquire(a, opts(30s));
  ASSERT_TRUE(held.ok()) << held.error().to_string();
  auto waiter = std::async(std::launch::async,
                           [&] { return c.acquire(a, 20s, opts(30s)); });
  ASSERT_TRUE(eventually_queued(c, a));
  // Another transaction locks that waiter's queue row and the holder's row
  // and stays open.
  MYSQL* m = mysql_init(nullptr);
  ASSERT_NE(mysql_real_connect(m, nullptr, "root", "", "baton_test", 0,
                               server().socket_path().c_str(),
                               CLIENT_MULTI_STATEMENTS),
            nullptr)
      << mysql_error(m);
  const std::string lock_row =
      "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED;"
      "START TRANSACTION;SELECT id FROM " +
      prefix + "queue WHERE name = '" + a + "' FOR UPDATE;SELECT slot FROM " +
      prefix + "holders WHERE name = '" + a + "' FOR UPDATE";
  ASSERT_EQ(mysql_real_query(m, lock_row.data(), lock_row.size()), 0)
      << mysql_error(m);
  do {
    if (MYSQL_RES* r = mysql_store_result(m)) mysql_free_result(r);
  } while (mysql_next_result(m) == 0);
  const auto t0 = std::chrono::steady_clock::now();
  auto other = c.try_acquire(b, opts(30s));
  const auto took = std::chrono::steady_clock::now() - t0;
  mysql_close(m);  // rolls back, lets go of the row
  ASSERT_TRUE(other.ok()) << other.error().to_string();
  EXPECT_LT(took, 1s) << "a try on " << b << " waited for " << a << "'s row";
  EXPECT_TRUE(*c.release(*other));
  EXPECT_TRUE(*c.release(*held));
  auto w = waiter.get();
  ASSERT_TRUE(w.ok()) << w.error().to_string();
  EXPECT_TRUE(*c.release(*w));
}

// 50 threads modify shared records, each modification guarded by the
// record's lock; no update is lost.
TEST_P(MyModes, GuardedModificationsLoseNothing) {
  constexpr int kThreads = 50, kOps = 20, kRecords = 10;
  Client c = open("serialize=" + GetParam());
  std::vector<long> records(kRecords, 0);
  std::atomic<int> failures{0};
  const std::string base = unique("guarded-" + GetParam());
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; ++t) {
    ts.emplace_back([&, t] {
      for (int i = 0; i < kOps; ++i) {
        const int r = (t * 7 + i) % kRecords;
        auto l = c.acquire(base + "/" + std::to_string(r), 60s, opts(30s));
        if (!l.ok()) {
          failures.fetch_add(1);
          continue;
        }
        const long v = records[r];
        std::this_thread::yield();
        records[r] = v + 1;
        (void)c.release(*l);
      }
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(failures.load(), 0);
  long total = 0;
  for (long v : records) total += v;
  EXPECT_EQ(total, kThreads * kOps);
}

INSTANTIATE_TEST_SUITE_P(Serialize, MyModes,
                         ::testing::Values("center", "segments", "name"));

// The fenced-write helper: a write carrying a token lower than
// one already seen is refused; equal or higher is accepted and recorded.
TEST(MyFence, FencedWriteRefusesOlderTokens) {
  Client c = open();  // installs the schema and the helper
  const std::string res = "'" + unique("resource") + "'";
  auto fw = [&](int token) {
    return server().sql("SELECT baton_test.baton_fenced_write(" + res + ", " +
                        std::to_string(token) + ")");
  };
  EXPECT_EQ(fw(5), "1");
  EXPECT_EQ(fw(3), "0");
  EXPECT_EQ(fw(5), "1");
  EXPECT_EQ(fw(7), "1");
  EXPECT_EQ(fw(6), "0");
  EXPECT_EQ(server().sql("SELECT highest FROM baton_test.baton_fences WHERE "
                         "resource = " +
                         res),
            "7");
}

// The prize test across four independent stores: exactly 10 given.
TEST(MyCounters, TenPrizesManyTakersFourClients) {
  std::vector<Client> clients;
  for (int i = 0; i < 4; ++i) clients.push_back(open());
  const std::string name = unique("prizes");
  ASSERT_EQ(*clients[0].counter(name).add(10), 10);
  std::atomic<int> won{0}, refused{0};
  std::vector<std::thread> ts;
  for (int i = 0; i < 100; ++i) {
    ts.emplace_back([&, i] {
      auto r = clients[i % 4].counter(name).take(1);
      if (r.ok()) {
        won.fetch_add(1);
      } else if (r.error().code() == Errc::not_acquired) {
        refused.fetch_add(1);
      }
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(won.load(), 10);
  EXPECT_EQ(refused.load(), 90);
  EXPECT_EQ(*clients[1].counter(name).get(), 0);
}

// Every store connection is killed (KILL <id>) again and again while
// writers and readers (rule 18) work, each lost reply retried with its
// token (rule 17): never a writer beside anyone, and the lock ends with
// one lease or none, never a stuck queue.
TEST(MyFaults, ConnectionsKilledMidAcquireLeaveOneLeaseOrNone) {
  Client c = open();
  const std::string name = unique("killed");
  std::atomic<bool> stop{false};
  std::atomic<int> writers{0}, readers{0}, violations{0}, grants{0},
      shared_grants{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < 6; ++t) {
    ts.emplace_back([&, reader = t >= 4] {
      while (!stop.load()) {
        auto l = reader ? c.acquire_shared(name, 2s, opts(2s))
                        : c.acquire(name, 2s, opts(2s));
        if (!l.ok()) continue;
        if (l->shared != reader) violations.fetch_add(1);
        if (reader) {
          readers.fetch_add(1);
          if (writers.load() != 0) violations.fetch_add(1);
          shared_grants.fetch_add(1);
        } else {
          if (writers.fetch_add(1) != 0 || readers.load() != 0) {
            violations.fetch_add(1);
          }
        }
        grants.fetch_add(1);
        std::this_thread::sleep_for(2ms);
        (reader ? readers : writers).fetch_sub(1);
        (void)c.release(*l);
      }
    });
  }
  for (int round = 0; round < 10; ++round) {
    std::this_thread::sleep_for(100ms);
    const std::string ids = server().sql(
        "SELECT GROUP_CONCAT(id) FROM information_schema.processlist "
        "WHERE user = 'baton'");
    std::size_t pos = 0;
    while (pos < ids.size()) {
      std::size_t end = ids.find(',', pos);
      if (end == std::string::npos) end = ids.size();
      try {
        server().sql("KILL " + ids.substr(pos, end - pos));
      } catch (const std::exception&) {
        // already gone
      }
      pos = end + 1;
    }
  }
  stop = true;
  for (auto& t : ts) t.join();
  EXPECT_EQ(violations.load(), 0);
  EXPECT_GT(grants.load(), 10);
  EXPECT_GT(shared_grants.load(), 0);
  auto info = c.describe(name);
  ASSERT_TRUE(info.ok()) << info.error().to_string();
  // One writer's lease, or readers' only.
  for (const auto& h : info->holders) {
    if (!h.shared) {
      EXPECT_EQ(info->holders.size(), 1u);
    }
  }
  // Whatever an abandoned call left ends by its TTL; then the lock is free.
  auto again = c.acquire(name, 10s, opts(5s));
  ASSERT_TRUE(again.ok()) << again.error().to_string();
  EXPECT_TRUE(*c.release(*again));
}

// Fencing comes from a per-name high-water mark committed with the grant:
// it keeps increasing across a server restart.
TEST(MyFaults, RestartKeepsFencingIncreasing) {
  const std::string name = unique("restart");
  std::uint64_t before = 0;
  {
    Client c = open();
    for (int i = 0; i < 3; ++i) {
      auto l = c.try_acquire(name, opts(5s));
      ASSERT_TRUE(l.ok()) << l.error().to_string();
      before = l->fencing_token;
      EXPECT_TRUE(*c.release(*l));
    }
  }
  server().kill9();  // no clean shutdown: only durable commits survive
  server().start();
  Client c = open();
  auto l = c.try_acquire(name, opts(5s));
  ASSERT_TRUE(l.ok()) << l.error().to_string();
  EXPECT_GT(l->fencing_token, before);
  EXPECT_TRUE(*c.release(*l));
}

// Rule 7 over a slow network (388 ms each way, as a torture run's
// proxy_delay): a blocking acquire answers within its wait plus the
// client's 50 ms reply grace plus scheduling slack, whatever the store
// was doing.
TEST(MyFaults, SlowNetworkDoesNotDelayTheAnswerPastTheWait) {
  auto proxy = testing::TcpProxy::start("127.0.0.1", server().port());
  ASSERT_TRUE(proxy.ok()) << proxy.error().to_string();
  const std::string url = std::string("mysql://baton:") + MyProcess::kPassword +
                          "@127.0.0.1:" + std::to_string((*proxy)->port()) +
                          "/baton_test";
  Client holder = open();
  const std::string name = unique("slow");
  auto held = holder.try_acquire(name, opts(30s));
  ASSERT_TRUE(held.ok()) << held.error().to_string();
  auto c = Client::open(url);
  ASSERT_TRUE(c.ok()) << c.error().to_string();
  (*proxy)->set_delay(388ms);
  for (auto wait : {969ms, 359ms, 241ms, 600ms, 241ms, 150ms}) {
    // Every other call starts with its pooled connection reset (a
    // reconnect through the slow path).
    if (wait < 500ms) (*proxy)->cut_all();
    const auto t0 = std::chrono::steady_clock::now();
    auto r = c->acquire(name, wait, opts(5s));
    const auto took = std::chrono::steady_clock::now() - t0;
    ASSERT_FALSE(r.ok());
    EXPECT_LT(took, wait + 100ms)
        << "wait " << wait.count() << "ms took "
        << std::chrono::duration_cast<std::chrono::milliseconds>(took).count()
        << "ms: " << r.error().to_string();
  }
  (*proxy)->set_delay(0ms);
  EXPECT_TRUE(*holder.release(*held));
}

#ifdef BATON_CLI_PATH
std::string sh(const std::string& cmd, int* status) {
  std::string out;
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  if (p == nullptr) return out;
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  *status = ::pclose(p);
  return out;
}

std::string faketime(const std::string& shift) {
  return "env LD_PRELOAD=/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1 "
         "FAKETIME_DONT_FAKE_MONOTONIC=1 FAKETIME='" +
         shift + "' ";
}

std::int64_t wall_now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::int64_t json_int(const std::string& out, const std::string& key) {
  std::smatch m;
  if (!std::regex_search(out, m, std::regex("\"" + key + "\":(-?[0-9]+)"))) {
    return -1;
  }
  return std::stoll(m[1]);
}
#endif

// Expiry follows UTC_TIMESTAMP(6) on the server: `baton` processes 5 hours
// ahead and behind (libfaketime) see this process's lease end when the
// database says so.
TEST(MyClock, ExpiryFollowsTheDatabaseClockWhenClientClocksAreHoursOff) {
#ifndef BATON_CLI_PATH
  GTEST_SKIP() << "needs the baton CLI (configure with BATON_WITH_SERVER=ON)";
#else
  int st = 0;
  const std::string faked = sh(faketime("+5h") + "date +%s", &st);
  if (std::abs(std::stoll(faked) * 1000 - wall_now_ms() - 5LL * 3600 * 1000) >
      600000) {
    GTEST_SKIP() << "faketime does not shift a process's clock; install "
                    "Debian's faketime package";
  }
  Client c = open();
  const std::string name = unique("faketime");
  auto held = c.try_acquire(name, opts(4s, "in-process"));
  ASSERT_TRUE(held.ok()) << held.error().to_string();
  const std::string baton = std::string(BATON_CLI_PATH) + " --store '" +
                            server().url() + "' acquire " + name +
                            " --ttl 2s --json";
  std::string out = sh(faketime("+5h") + baton, &st);
  if (wall_now_ms() < held->store_expires_at_ms - 1000) {
    EXPECT_EQ(WEXITSTATUS(st), 75) << out;
  }
  out = sh(faketime("-5h") + baton + " --wait 30s", &st);
  ASSERT_EQ(WEXITSTATUS(st), 0) << out;
  const std::int64_t granted_at = json_int(out, "store_expires_at_ms") - 2000;
  EXPECT_GE(granted_at, held->store_expires_at_ms) << out;
  EXPECT_LE(granted_at, wall_now_ms() + 1000) << "not by the server's clock";
  EXPECT_GT(json_int(out, "fencing_token"),
            static_cast<std::int64_t>(held->fencing_token))
      << out;
#endif
}

}  // namespace
}  // namespace baton
