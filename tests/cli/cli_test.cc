// tests/cli/cli_test.cc — the `baton` binary, run as a subprocess.
//
// CliMemoryTest uses `--store memory:` (one process = one store), so it
// works without batond. CliServerTest starts a private batond on a free
// loopback port and is skipped when batond was not built.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "child_process.h"
#include "process.h"

namespace baton::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::MatchesRegex;
using ::testing::Not;
using namespace std::chrono_literals;

const std::string kBaton = BATON_CLI_PATH;

// ---------------------------------------------------------------------------
// memory: — single-process behaviour.

class CliMemoryTest : public ::testing::Test {
 protected:
  static ProcessResult baton(std::vector<std::string> args,
                             std::chrono::milliseconds timeout = 30s) {
    args.insert(args.begin(), {kBaton, "--store", "memory:"});
    return run(args, {}, timeout);
  }
};

// `baton stores` prints what each store's descriptor declares: every store
// built in, and one store's URL options with their types and defaults.
TEST_F(CliMemoryTest, StoresListsTheDescriptors) {
  auto all = run({kBaton, "stores"});
  ASSERT_EQ(all.exit_code, 0) << all.err;
  for (const char* name : {"memory", "sqlite"}) {
    EXPECT_THAT(all.out, HasSubstr(std::string(name) + " — ")) << all.out;
  }
  auto one = run({kBaton, "stores", "SQLITE://"});
  ASSERT_EQ(one.exit_code, 0) << one.err;
  EXPECT_THAT(one.out, MatchesRegex("^sqlite — (.|\n)*"));
  EXPECT_THAT(one.out, HasSubstr("request_timeout (duration, default 5s)"));
  EXPECT_THAT(one.out, Not(HasSubstr("\nmemory — ")));
  auto json = run({kBaton, "stores", "memory", "--json"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  EXPECT_THAT(json.out, MatchesRegex("^\\{\"name\":\"memory\",.*\\}\n$"));
  auto none = run({kBaton, "stores", "nosuch"});
  EXPECT_EQ(none.exit_code, 64);
  EXPECT_THAT(none.err, HasSubstr("no store with scheme \"nosuch\""));
}

TEST_F(CliMemoryTest, RunExportsEnvironmentAndPropagatesExitCode) {
  auto r = baton({"run", "job", "--", "sh", "-c",
                  "echo \"$BATON_LOCK $BATON_FENCING_TOKEN $BATON_OWNER_TOKEN "
                  "$BATON_OWNER_LABEL\"; exit 7"});
  EXPECT_EQ(r.exit_code, 7) << r.err;
  EXPECT_THAT(r.out, MatchesRegex("job [1-9][0-9]* [0-9a-f]{32} .+\n"));
}

TEST_F(CliMemoryTest, RunPassesSuccessAndArgumentsThrough) {
  auto r = baton({"run", "job", "--ttl", "5s", "--", "sh", "-c",
                  "test \"$1\" = -l", "sh", "-l"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

TEST_F(CliMemoryTest, RunReportsChildKilledBySignalAs128PlusN) {
  auto r = baton({"run", "job", "--", "sh", "-c", "kill -TERM $$"});
  EXPECT_EQ(r.exit_code, 128 + SIGTERM) << r.err;
}

TEST_F(CliMemoryTest, RunCommandNotFoundExits127) {
  auto r = baton({"run", "job", "--", "/nonexistent/baton-no-such-command"});
  EXPECT_EQ(r.exit_code, 127);
  EXPECT_THAT(r.err, HasSubstr("cannot run"));
}

TEST_F(CliMemoryTest, RunForwardsSigtermToTheChild) {
  Process p({kBaton, "--store", "memory:", "run", "job", "--", "sh", "-c",
             "trap 'exit 42' TERM; echo ready; while :; do sleep 0.05; done"});
  for (int i = 0; i < 200 && p.out().find("ready") == std::string::npos; ++i) {
    std::this_thread::sleep_for(20ms);
  }
  ASSERT_THAT(p.out(), HasSubstr("ready")) << p.err();
  p.signal(SIGTERM);
  auto r = p.wait(10s);
  EXPECT_EQ(r.exit_code, 42) << r.err;
}

TEST_F(CliMemoryTest, BadInputExits64WithAClearMessage) {
  auto r = baton({"run", "--ttl", "0", "job", "--", "true"});
  EXPECT_EQ(r.exit_code, 64);
  EXPECT_THAT(r.err, HasSubstr("baton: invalid_argument:"));
  EXPECT_THAT(r.err, HasSubstr("TTL"));

  r = baton({"run", "", "--", "true"});
  EXPECT_EQ(r.exit_code, 64);
  EXPECT_THAT(r.err, HasSubstr("lock name"));

  r = baton({"acquire", ""});
  EXPECT_EQ(r.exit_code, 64);
  EXPECT_THAT(r.err, HasSubstr("lock name"));

  r = baton({"acquire", "job", "--capacity", "0"});
  EXPECT_EQ(r.exit_code, 64);
  EXPECT_THAT(r.err, HasSubstr("capacity"));

  r = baton({"acquire", "job", "--wait", "soon"});
  EXPECT_EQ(r.exit_code, 64);
  EXPECT_THAT(r.err, HasSubstr("--wait"));

  r = baton({"run", "job"});
  EXPECT_EQ(r.exit_code, 64);
  EXPECT_THAT(r.err, HasSubstr("no command"));

  r = baton({"acquire", "job", "--no-such-flag"});
  EXPECT_EQ(r.exit_code, 64);

  r = baton({"release", "job", "not-a-token"});
  EXPECT_EQ(r.exit_code, 64);
  EXPECT_THAT(r.err, HasSubstr("token"));

  r = baton({"frobnicate"});
  EXPECT_EQ(r.exit_code, 64);
}

TEST_F(CliMemoryTest, UnknownStoreUrlExits64) {
  auto r = run({kBaton, "--store", "nosuch://x", "acquire", "job"});
  EXPECT_EQ(r.exit_code, 64) << r.err;
  EXPECT_THAT(r.err, HasSubstr("baton: invalid_argument:"));
}

TEST_F(CliMemoryTest, StoreUrlComesFromTheEnvironment) {
  auto r = run({kBaton, "acquire", "job"}, {{"BATON_STORE", "memory:"}});
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

TEST_F(CliMemoryTest, AcquirePrintsTokenFencingAndTtl) {
  auto r = baton({"acquire", "job", "--ttl", "2m"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out,
              MatchesRegex("token=[0-9a-f]{32} fencing=[1-9][0-9]* ttl=2m\n"));
  r = baton({"--label", "me", "acquire", "job", "--json"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("\"lock\":\"job\""));
  EXPECT_THAT(r.out, MatchesRegex(".*\"token\":\"[0-9a-f]{32}\".*"));
}

TEST_F(CliMemoryTest, StatusOfAnEmptyStore) {
  auto r = baton({"status"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("no locks"));
  r = baton({"status", "--json"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "{\"locks\":[]}\n");
}

TEST_F(CliMemoryTest, CounterInOneProcess) {
  auto r = baton({"counter", "add", "prizes", "10"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "10\n");
  r = baton({"counter", "get", "prizes"});
  EXPECT_EQ(r.out, "0\n");  // a fresh memory: store
  r = baton({"counter", "take", "prizes"});
  EXPECT_EQ(r.exit_code, 75);
  EXPECT_THAT(r.err, HasSubstr("baton: not_acquired:"));
}

TEST_F(CliMemoryTest, ElectRunsTheCommandAsLeader) {
  auto r = baton({"elect", "leaders", "--ttl", "3s", "--", "sh", "-c",
                  "echo \"term=$BATON_FENCING_TOKEN\"; exit 3"});
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_THAT(r.out, MatchesRegex("term=[1-9][0-9]*\n"));
}

// ---------------------------------------------------------------------------
// batond — several baton processes sharing one store.

#ifdef BATOND_PATH

class CliServerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    data_dir_ = make_temp_dir();
    port_ = free_port();
    server_ = std::make_unique<Process>(std::vector<std::string>{
        BATOND_PATH, "--listen", "127.0.0.1:" + std::to_string(port_),
        "--data-dir", data_dir_});
    if (!wait_for_port(port_, 10s)) {
      startup_error_ = "batond did not start: " + server_->err();
    }
    store_ = "baton://127.0.0.1:" + std::to_string(port_);
  }
  static void TearDownTestSuite() {
    if (server_) {
      server_->signal(SIGTERM);
      server_->wait(10s);
      server_.reset();
    }
    std::error_code ec;
    std::filesystem::remove_all(data_dir_, ec);
  }
  void SetUp() override {
    if (!startup_error_.empty()) GTEST_FAIL() << startup_error_;
  }

  static std::vector<std::string> args(std::vector<std::string> rest) {
    rest.insert(rest.begin(), {kBaton, "--store", store_});
    return rest;
  }
  static ProcessResult baton(std::vector<std::string> rest,
                             std::chrono::milliseconds timeout = 30s) {
    return run(args(std::move(rest)), {{"BATON_BIN", kBaton}}, timeout);
  }
  // Waits until `status <lock> --json` shows a holder.
  static bool wait_until_held(const std::string& lock) {
    for (int i = 0; i < 250; ++i) {
      auto r = baton({"status", lock, "--json"});
      if (r.out.find("\"fencing_token\"") != std::string::npos) return true;
      std::this_thread::sleep_for(20ms);
    }
    return false;
  }

  static inline std::string data_dir_;
  static inline int port_ = 0;
  static inline std::string store_;
  static inline std::string startup_error_;
  static inline std::unique_ptr<Process> server_;
};

TEST_F(CliServerTest, SecondRunWithWaitZeroExits75AndStatusListsHolder) {
  Process holder(
      args({"--label", "holder-one", "run", "nightly", "--", "sleep", "5"}));
  ASSERT_TRUE(wait_until_held("nightly")) << holder.err();

  auto busy = baton({"run", "nightly", "--wait", "0", "--", "true"});
  EXPECT_EQ(busy.exit_code, 75) << busy.err;
  EXPECT_THAT(busy.err, HasSubstr("baton: not_acquired:"));

  auto status = baton({"status", "--json"});
  EXPECT_EQ(status.exit_code, 0) << status.err;
  EXPECT_THAT(status.out, HasSubstr("\"name\":\"nightly\""));
  EXPECT_THAT(status.out, HasSubstr("\"label\":\"holder-one\""));

  auto table = baton({"status", "nightly"});
  EXPECT_EQ(table.exit_code, 0) << table.err;
  EXPECT_THAT(table.out, HasSubstr("holder-one"));

  holder.signal(SIGTERM);  // forwarded to sleep: 128+15
  auto r = holder.wait(10s);
  EXPECT_EQ(r.exit_code, 128 + SIGTERM) << r.err;
  // Released on exit: free again at once.
  auto again = baton({"run", "nightly", "--wait", "0", "--", "true"});
  EXPECT_EQ(again.exit_code, 0) << again.err;
}

TEST_F(CliServerTest, RunWaitsForTheLock) {
  Process holder(args({"run", "queue", "--", "sleep", "1"}));
  ASSERT_TRUE(wait_until_held("queue")) << holder.err();
  auto r = baton({"run", "queue", "--wait", "20s", "--", "sh", "-c",
                  "echo $BATON_FENCING_TOKEN"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(holder.wait(10s).exit_code, 0);
}

// Rule 18: two `run --shared` hold the lock together; status shows both
// as shared; an exclusive run waits for both; `acquire --shared --json`
// says shared.
TEST_F(CliServerTest, SharedRunsHoldTogetherAndAWriterWaits) {
  Process r1(args({"--label", "reader-one", "run", "catalog", "--shared", "--",
                   "sleep", "2"}));
  ASSERT_TRUE(wait_until_held("catalog")) << r1.err();
  auto r2 = baton({"--label", "reader-two", "run", "catalog", "--shared",
                   "--wait", "0", "--", "true"});
  EXPECT_EQ(r2.exit_code, 0) << r2.err;
  auto busy = baton({"run", "catalog", "--wait", "0", "--", "true"});
  EXPECT_EQ(busy.exit_code, 75) << busy.err;
  EXPECT_THAT(busy.err, HasSubstr("held shared by 1 holder"));
  auto table = baton({"status", "catalog"});
  EXPECT_THAT(table.out, HasSubstr("reader-one (shared)")) << table.out;
  auto json = baton({"status", "catalog", "--json"});
  EXPECT_THAT(json.out, HasSubstr("\"shared\":true")) << json.out;
  const auto t0 = std::chrono::steady_clock::now();
  auto writer = baton({"run", "catalog", "--wait", "20s", "--", "true"});
  EXPECT_EQ(writer.exit_code, 0) << writer.err;
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 500ms)
      << "the writer did not wait for the reader";
  EXPECT_EQ(r1.wait(10s).exit_code, 0);
  auto a = baton({"acquire", "catalog2", "--shared", "--json"});
  EXPECT_EQ(a.exit_code, 0) << a.err;
  EXPECT_THAT(a.out, HasSubstr("\"shared\":true"));
  auto bad = baton({"acquire", "catalog3", "--shared", "--capacity", "2"});
  EXPECT_EQ(bad.exit_code, 64);
  EXPECT_THAT(bad.err, HasSubstr("shared mode needs capacity 1"));
}

// status --watch: one view per --interval (with --json one document per
// line, so scripts can follow it); a change shows up in the next view.
TEST_F(CliServerTest, StatusWatchShowsEachViewAndStopsAfterCount) {
  Process watcher(args({"status", "watched", "--watch", "--json", "--interval",
                        "300ms", "--count", "6"}));
  std::this_thread::sleep_for(400ms);
  Process holder(args({"run", "watched", "--", "sleep", "2"}));
  auto done = watcher.wait(20s);
  ASSERT_EQ(done.exit_code, 0) << done.err;
  std::vector<std::string> views;
  std::istringstream lines(done.out);
  for (std::string l; std::getline(lines, l);) views.push_back(l);
  ASSERT_EQ(views.size(), 6u) << done.out;
  EXPECT_THAT(views.front(), HasSubstr("\"holders\":[]"));
  EXPECT_THAT(views.back(), HasSubstr("\"holders\":[{"));
  auto bad = baton({"status", "--watch", "--interval", "10ms"});
  EXPECT_EQ(bad.exit_code, 64);
  EXPECT_THAT(bad.err, HasSubstr("--interval 10ms is too short"));
  EXPECT_EQ(holder.wait(10s).exit_code, 0);
}

// batond has a change feed (Store::watch): --watch redraws on a change,
// not at the next --interval, so with a 60 s interval the holder still
// shows at once. --no-push polls, and its second view waits the interval.
TEST_F(CliServerTest, StatusWatchRedrawsOnTheStoresChange) {
  Process watcher(args({"status", "pushed", "--watch", "--json", "--interval",
                        "60s", "--count", "2"}));
  Process poller(args({"status", "pushed", "--watch", "--json", "--interval",
                       "60s", "--count", "2", "--no-push"}));
  std::this_thread::sleep_for(700ms);
  auto a = baton({"acquire", "pushed", "--ttl", "30s"});
  ASSERT_EQ(a.exit_code, 0) << a.err;
  const auto t0 = std::chrono::steady_clock::now();
  auto done = watcher.wait(20s);
  ASSERT_EQ(done.exit_code, 0) << done.err;
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 10s);
  std::vector<std::string> views;
  std::istringstream lines(done.out);
  for (std::string l; std::getline(lines, l);) views.push_back(l);
  ASSERT_EQ(views.size(), 2u) << done.out;
  EXPECT_THAT(views.front(), HasSubstr("\"holders\":[]"));
  EXPECT_THAT(views.back(), HasSubstr("\"holders\":[{"));
  // The poller is still in its 60 s interval: one view so far.
  std::this_thread::sleep_for(500ms);
  const std::string polled = poller.out();
  EXPECT_EQ(std::count(polled.begin(), polled.end(), '\n'), 1) << polled;
  poller.signal(SIGINT);
  EXPECT_EQ(poller.wait(10s).exit_code, 0);
  auto bad = baton({"status", "pushed", "--no-push"});
  EXPECT_EQ(bad.exit_code, 64);
  EXPECT_THAT(bad.err, HasSubstr("--no-push goes with --watch or --serve"));
}

// `status --serve` on a store with a change feed reads the store when it
// changes: with a 60 s --interval a new holder is on /status.json within
// seconds, and the snapshot says it is fed by push.
TEST_F(CliServerTest, StatusServeFollowsTheStoresChanges) {
  const int port = free_port();
  Process serve(args({"status", "--serve", "127.0.0.1:" + std::to_string(port),
                      "--interval", "60s", "--prefix", "served/"}));
  ASSERT_TRUE(wait_for_port(port, 10s)) << serve.err();
  auto status = [&] {
    return baton::testing::loopback_http_get(static_cast<std::uint16_t>(port),
                                             "/status.json");
  };
  auto a = baton({"acquire", "served/x", "--ttl", "30s"});
  ASSERT_EQ(a.exit_code, 0) << a.err;
  const auto t0 = std::chrono::steady_clock::now();
  std::string body;
  while (std::chrono::steady_clock::now() - t0 < 10s) {
    body = status();
    if (body.find("\"fencing_token\"") != std::string::npos) break;
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_THAT(body, HasSubstr("\"fencing_token\"")) << body;
  EXPECT_THAT(body, HasSubstr("\"fed_by\":\"push\"")) << body;
  serve.signal(SIGTERM);
  EXPECT_EQ(serve.wait(10s).exit_code, 0);
}

TEST_F(CliServerTest, AcquireExtendReleaseRoundTrip) {
  auto a = baton({"acquire", "manual", "--ttl", "30s"});
  ASSERT_EQ(a.exit_code, 0) << a.err;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(a.out, m, std::regex("token=([0-9a-f]{32})")))
      << a.out;
  const std::string token = m[1];

  auto busy = baton({"acquire", "manual"});
  EXPECT_EQ(busy.exit_code, 75) << busy.err;

  auto e = baton({"extend", "manual", token, "--ttl", "1m"});
  EXPECT_EQ(e.exit_code, 0) << e.err;
  EXPECT_THAT(e.out, HasSubstr("ttl=1m"));

  auto rel = baton({"release", "manual", token});
  EXPECT_EQ(rel.exit_code, 0) << rel.err;
  auto rel2 = baton({"release", "manual", token});
  EXPECT_EQ(rel2.exit_code, 1);
  EXPECT_THAT(rel2.err, HasSubstr("no longer held"));

  auto e2 = baton({"extend", "manual", token});
  EXPECT_EQ(e2.exit_code, 76) << e2.err;
}

TEST_F(CliServerTest, CounterAcrossProcesses) {
  EXPECT_EQ(baton({"counter", "add", "prizes", "10"}).out, "10\n");
  EXPECT_EQ(baton({"counter", "take", "prizes", "4"}).out, "6\n");
  EXPECT_EQ(baton({"counter", "add", "prizes", "-1"}).out, "5\n");
  auto over = baton({"counter", "take", "prizes", "6"});
  EXPECT_EQ(over.exit_code, 75) << over.err;
  EXPECT_EQ(baton({"counter", "get", "prizes"}).out, "5\n");
}

TEST_F(CliServerTest, LeaseLostStopsTheChildAndExits76) {
  // The child releases its own lease behind baton's back; the next renewal
  // answers lock_lost, and baton stops the child with SIGTERM.
  auto r = baton(
      {"run", "doomed", "--ttl", "1500ms", "--grace", "500ms", "--", "sh", "-c",
       "\"$BATON_BIN\" release \"$BATON_LOCK\" \"$BATON_OWNER_TOKEN\""
       " || exit 9; trap 'echo got-term; exit 0' TERM; "
       "while :; do sleep 0.05; done"},
      20s);
  EXPECT_EQ(r.exit_code, 76) << r.err;
  EXPECT_THAT(r.out, HasSubstr("got-term"));
  EXPECT_THAT(r.err, HasSubstr("baton: lock_lost:"));
}

TEST_F(CliServerTest, StoreUnavailableExits69) {
  int port = free_port();
  auto r = run({kBaton, "--store", "baton://127.0.0.1:" + std::to_string(port),
                "acquire", "x"},
               {}, 60s);
  EXPECT_EQ(r.exit_code, 69) << r.err;
  EXPECT_THAT(r.err, HasSubstr("baton: unavailable:"));
}

TEST_F(CliServerTest, StandbyTakesOverAfterTheLeaderExits) {
  Process leader(
      args({"--label", "first", "elect", "group", "--ttl", "3s", "--", "sh",
            "-c", "echo $BATON_FENCING_TOKEN; sleep 1"}));
  ASSERT_TRUE(wait_until_held("group")) << leader.err();
  auto standby = baton({"--label", "second", "elect", "group", "--ttl", "3s",
                        "--", "sh", "-c", "echo $BATON_FENCING_TOKEN"});
  auto first = leader.wait(10s);
  EXPECT_EQ(first.exit_code, 0) << first.err;
  EXPECT_EQ(standby.exit_code, 0) << standby.err;
  EXPECT_GT(std::stoull(standby.out), std::stoull(first.out));
}

TEST_F(CliServerTest, LostLeadershipStopsTheCommandAndExits76) {
  auto r =
      baton({"elect", "fragile", "--ttl", "1500ms", "--grace", "500ms", "--",
             "sh", "-c",
             "\"$BATON_BIN\" release \"$BATON_LOCK\" \"$BATON_OWNER_TOKEN\""
             " || exit 9; trap 'echo got-term; exit 0' TERM; "
             "while :; do sleep 0.05; done"},
            20s);
  EXPECT_EQ(r.exit_code, 76) << r.err;
  EXPECT_THAT(r.out, HasSubstr("got-term"));
  EXPECT_THAT(r.err, HasSubstr("baton: lock_lost:"));
}

TEST_F(CliServerTest, StandbyStopsCampaigningOnSigterm) {
  Process leader(
      args({"--label", "boss", "elect", "busy-group", "--", "sleep", "10"}));
  ASSERT_TRUE(wait_until_held("busy-group")) << leader.err();
  Process standby(
      args({"--label", "spare", "elect", "busy-group", "--", "true"}));
  for (int i = 0; i < 250 && standby.err().find("boss") == std::string::npos;
       ++i) {
    std::this_thread::sleep_for(20ms);
  }
  EXPECT_THAT(standby.err(), HasSubstr("leader of busy-group is now boss"));
  standby.signal(SIGTERM);
  auto r = standby.wait(10s);
  EXPECT_EQ(r.exit_code, 128 + SIGTERM) << r.err;
  // The standby left the queue: nobody but the leader is listed.
  auto status = baton({"status", "busy-group", "--json"});
  EXPECT_THAT(status.out, Not(HasSubstr("spare")));
  leader.signal(SIGTERM);
  EXPECT_EQ(leader.wait(10s).exit_code, 128 + SIGTERM);
}

#endif  // BATOND_PATH

}  // namespace
}  // namespace baton::testing
