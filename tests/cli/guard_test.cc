// tests/cli/guard_test.cc — the guard enforces the lease's deadline by
// itself: a `baton run` / `baton elect` that is frozen (SIGSTOP of its pid
// only, its command running on) cannot keep the command alive beside the
// next holder; a starved baton whose renewals still succeed does not get
// its command killed; plus --hold-at-least (at most once per window),
// --max-runtime, `baton leader` and --version. The scenarios run on
// sqlite:// and a private server (or cluster) of every other store kind
// (guard_stores.h), one kind after the other.
//
// The commands write CLOCK_REALTIME timestamps (`date +%s%N`, one clock for
// every process) to files every 50 ms; the freeze tests judge on that
// clock and print their evidence per store ("[ evidence ]" lines): the
// lease's expiry bound (freeze + TTL: the last renewal was sent before the
// freeze), the frozen holder's last tick and the next holder's first tick,
// in ms after the freeze. Every wait is bounded; servers start once per
// binary.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "eventually.h"
#include "guard_stores.h"
#include "process.h"

namespace baton::testing {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr std::int64_t kMs = 1'000'000;  // ns
constexpr std::int64_t kTtlNs = 2000 * kMs;
// A tick may be written this long after the expiry bound: the SIGKILL goes
// 10 ms before the local safe deadline, which is itself the drift
// allowance (22 ms at 2 s) before the bound; this is for the guard being
// scheduled late on a loaded machine.
constexpr std::int64_t kSlackNs = 20 * kMs;

// BATON_TEST_CLI overrides the baton under test (e.g. one built before the
// guard enforced the deadline, to see the freeze tests fail).
std::string cli() {
  const char* env = std::getenv("BATON_TEST_CLI");
  return env != nullptr && *env != '\0' ? env : BATON_CLI_PATH;
}
const std::string kBaton = cli();

// A lock name no other test of this binary uses (servers are shared).
std::string unique_name(const std::string& what) {
  static int n = 0;
  return "guard-" + what + "-" + std::to_string(realtime_ns() / kMs) + "-" +
         std::to_string(++n);
}

long long ms_after(std::int64_t t, std::int64_t origin) {
  return static_cast<long long>((t - origin) / kMs);
}

// The scenarios on one store kind (GUARD_SCENARIOS below makes one test
// suite per kind, so that each store's tests run together and its servers
// are stopped after them).
class GuardTest : public ::testing::Test {
 protected:
  virtual std::string kind() const = 0;
  void SetUp() override {
    dir_ = make_temp_dir();
    std::string error;
    store_ = store_under_test(kind(), &error);
    if (store_ == nullptr) GTEST_FAIL() << kind() << ": " << error;
  }
  // The scenarios.
  void freeze_only_baton(const std::string& verb);
  void starve_baton();
  void hold_at_least();
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  std::string file(const std::string& name) const { return dir_ + "/" + name; }
  std::vector<std::string> baton(std::vector<std::string> rest) const {
    rest.insert(rest.begin(), {kBaton, "--store", store_->url});
    return rest;
  }
  // The holders' labels of `lock`, from `baton status --json`.
  std::string holders(const std::string& lock) const {
    auto r = run(baton({"status", lock, "--json"}), {}, 15s);
    const auto at = r.out.find("\"holders\":");
    const auto end = r.out.find("\"waiters\":");
    if (at == std::string::npos || end == std::string::npos) return r.err;
    return r.out.substr(at, end - at);
  }

  std::string dir_;
  const StoreUnderTest* store_ = nullptr;
};

// Only the holder's baton is stopped (SIGSTOP of its pid) while its command
// ticks; the next holder is already waiting. The command must be gone by
// the lease's expiry bound and before the next holder's command starts;
// the resumed baton reports it, exits 76 and touches nothing.
void GuardTest::freeze_only_baton(const std::string& verb) {
  const bool elect = verb == "elect";
  const std::string lock = unique_name(verb + "-freeze");
  Process holder(
      baton({"--label", "frozen", verb, lock, "--ttl", "2s", "--grace", "500ms",
             "--", "sh", "-c", ticker_script(file("a"), file("a.term"))}));
  // Past the first renewal (every TTL/3).
  ASSERT_TRUE(eventually(
      [&] {
        const auto t = timestamps(file("a"));
        return t.size() >= 3 && realtime_ns() - t.front() >= 800 * kMs;
      },
      20s))
      << holder.err();
  std::vector<std::string> next_args = {"--label", "next",  verb,
                                        lock,      "--ttl", "2s"};
  if (!elect) next_args.insert(next_args.end(), {"--wait", "30s"});
  next_args.insert(next_args.end(), {"--", "sh", "-c",
                                     ticker_script(file("b"), file("b.term"))});
  Process next(baton(next_args));
  Defer stop_next([&] {
    next.signal(SIGTERM);
    next.wait(10s);
  });
  std::this_thread::sleep_for(300ms);  // it queues / campaigns
  ASSERT_TRUE(next.running()) << next.err();
  ASSERT_TRUE(timestamps(file("b")).empty()) << "granted while held";

  const pid_t pid = holder.pid();
  kill(pid, SIGSTOP);
  const std::int64_t freeze = realtime_ns();
  Defer resume([&] { kill(pid, SIGCONT); });
  ASSERT_TRUE(eventually([&] { return !timestamps(file("b")).empty(); }, 20s))
      << "the next holder never started: " << next.err();
  const std::int64_t first_next = timestamps(file("b")).front();
  const std::int64_t bound = freeze + kTtlNs;
  // Resumed only after the bound: a command still running would tick past
  // it.
  sleep_until_realtime(std::max(first_next, bound) + 300 * kMs);
  const std::size_t ticks = timestamps(file("a")).size();
  kill(pid, SIGCONT);
  const std::int64_t resumed = realtime_ns();
  auto r = holder.wait(10s);
  EXPECT_EQ(r.exit_code, 76) << r.err;
  EXPECT_THAT(r.err,
              HasSubstr(std::string("baton: lock_lost: ") +
                        (elect ? "leadership of " : "lease on ") + lock));
  EXPECT_THAT(r.err, HasSubstr("while baton was not running"));

  const auto a = timestamps(file("a"));
  ASSERT_FALSE(a.empty());
  EXPECT_LE(a.back(), bound + kSlackNs)
      << "the frozen holder's command ticked " << ms_after(a.back(), bound)
      << " ms after the expiry bound";
  EXPECT_LT(a.back(), first_next)
      << "the frozen holder's command ticked " << ms_after(a.back(), first_next)
      << " ms after the next holder's command started";
  // SIGTERM came first, --grace before the deadline: the guard reported it
  // (above); the trap wrote at most once (not at all when the machine was
  // so slow that SIGKILL came before the shell ran it).
  EXPECT_LE(timestamps(file("a.term")).size(), 1u);
  // The resumed baton touched nothing: the old command stays gone, the
  // next one runs on and still holds the lock.
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(timestamps(file("a")).size(), ticks);
  EXPECT_EQ(a.size(), ticks);
  EXPECT_TRUE(next.running()) << next.err();
  EXPECT_GT(timestamps(file("b")).back(), resumed)
      << "the next holder's command stopped ticking";
  EXPECT_TRUE(timestamps(file("b.term")).empty());
  EXPECT_THAT(holders(lock), HasSubstr("\"label\":\"next\""));
  std::printf(
      "[ evidence ] %s %s: freeze at 0; expiry bound +%lld ms; last tick of "
      "the frozen holder's command +%lld ms (SIGTERM +%lld ms); next "
      "holder's first tick +%lld ms; resumed baton exit %d\n",
      store_->name.c_str(), verb.c_str(), ms_after(bound, freeze),
      ms_after(a.back(), freeze),
      ms_after(timestamps(file("a.term")).empty()
                   ? a.back()
                   : timestamps(file("a.term")).front(),
               freeze),
      ms_after(first_next, freeze), r.exit_code);
}

// baton is starved (stopped for 200 ms, run for 100 ms, for 3.5 s) while
// its renewals still succeed: each one hands the guard a later deadline,
// so the command is not stopped.
void GuardTest::starve_baton() {
  const std::string lock = unique_name("starve");
  Process holder(baton({"--label", "starved", "run", lock, "--ttl", "2s",
                        "--grace", "500ms", "--", "sh", "-c",
                        ticker_script(file("a"), file("a.term"))}));
  ASSERT_TRUE(
      eventually([&] { return timestamps(file("a")).size() >= 3; }, 20s))
      << holder.err();
  const std::int64_t start = realtime_ns();
  int bursts = 0;
  while (realtime_ns() - start < 3500 * kMs) {
    holder.signal(SIGSTOP);
    std::this_thread::sleep_for(200ms);
    holder.signal(SIGCONT);
    std::this_thread::sleep_for(100ms);
    ++bursts;
  }
  const std::size_t ticks = timestamps(file("a")).size();
  std::this_thread::sleep_for(300ms);
  EXPECT_TRUE(holder.running()) << holder.err();
  EXPECT_TRUE(timestamps(file("a.term")).empty())
      << "SIGTERM while renewals succeeded: " << holder.err();
  EXPECT_GT(timestamps(file("a")).size(), ticks) << "the command stopped";
  EXPECT_THAT(holders(lock), HasSubstr("\"label\":\"starved\""));
  holder.signal(SIGTERM);
  auto r = holder.wait(10s);
  EXPECT_EQ(r.exit_code, 143) << r.err;
  EXPECT_THAT(r.err, ::testing::Not(HasSubstr("lock_lost"))) << r.err;
  std::printf(
      "[ evidence ] %s starve: %d stops of 200 ms within %lld ms (TTL 2 s, "
      "--grace 500ms: SIGTERM due 1478 ms after a renewal's send); command "
      "not signalled\n",
      store_->name.c_str(), bursts, ms_after(realtime_ns(), start));
}

// Two "hosts" started at once with --hold-at-least: exactly one runs; one
// started later in the window is refused naming the holder; one started
// after the window runs.
void GuardTest::hold_at_least() {
  const std::string lock = unique_name("hold");
  auto host = [&](const std::string& label) {
    return std::make_unique<Process>(
        baton({"--label", label, "run", lock, "--ttl", "2s", "--hold-at-least",
               "3s", "--", "sh", "-c", "date +%s%N >> '" + file("ran") + "'"}));
  };
  auto a = host("host-a");
  auto b = host("host-b");
  // The refused one exits at once; the winner too, unless the store cannot
  // keep a lease without its client (zookeeper://): then it stays to the
  // end of the window.
  ASSERT_TRUE(eventually(
      [&] {
        return timestamps(file("ran")).size() == 1 &&
               (!a->running() || !b->running());
      },
      15s))
      << a->err() << b->err();
  const std::int64_t first = timestamps(file("ran"))[0];

  sleep_until_realtime(first + 1000 * kMs);
  auto c = run(baton({"--label", "host-c", "run", lock, "--", "sh", "-c",
                      "date +%s%N >> '" + file("ran") + "'"}));
  EXPECT_EQ(c.exit_code, 75) << c.err;
  EXPECT_THAT(c.err, HasSubstr("left)"));
  EXPECT_EQ(timestamps(file("ran")).size(), 1u);

  // After the window: it runs, at once where the store ends the lease on
  // time, a little later where it rounds (etcd: whole-second leases,
  // revoked by a periodic sweep), never inside the window.
  sleep_until_realtime(first + 3000 * kMs);
  auto d = run(baton({"--label", "host-d", "run", lock, "--wait", "5s", "--",
                      "sh", "-c", "date +%s%N >> '" + file("ran") + "'"}));
  EXPECT_EQ(d.exit_code, 0) << d.err;
  const auto ran = timestamps(file("ran"));
  ASSERT_EQ(ran.size(), 2u);
  EXPECT_GE(ran[1], first + 3000 * kMs) << "ran again inside the window";
  auto ra = a->wait(5s);
  auto rb = b->wait(5s);
  const bool a_ran = ra.exit_code == 0;
  EXPECT_NE(ra.exit_code == 0, rb.exit_code == 0)
      << "a: " << ra.exit_code << " " << ra.err << "\nb: " << rb.exit_code
      << " " << rb.err;
  const ProcessResult& refused = a_ran ? rb : ra;
  EXPECT_EQ(refused.exit_code, 75) << refused.err;
  EXPECT_THAT(refused.err,
              HasSubstr(a_ran ? "held by host-a" : "held by host-b"));
  std::printf(
      "[ evidence ] %s hold-at-least 3s: one of two runs started together; "
      "refused at +1000 ms; a run waiting from +3000 ms ran at +%lld ms\n",
      store_->name.c_str(), ms_after(ran[1], first));
}

// One suite per store kind; its servers stop after its last test.
#define GUARD_SCENARIOS(Suite, kind_name)                                     \
  class Suite : public GuardTest {                                            \
   protected:                                                                 \
    std::string kind() const override { return kind_name; }                   \
    static void TearDownTestSuite() { stop_store_under_test(kind_name); }     \
  };                                                                          \
  TEST_F(Suite, FrozenRunCannotOutliveItsLease) { freeze_only_baton("run"); } \
  TEST_F(Suite, FrozenElectCannotOutliveItsTerm) {                            \
    freeze_only_baton("elect");                                               \
  }                                                                           \
  TEST_F(Suite, StarvedBatonWhoseRenewalsSucceedKeepsItsCommand) {            \
    starve_baton();                                                           \
  }                                                                           \
  TEST_F(Suite, HoldAtLeastRunsOncePerWindow) { hold_at_least(); }

GUARD_SCENARIOS(GuardSqlite, "sqlite")
GUARD_SCENARIOS(GuardBatond, "batond")
GUARD_SCENARIOS(GuardPostgres, "postgres")
GUARD_SCENARIOS(GuardMysql, "mysql")
GUARD_SCENARIOS(GuardRedis, "redis")
GUARD_SCENARIOS(GuardZookeeper, "zookeeper")
GUARD_SCENARIOS(GuardEtcd, "etcd")

// ---------------------------------------------------------------------------
// Store-independent: one store is enough.

class GuardLocalTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = make_temp_dir(); }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  std::string dir_;
};

// The children of `pid` (its main thread's: baton forks the guard there).
std::vector<pid_t> children_of(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/task/" +
                   std::to_string(pid) + "/children");
  std::vector<pid_t> out;
  for (pid_t child; in >> child;) out.push_back(child);
  return out;
}

// The guard and the store are stopped, baton is not: at the deadline baton
// SIGKILLs its guard, and the command dies with it, before the next holder
// is granted the lock.
TEST_F(GuardLocalTest, StoppedGuardIsKilledByBatonAtTheDeadline) {
  std::string error;
  const StoreUnderTest* store = store_under_test("batond", &error);
  ASSERT_NE(store, nullptr) << error;
  const std::string lock = unique_name("guard-stop");
  const std::string a = dir_ + "/a", b = dir_ + "/b";
  Process holder({kBaton, "--store", store->url, "run", lock, "--ttl", "2s",
                  "--grace", "500ms", "--", "sh", "-c",
                  ticker_script(a, dir_ + "/a.term")});
  ASSERT_TRUE(eventually([&] { return timestamps(a).size() >= 3; }, 20s))
      << holder.err();
  const auto guards = children_of(holder.pid());
  ASSERT_EQ(guards.size(), 1u);
  Process next({kBaton, "--store", store->url, "run", lock, "--wait", "30s",
                "--", "sh", "-c", ticker_script(b, dir_ + "/b.term")});
  Defer stop_next([&] {
    next.signal(SIGTERM);
    next.wait(10s);
  });
  std::this_thread::sleep_for(300ms);
  kill(guards[0], SIGSTOP);
  ASSERT_TRUE(store->cluster->freeze(true, &error)) << error;
  const std::int64_t freeze = realtime_ns();
  Defer resume([&] { store->cluster->freeze(false, &error); });
  const std::int64_t bound = freeze + kTtlNs;
  sleep_until_realtime(bound + 300 * kMs);
  ASSERT_TRUE(store->cluster->freeze(false, &error)) << error;
  auto r = holder.wait(10s);
  EXPECT_EQ(r.exit_code, 76) << r.err;
  EXPECT_THAT(r.err, HasSubstr("guard did not stop it by the local safe "
                               "deadline"));
  ASSERT_TRUE(eventually([&] { return !timestamps(b).empty(); }, 20s))
      << next.err();
  const auto ta = timestamps(a);
  EXPECT_LE(ta.back(), bound + kSlackNs)
      << ms_after(ta.back(), bound) << " ms after the expiry bound";
  EXPECT_LT(ta.back(), timestamps(b).front());
  EXPECT_TRUE(timestamps(dir_ + "/a.term").empty());  // the guard was stopped
  std::printf(
      "[ evidence ] batond guard stopped (with the store): expiry bound +%lld "
      "ms; last tick +%lld ms; next holder's first tick +%lld ms\n",
      ms_after(bound, freeze), ms_after(ta.back(), freeze),
      ms_after(timestamps(b).front(), freeze));
}

// Stopping baton's whole process group (kill -STOP -PGID) does not stop
// the guard, which is in a group of its own.
TEST_F(GuardLocalTest, StoppingBatonsProcessGroupDoesNotStopTheGuard) {
  const std::string ticks = dir_ + "/ticks";
  // setsid(1) runs baton in a session and process group of its own (the
  // test's group must not be stopped).
  Process holder({"setsid", kBaton, "--store", "sqlite://" + dir_ + "/db",
                  "run", "m", "--ttl", "1500ms", "--grace", "400ms", "--", "sh",
                  "-c", ticker_script(ticks, dir_ + "/term")});
  ASSERT_TRUE(eventually([&] { return timestamps(ticks).size() >= 3; }, 20s))
      << holder.err();
  kill(-holder.pid(), SIGSTOP);
  const std::int64_t freeze = realtime_ns();
  Defer resume([&] { kill(-holder.pid(), SIGCONT); });
  std::this_thread::sleep_for(2000ms);
  const auto t = timestamps(ticks);
  EXPECT_LE(t.back(), freeze + 1500 * kMs + kSlackNs);
  EXPECT_LE(timestamps(dir_ + "/term").size(), 1u);
  kill(-holder.pid(), SIGCONT);
  auto r = holder.wait(10s);
  EXPECT_EQ(r.exit_code, 76) << r.err;
  EXPECT_THAT(r.err, HasSubstr("the guard sent SIGTERM to the command"));
}

TEST_F(GuardLocalTest, MaxRuntimeStopsTheCommandWithItsOwnExitStatus) {
  // A command that ignores SIGTERM gets SIGKILL --grace later.
  auto start = Clock::now();
  auto r = run({kBaton, "--store", "memory:", "run", "m", "--max-runtime",
                "300ms", "--grace", "200ms", "--", "sh", "-c",
                "trap '' TERM; while :; do sleep 0.05; done"},
               {}, 20s);
  auto took = Clock::now() - start;
  EXPECT_EQ(r.exit_code, 124) << r.err;
  EXPECT_THAT(r.err, HasSubstr("the command reached --max-runtime 300ms"));
  // SIGKILL --grace after the SIGTERM was due (a little less when the
  // guard woke late).
  EXPECT_TRUE(std::regex_search(
      r.err, std::regex("SIGKILL in (1[0-9][0-9]|200)ms \\(--grace\\)")))
      << r.err;
  EXPECT_GE(took, 500ms);
  EXPECT_LT(took, 5s);
  // One that stops on SIGTERM ends at once, with the same status.
  start = Clock::now();
  r = run(
      {kBaton, "--store", "memory:", "run", "m", "--max-runtime", "300ms", "--",
       "sh", "-c", "trap 'exit 0' TERM; while :; do sleep 0.05; done"},
      {}, 20s);
  took = Clock::now() - start;
  EXPECT_EQ(r.exit_code, 124) << r.err;
  EXPECT_GE(took, 300ms);
  EXPECT_LT(took, 3s);
  // A command that ends in time is not touched.
  r = run({kBaton, "--store", "memory:", "run", "m", "--max-runtime", "5s",
           "--", "sh", "-c", "exit 3"});
  EXPECT_EQ(r.exit_code, 3) << r.err;
  // Bad values are refused before anything runs.
  r = run({kBaton, "--store", "memory:", "run", "m", "--max-runtime", "10",
           "--", "true"});
  EXPECT_EQ(r.exit_code, 64);
  EXPECT_THAT(r.err, HasSubstr("--max-runtime: duration \"10\" has no unit"));
  r = run({kBaton, "--store", "memory:", "run", "m", "--hold-at-least", "8d",
           "--", "true"});
  EXPECT_EQ(r.exit_code, 64);
  EXPECT_THAT(r.err, HasSubstr("--hold-at-least 8d is out of range"));
}

// A command that runs longer than the window releases at its end.
TEST_F(GuardLocalTest, HoldAtLeastShorterThanTheRunReleasesAtTheEnd) {
  const std::string url = "sqlite://" + dir_ + "/db";
  auto r = run({kBaton, "--store", url, "run", "m", "--hold-at-least", "200ms",
                "--", "sleep", "0.5"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  r = run({kBaton, "--store", url, "run", "m", "--", "true"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

TEST_F(GuardLocalTest, VersionNamesTheCommitAndTheStores) {
  const std::regex commit("\ncommit ([0-9a-f]{40}(-dirty)?|unknown)\n");
  auto r = run({kBaton, "--version"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(
      std::regex_search(r.out, std::regex("^baton [0-9]+\\.[0-9]+\\.[0-9]+\n")))
      << r.out;
  EXPECT_TRUE(std::regex_search(r.out, commit)) << r.out;
  EXPECT_THAT(r.out, HasSubstr("\nstores: memory: "));
  EXPECT_THAT(r.out, HasSubstr(" sqlite://"));
#ifdef BATOND_PATH
  auto d = run({BATOND_PATH, "--version"});
  EXPECT_EQ(d.exit_code, 0) << d.err;
  EXPECT_TRUE(std::regex_search(
      d.out, std::regex("^batond [0-9]+\\.[0-9]+\\.[0-9]+\n")))
      << d.out;
  EXPECT_TRUE(std::regex_search(d.out, commit)) << d.out;
  EXPECT_THAT(d.out, HasSubstr("serves: baton://"));
#endif
}

// `baton leader`: once (text, JSON, none), and --watch until Ctrl-C.
TEST_F(GuardLocalTest, LeaderShowsTheLeaderAndWatchesChanges) {
  const std::string url = "sqlite://" + dir_ + "/db";
  auto leader = [&](std::vector<std::string> rest) {
    rest.insert(rest.begin(), {kBaton, "--store", url, "leader"});
    return run(rest);
  };
  auto r = leader({"g"});
  EXPECT_EQ(r.exit_code, 75);
  EXPECT_THAT(r.err, HasSubstr("no leader of g"));
  r = leader({"g", "--json"});
  EXPECT_EQ(r.exit_code, 75);
  EXPECT_EQ(r.out, "{\"group\":\"g\",\"leader\":null}\n");

  auto a = std::make_unique<Process>(std::vector<std::string>{
      kBaton, "--store", url, "--label", "leader-a", "elect", "g", "--ttl",
      "3s", "--", "sleep", "30"});
  ASSERT_TRUE(eventually([&] { return leader({"g"}).exit_code == 0; }, 15s))
      << a->err();
  r = leader({"g"});
  EXPECT_TRUE(std::regex_search(
      r.out, std::regex("^g: leader-a \\(term [0-9]+, [0-9.]+s left\\)\n$")))
      << r.out;
  r = leader({"g", "--json"});
  EXPECT_TRUE(std::regex_search(
      r.out, std::regex("^\\{\"group\":\"g\",\"leader\":\\{\"label\":"
                        "\"leader-a\",\"term\":[0-9]+,\"time_left_ms\":[0-9]+"
                        "\\}\\}\n$")))
      << r.out;

  Process watch({kBaton, "--store", url, "leader", "g", "--watch", "--interval",
                 "100ms"});
  ASSERT_TRUE(eventually(
      [&] { return watch.out().find("leader-a") != std::string::npos; }, 10s))
      << watch.err();
  Process b({kBaton, "--store", url, "--label", "leader-b", "elect", "g",
             "--ttl", "3s", "--", "sleep", "30"});
  std::this_thread::sleep_for(300ms);
  a->signal(SIGTERM);  // the command gets it, baton resigns
  EXPECT_EQ(a->wait(10s).exit_code, 143);
  ASSERT_TRUE(eventually(
      [&] { return watch.out().find("leader-b") != std::string::npos; }, 15s))
      << watch.out() << watch.err();
  watch.signal(SIGINT);
  auto w = watch.wait(5s);
  EXPECT_EQ(w.exit_code, 0) << w.err;
  // One line per change, each with the time.
  EXPECT_TRUE(std::regex_search(
      w.out, std::regex("^[0-9-]+T[0-9:.]+Z g: leader-a \\(term [0-9]+")))
      << w.out;
  EXPECT_EQ(std::count(w.out.begin(), w.out.end(), '\n') <= 3, true) << w.out;
  b.signal(SIGTERM);
  b.wait(10s);
}

}  // namespace
}  // namespace baton::testing
