// tests/cli/supervision_stores_test.cc — supervision on every store: no command
// run by `baton run` may outlive its lease, whatever the store does.
//
// For each store (batond, PostgreSQL, Redis) and fault kind, a holder runs
// `baton run <lock> --ttl 1500ms --grace 400ms -- <writer>`, where the writer
// appends a CLOCK_REALTIME timestamp (`date +%s%N`) to a file every 50 ms.
// Then the fault:
//
//   cut           the holder reaches the store through the in-tree TCP proxy,
//                 which goes silent (blackhole); the next holder reaches the
//                 store directly and is already waiting.
//   freeze        the store is SIGSTOPped (PostgreSQL: its whole process
//                 group, postmaster and backends) for longer than the TTL,
//                 then SIGCONTed; the next holder is already waiting.
//   down_restart  the store is killed (SIGKILL; PostgreSQL: pg_ctl stop -m
//                 immediate), stays down longer than the TTL, and is started
//                 again on the same port and data dir; then the next holder
//                 asks. (Redis runs without persistence and forgets the lease,
//                 so the next holder gets it at once: the holder must have
//                 stopped by its own deadline while the store was down.)
//   down          the store is killed and stays down: nobody can be granted
//                 the lock, so the holder's command must be gone by its local
//                 safe deadline, at most TTL after the fault (the last renewal
//                 that succeeded was sent before it).
//
// Each test asserts, on the one clock both commands write: the holder's last
// write comes before the next holder's first write (or, for `down`, before
// fault + TTL); and baton exits 76 within moments of its command being
// gone. The batond cut and freeze cases are in supervision_test.cc.
//
// Each server is started once per binary (on first use) and restarted by
// the tests that kill it. Loopback only; every wait is bounded.
#include <gtest/gtest.h>
#include <signal.h>
#include <time.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "eventually.h"
#include "pg_server.h"
#include "process.h"
#include "tcp_proxy.h"

namespace baton::testing {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr std::int64_t kMs = 1'000'000;  // ns
constexpr std::chrono::milliseconds kTtl = 1500ms;
constexpr const char* kTtlFlag = "1500ms";
constexpr const char* kGraceFlag = "400ms";

// BATON_TEST_CLI overrides the baton under test (e.g. a scratch build with
// the deadline rule disabled, to see these tests fail).
std::string cli() {
  const char* env = std::getenv("BATON_TEST_CLI");
  return env != nullptr && *env != '\0' ? env : BATON_CLI_PATH;
}

// ---------------------------------------------------------------------------
// The stores, each one process tree the tests can freeze, kill and restart.

class StoreServer {
 public:
  virtual ~StoreServer() = default;
  virtual int port() const = 0;
  // The store URL for a server (or proxy) on 127.0.0.1:port.
  virtual std::string url(int port) const = 0;
  virtual void freeze() = 0;  // SIGSTOP
  virtual void thaw() = 0;    // SIGCONT
  virtual void crash() = 0;   // down at once, no clean shutdown
  virtual void start() = 0;   // (again) on the same port and data dir
  virtual bool up() = 0;
};

// Argument prefix so that a server never outlives the test binary.
std::vector<std::string> die_with_parent(std::vector<std::string> argv) {
  if (std::filesystem::exists("/usr/bin/setpriv")) {
    argv.insert(argv.begin(), {"/usr/bin/setpriv", "--pdeathsig", "KILL"});
  }
  return argv;
}

// batond or redis-server as a child Process.
class ChildServer : public StoreServer {
 public:
  ~ChildServer() override {
    if (process_) process_->signal(SIGCONT);
    process_.reset();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  int port() const override { return port_; }
  void freeze() override { process_->signal(SIGSTOP); }
  void thaw() override { process_->signal(SIGCONT); }
  void crash() override {
    if (!process_) return;
    process_->signal(SIGCONT);
    process_->signal(SIGKILL);
    process_->wait(5s);
    process_.reset();
  }
  void start() override {
    process_ = std::make_unique<Process>(die_with_parent(argv()));
    if (!wait_for_port(port_, 10s)) {
      throw std::runtime_error("server on port " + std::to_string(port_) +
                               " did not start: " + process_->err());
    }
  }
  bool up() override {
    return process_ && process_->running() && wait_for_port(port_, 2s);
  }

 protected:
  virtual std::vector<std::string> argv() const = 0;
  std::string dir_ = make_temp_dir();
  int port_ = free_port();
  std::unique_ptr<Process> process_;
};

class BatondServer : public ChildServer {
 public:
  BatondServer() { start(); }
  std::string url(int port) const override {
    return "baton://127.0.0.1:" + std::to_string(port);
  }

 private:
  std::vector<std::string> argv() const override {
    return {BATOND_PATH, "--listen", "127.0.0.1:" + std::to_string(port_),
            "--data-dir", dir_ + "/data"};
  }
};

// No persistence: a restart forgets every lease.
class RedisServer : public ChildServer {
 public:
  RedisServer() { start(); }
  std::string url(int port) const override {
    return "redis://127.0.0.1:" + std::to_string(port);
  }

 private:
  std::vector<std::string> argv() const override {
    return {"/usr/bin/redis-server",
            "--port",
            std::to_string(port_),
            "--bind",
            "127.0.0.1",
            "--dir",
            dir_,
            "--save",
            "",
            "--appendonly",
            "no",
            "--logfile",
            dir_ + "/redis.log"};
  }
};

class PostgresServer : public StoreServer {
 public:
  int port() const override { return pg_.port(); }
  std::string url(int port) const override {
    return "postgres://postgres@127.0.0.1:" + std::to_string(port) +
           "/postgres";
  }
  void freeze() override { pg_.signal_server(SIGSTOP); }
  void thaw() override { pg_.signal_server(SIGCONT); }
  void crash() override { pg_.stop_immediate(); }
  void start() override { pg_.start(); }
  bool up() override { return pg_.running() && wait_for_port(port(), 2s); }

 private:
  PgServer pg_;
};

enum class Store { batond, postgres, redis };
enum class Fault { cut, freeze, down_restart, down };

const char* name_of(Store s) {
  switch (s) {
    case Store::batond:
      return "Batond";
    case Store::postgres:
      return "Postgres";
    case Store::redis:
      return "Redis";
  }
  return "?";
}

const char* name_of(Fault f) {
  switch (f) {
    case Fault::cut:
      return "Cut";
    case Fault::freeze:
      return "Freeze";
    case Fault::down_restart:
      return "DownRestart";
    case Fault::down:
      return "Down";
  }
  return "?";
}

// One server per store and binary, started on first use, stopped at exit.
StoreServer& server(Store s) {
  static std::unique_ptr<StoreServer> servers[3];
  auto& slot = servers[static_cast<int>(s)];
  if (!slot) {
    switch (s) {
      case Store::batond:
        slot = std::make_unique<BatondServer>();
        break;
      case Store::postgres:
        slot = std::make_unique<PostgresServer>();
        break;
      case Store::redis:
        slot = std::make_unique<RedisServer>();
        break;
    }
  }
  return *slot;
}

struct Case {
  Store store;
  Fault fault;
};

std::string case_name(const Case& c) {
  return std::string(name_of(c.store)) + name_of(c.fault);
}

class StoreFault : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override { dir_ = make_temp_dir(); }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  std::string file(const std::string& name) const { return dir_ + "/" + name; }
  std::string dir_;
};

TEST_P(StoreFault, CommandIsGoneBeforeTheLockCanBeGrantedAgain) {
  const Case c = GetParam();
  const std::string name = case_name(c);
  StoreServer* srv = nullptr;
  try {
    srv = &server(c.store);
  } catch (const std::exception& e) {
    FAIL() << name_of(c.store) << " did not start: " << e.what();
  }
  ASSERT_TRUE(srv->up()) << name_of(c.store) << " is not up";
  const std::string lock = "supervision/" + name;
  const std::string direct = srv->url(srv->port());

  std::unique_ptr<TcpProxy> proxy;
  std::string holder_url = direct;
  if (c.fault == Fault::cut) {
    auto p =
        TcpProxy::start("127.0.0.1", static_cast<std::uint16_t>(srv->port()));
    ASSERT_TRUE(p.ok()) << p.error().to_string();
    proxy = std::move(*p);
    holder_url = srv->url(proxy->port());
  }

  Process holder({cli(), "--store", holder_url, "run", lock, "--ttl", kTtlFlag,
                  "--grace", kGraceFlag, "--", "sh", "-c",
                  ticker_script(file("holder"), file("term"))});
  // Past the first renewal (every TTL/3), so that the fault finds a
  // deadline that a renewal moved.
  ASSERT_TRUE(eventually(
      [&] {
        const auto t = timestamps(file("holder"));
        return t.size() >= 3 && realtime_ns() - t.front() >= 700 * kMs;
      },
      10s))
      << holder.err();

  // The next holder reaches the store directly and writes once.
  std::unique_ptr<Process> next;
  auto start_next = [&] {
    next = std::make_unique<Process>(std::vector<std::string>{
        cli(), "--store", direct, "run", lock, "--wait", "20s", "--", "sh",
        "-c", "date +%s%N >> '" + file("next") + "'"});
  };
  if (c.fault == Fault::cut || c.fault == Fault::freeze) {
    start_next();  // queued before the fault
    std::this_thread::sleep_for(200ms);
    ASSERT_TRUE(next->running()) << "granted while held: " << next->err();
  }

  // The fault; it ends (if it does) no earlier than TTL + 200 ms after it
  // began, and never later than the end of this scope.
  const std::int64_t fault = realtime_ns();
  const std::int64_t ttl_ns = kTtl.count() * kMs;
  bool ended = false;
  auto end_fault = [&] {
    if (ended) return;
    ended = true;
    switch (c.fault) {
      case Fault::cut:
        proxy->set_mode(TcpProxy::Mode::pass);
        break;
      case Fault::freeze:
        srv->thaw();
        break;
      case Fault::down_restart:
      case Fault::down:
        srv->start();
        break;
    }
  };
  Defer always_end([&] { end_fault(); });
  switch (c.fault) {
    case Fault::cut:
      proxy->set_mode(TcpProxy::Mode::blackhole);
      break;
    case Fault::freeze:
      srv->freeze();
      break;
    case Fault::down_restart:
    case Fault::down:
      srv->crash();
      break;
  }

  std::optional<std::int64_t> exited;
  if (eventually([&] { return !holder.running(); }, kTtl + 1s)) {
    exited = realtime_ns();
  }
  if (c.fault != Fault::down) {
    sleep_until_realtime(fault + ttl_ns + 200 * kMs);
    if (c.fault != Fault::cut) end_fault();  // the cut stays until the end
  }
  ASSERT_TRUE(exited) << "baton run still runs TTL + 1s after the fault: "
                      << holder.err();
  auto held = holder.wait(1s);
  EXPECT_EQ(held.exit_code, 76) << held.err;
  EXPECT_NE(held.err.find("baton: lock_lost: lease on " + lock),
            std::string::npos)
      << held.err;

  const auto last = timestamps(file("holder"));
  ASSERT_FALSE(last.empty());
  // Gone by the local safe deadline: the last renewal that succeeded was
  // sent before the fault, so the deadline is at most fault + TTL.
  EXPECT_LT(last.back(), fault + ttl_ns)
      << "the holder wrote " << (last.back() - fault - ttl_ns) / 1000
      << " us after fault + TTL";
  // SIGTERM came --grace (400 ms) before that deadline: the trap wrote its
  // timestamp (unless the machine was so slow that SIGKILL at the deadline
  // came first). baton exits as soon as the command is gone; the bounds
  // leave room for a loaded machine (the ordering above needs none).
  const auto term = timestamps(file("term"));
  EXPECT_LE(term.size(), 1u);
  const std::int64_t gone = term.empty() ? last.back() : term[0];
  EXPECT_LT(gone, fault + ttl_ns);
  EXPECT_LT(*exited - gone, 1000 * kMs)
      << "baton exited " << (*exited - gone) / kMs
      << " ms after the command's last sign of life";
  EXPECT_LT(*exited, fault + ttl_ns + 1000 * kMs);
  std::printf(
      "[ margins  ] %s: last write at fault+%lld ms, SIGTERM %s at "
      "fault+%lld ms (deadline <= fault+%lld ms), baton exit %lld ms "
      "after it\n",
      name.c_str(), static_cast<long long>((last.back() - fault) / kMs),
      term.empty() ? "not seen, last write" : "trapped",
      static_cast<long long>((gone - fault) / kMs),
      static_cast<long long>(kTtl.count()),
      static_cast<long long>((*exited - gone) / kMs));

  if (c.fault == Fault::down) {
    std::this_thread::sleep_for(150ms);
    EXPECT_EQ(timestamps(file("holder")).size(), last.size())
        << "the command still writes after baton exited";
    RecordProperty("deadline_margin_ms",
                   std::to_string((fault + ttl_ns - last.back()) / kMs));
    return;  // the Defer restarts the store
  }

  if (c.fault == Fault::down_restart) {
    ASSERT_TRUE(srv->up());
    start_next();
  }
  auto second = next->wait(20s);
  EXPECT_EQ(second.exit_code, 0) << second.err;
  const auto first = timestamps(file("next"));
  ASSERT_FALSE(first.empty()) << second.err;
  EXPECT_LT(last.back(), first.front())
      << "the cut-off holder wrote " << (last.back() - first.front()) / 1000
      << " us after the next holder's first write";
  EXPECT_EQ(timestamps(file("holder")).size(), last.size())
      << "the command still writes after baton exited";
  std::printf(
      "[ margins  ] %s: next holder's first write %lld ms after the "
      "holder's last (at fault+%lld ms)\n",
      name.c_str(), static_cast<long long>((first.front() - last.back()) / kMs),
      static_cast<long long>((first.front() - fault) / kMs));
  RecordProperty("overlap_margin_ms",
                 std::to_string((first.front() - last.back()) / kMs));
}

// SIGINT or SIGTERM to `baton run` while it waits for the lock
// withdraws its request before baton exits (128 + signal): the queue is
// empty at once, not only when a waiter's own deadline or heartbeat ends
// it, and the lock is not granted to the gone waiter later.
class SignalWhileWaiting : public ::testing::TestWithParam<Store> {};

TEST_P(SignalWhileWaiting, WithdrawsTheRequestBeforeExiting) {
  StoreServer* srv = &server(GetParam());
  ASSERT_TRUE(srv->up());
  const std::string url = srv->url(srv->port());
  for (int sig : {SIGINT, SIGTERM}) {
    const std::string lock = std::string("sigwait-") + name_of(GetParam()) +
                             "-" + std::to_string(sig) + "-" +
                             std::to_string(realtime_ns());
    Process holder({cli(), "--store", url, "run", lock, "--ttl", "20s", "--",
                    "sleep", "30"});
    ASSERT_TRUE(eventually(
        [&] {
          auto st = run({cli(), "--store", url, "status", lock, "--json"});
          return st.out.find("\"holders\":[{") != std::string::npos;
        },
        10s))
        << "the holder never got the lock";
    Process waiter({cli(), "--store", url, "run", lock, "--ttl", "20s",
                    "--wait", "60s", "--", "true"});
    auto waiters = [&] {
      auto st = run({cli(), "--store", url, "status", lock, "--json"});
      return st.out.find("\"waiters\":[]") == std::string::npos &&
             st.out.find("\"waiters\":[{") != std::string::npos;
    };
    ASSERT_TRUE(eventually(waiters, 10s)) << "the waiter never queued";
    waiter.signal(sig);
    auto done = waiter.wait(10s);
    EXPECT_EQ(done.exit_code, 128 + sig) << done.err;
    // Withdrawn before baton exited: nobody waits now.
    EXPECT_FALSE(waiters()) << "the request outlived baton";
    holder.signal(SIGTERM);
    (void)holder.wait(10s);
  }
}

INSTANTIATE_TEST_SUITE_P(Stores, SignalWhileWaiting,
                         ::testing::Values(Store::batond, Store::postgres,
                                           Store::redis),
                         [](const ::testing::TestParamInfo<Store>& p) {
                           return std::string(name_of(p.param));
                         });

// batond's cut and freeze are in supervision_test.cc. PostgreSQL's freeze
// stops its whole process group (postmaster and backends).
INSTANTIATE_TEST_SUITE_P(
    Matrix, StoreFault,
    ::testing::Values(Case{Store::batond, Fault::down_restart},
                      Case{Store::batond, Fault::down},
                      Case{Store::postgres, Fault::cut},
                      Case{Store::postgres, Fault::freeze},
                      Case{Store::postgres, Fault::down_restart},
                      Case{Store::postgres, Fault::down},
                      Case{Store::redis, Fault::cut},
                      Case{Store::redis, Fault::freeze},
                      Case{Store::redis, Fault::down_restart},
                      Case{Store::redis, Fault::down}),
    [](const ::testing::TestParamInfo<Case>& param) {
      return case_name(param.param);
    });

}  // namespace
}  // namespace baton::testing
