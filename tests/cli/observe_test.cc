// tests/cli/observe_test.cc — `--metrics-file` and `--events` of `baton run`
// and `baton elect`, run as subprocesses: the file is written on every way
// out (success, failure, not acquired, lease lost), it parses with
// prometheus_client (tests/client/metrics_check.py) and holds what
// happened; the event lines are JSON without the owner token; bad paths
// are refused before anything runs.
//
// The parser checks need python3-prometheus-client: without it they are
// skipped (GTEST_SKIP), unless BATON_REQUIRE_PROMETHEUS_PARSER is set.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "process.h"

namespace baton::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

const std::string kBaton = BATON_CLI_PATH;

bool have_parser() {
  return std::system(
             "/usr/bin/python3 -c 'import prometheus_client.parser' "
             ">/dev/null 2>&1") == 0;
}

// metrics_check.py on `file` with the samples expected (a JSON list of
// [name, {labels}, value]); "" if it passed, else its output.
std::string parse_problems(const std::string& dir, const std::string& file,
                           const std::string& samples) {
  const std::string expected = dir + "/expected.json";
  std::ofstream(expected) << "{\"samples\": " << samples << "}";
  auto r = run({"/usr/bin/python3", METRICS_CHECK_PY, file, expected});
  return r.exit_code == 0 ? "" : r.out + r.err;
}

#define REQUIRE_PARSER()                                               \
  do {                                                                 \
    if (!have_parser()) {                                              \
      if (std::getenv("BATON_REQUIRE_PROMETHEUS_PARSER") != nullptr) { \
        FAIL() << "no python3-prometheus-client";                      \
      }                                                                \
      GTEST_SKIP() << "no python3-prometheus-client";                  \
    }                                                                  \
  } while (0)

class CliObserveTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = make_temp_dir(); }
  void TearDown() override {
    std::error_code ec;
    if (!HasFailure()) fs::remove_all(dir_, ec);
  }
  static ProcessResult baton(std::vector<std::string> args,
                             std::chrono::milliseconds timeout = 30s) {
    args.insert(args.begin(), {kBaton, "--store", "memory:"});
    return run(args, {}, timeout);
  }
  std::string dir_;
};

TEST_F(CliObserveTest, RunWritesTheMetricsFileWhenTheCommandEnds) {
  REQUIRE_PARSER();
  const std::string prom = dir_ + "/run.prom";
  auto r = baton({"run", "jobs/nightly", "--metrics-file", prom, "--", "true"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(parse_problems(dir_, prom, R"([
      ["baton_client_grants_total", {"prefix": "jobs"}, 1],
      ["baton_client_releases_total", {"prefix": "jobs"}, 1],
      ["baton_client_leases_held", {"prefix": "jobs"}, 0],
      ["baton_client_hold_seconds_count",
       {"prefix": "jobs", "end": "released"}, 1]])"),
            "")
      << slurp(prom);
  EXPECT_THAT(slurp(prom), Not(HasSubstr("nightly")));
  // Only the file itself is left: the temporary one was renamed.
  int files = 0;
  for (const auto& e : fs::directory_iterator(dir_)) {
    if (e.path().filename() != "expected.json") ++files;
  }
  EXPECT_EQ(files, 1);
}

TEST_F(CliObserveTest, AFailingCommandStillWritesTheFile) {
  const std::string prom = dir_ + "/fail.prom";
  auto r = baton(
      {"run", "jobs/x", "--metrics-file", prom, "--", "sh", "-c", "exit 7"});
  EXPECT_EQ(r.exit_code, 7) << r.err;
  EXPECT_THAT(slurp(prom), HasSubstr("# TYPE baton_client_grants_total"));
}

TEST_F(CliObserveTest, BadPathsAreRefusedBeforeAnythingRuns) {
  const std::string marker = dir_ + "/ran";
  struct Case {
    std::vector<std::string> flags;
    std::string named;
  };
  const Case cases[] = {
      {{"--metrics-file", dir_ + "/no-such-dir/m.prom"},
       dir_ + "/no-such-dir/m.prom"},
      {{"--metrics-file", dir_}, dir_},
      {{"--events", dir_ + "/no-such-dir/e.jsonl"},
       dir_ + "/no-such-dir/e.jsonl"},
  };
  for (const Case& c : cases) {
    for (const char* cmd : {"run", "elect"}) {
      std::vector<std::string> args = {cmd, "jobs/x"};
      args.insert(args.end(), c.flags.begin(), c.flags.end());
      args.insert(args.end(), {"--", "touch", marker});
      auto r = baton(args);
      EXPECT_EQ(r.exit_code, 64) << cmd << " " << c.flags[0] << ": " << r.err;
      EXPECT_THAT(r.err, HasSubstr("baton: invalid_argument: " + c.flags[0] +
                                   " " + c.named));
      EXPECT_FALSE(fs::exists(marker)) << "the command ran";
    }
  }
  // Not writable (as root every directory is).
  if (::geteuid() != 0) {
    const std::string ro = dir_ + "/ro";
    fs::create_directory(ro);
    ::chmod(ro.c_str(), 0555);
    auto r = baton({"run", "jobs/x", "--metrics-file", ro + "/m.prom", "--",
                    "touch", marker});
    EXPECT_EQ(r.exit_code, 64) << r.err;
    EXPECT_THAT(r.err, HasSubstr("Permission denied"));
    EXPECT_FALSE(fs::exists(marker));
  }
}

TEST_F(CliObserveTest, EventsAreJsonLinesWithoutTheOwnerToken) {
  const std::string events = dir_ + "/events.jsonl";
  auto r = baton({"run", "jobs/e", "--events", events, "--", "sh", "-c",
                  "echo \"$BATON_OWNER_TOKEN\""});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string token = r.out.substr(0, 32);
  ASSERT_EQ(token.size(), 32u) << r.out;
  const std::string text = slurp(events);
  EXPECT_THAT(text, Not(HasSubstr(token)));
  // Every line is one JSON object with ts, event and lock.
  auto check =
      run({"/usr/bin/python3", "-c",
           "import json,sys\n"
           "lines=open(sys.argv[1]).read().splitlines()\n"
           "evs=[json.loads(l) for l in lines]\n"
           "assert all({'ts','event','lock'} <= set(e) for e in evs), evs\n"
           "print(' '.join(e['event'] for e in evs))\n",
           events});
  ASSERT_EQ(check.exit_code, 0) << check.err << text;
  EXPECT_THAT(check.out, HasSubstr("granted")) << text;
  EXPECT_THAT(check.out, HasSubstr("released")) << text;
  EXPECT_THAT(text, HasSubstr("\"lock\":\"jobs/e\",\"fencing_token\":"));
}

TEST_F(CliObserveTest, EventsToStderrAndMetricsTogether) {
  const std::string prom = dir_ + "/both.prom";
  auto r = baton(
      {"run", "jobs/b", "--events", "-", "--metrics-file", prom, "--", "true"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("{\"ts\":\""));
  EXPECT_THAT(r.err, HasSubstr("\"event\":\"granted\""));
  EXPECT_THAT(slurp(prom),
              HasSubstr("baton_client_grants_total{prefix=\"jobs\"} 1"));
}

TEST_F(CliObserveTest, ElectWritesTheMetricsFile) {
  REQUIRE_PARSER();
  const std::string prom = dir_ + "/elect.prom";
  auto r = baton({"elect", "svc/billing", "--ttl", "3s", "--metrics-file", prom,
                  "--", "sh", "-c", "exit 3"});
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_EQ(parse_problems(dir_, prom, R"([
      ["baton_client_elections_won_total", {"prefix": "svc"}, 1],
      ["baton_client_leadership_ended_total", {"prefix": "svc"}, 1],
      ["baton_client_leader", {"prefix": "svc"}, 0]])"),
            "")
      << slurp(prom);
}

TEST_F(CliObserveTest, TheConfigFileGivesTheDefaults) {
  const std::string prom = dir_ + "/config.prom";
  const std::string config = dir_ + "/baton.yaml";
  std::ofstream(config) << "MetricsFile: " << prom << "\n";
  auto r = run({kBaton, "--store", "memory:", "--config", config, "run",
                "jobs/c", "--", "true"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(slurp(prom),
              HasSubstr("baton_client_grants_total{prefix=\"jobs\"} 1"));
}

#ifdef BATOND_PATH

// Several processes on one private batond.
class CliObserveServerTest : public CliObserveTest {
 protected:
  void SetUp() override {
    CliObserveTest::SetUp();
    port_ = free_port();
    server_ = std::make_unique<Process>(std::vector<std::string>{
        BATOND_PATH, "--listen", "127.0.0.1:" + std::to_string(port_),
        "--data-dir", dir_ + "/batond"});
    ASSERT_TRUE(wait_for_port(port_, 10s)) << server_->err();
    store_ = "baton://127.0.0.1:" + std::to_string(port_);
  }
  void TearDown() override {
    server_->signal(SIGTERM);
    server_->wait(10s);
    CliObserveTest::TearDown();
  }
  std::vector<std::string> args(std::vector<std::string> rest) {
    rest.insert(rest.begin(), {kBaton, "--store", store_});
    return rest;
  }
  int port_ = 0;
  std::string store_;
  std::unique_ptr<Process> server_;
};

TEST_F(CliObserveServerTest, NotAcquiredStillWritesTheFile) {
  REQUIRE_PARSER();
  Process holder(args({"run", "jobs/busy", "--", "sleep", "5"}));
  bool held = false;
  for (int i = 0; i < 250 && !held; ++i) {
    auto s = run(args({"status", "jobs/busy", "--json"}));
    held = s.out.find("\"fencing_token\"") != std::string::npos;
    if (!held) std::this_thread::sleep_for(20ms);
  }
  ASSERT_TRUE(held) << holder.err();
  const std::string prom = dir_ + "/busy.prom";
  auto r = run(args({"run", "jobs/busy", "--wait", "0", "--metrics-file", prom,
                     "--", "true"}));
  EXPECT_EQ(r.exit_code, 75) << r.err;
  EXPECT_EQ(parse_problems(dir_, prom, R"([
      ["baton_client_not_acquired_total", {"prefix": "jobs"}, 1],
      ["baton_client_grants_total", {"prefix": "jobs"}, 0]])"),
            "")
      << slurp(prom);
  holder.signal(SIGTERM);
  holder.wait(10s);
}

// The lease is lost (the command releases it behind baton's back): baton
// exits 76 at once, without destructors; the exit hook writes the file.
TEST_F(CliObserveServerTest, ALostLeaseStillWritesTheFile) {
  REQUIRE_PARSER();
  const std::string prom = dir_ + "/lost.prom";
  auto r = run(
      args({"run", "jobs/doomed", "--ttl", "1500ms", "--grace", "500ms",
            "--metrics-file", prom, "--", "sh", "-c",
            "\"$BATON_BIN\" --store \"$BATON_STORE\" release \"$BATON_LOCK\" "
            "\"$BATON_OWNER_TOKEN\" || exit 9; trap 'exit 0' TERM; "
            "while :; do sleep 0.05; done"}),
      {{"BATON_BIN", kBaton}}, 20s);
  EXPECT_EQ(r.exit_code, 76) << r.err;
  EXPECT_EQ(parse_problems(dir_, prom, R"([
      ["baton_client_grants_total", {"prefix": "jobs"}, 1],
      ["baton_client_leases_lost_total",
       {"prefix": "jobs", "reason": "store_said"}, 1],
      ["baton_client_leases_held", {"prefix": "jobs"}, 0]])"),
            "")
      << slurp(prom);
}

#endif  // BATOND_PATH

}  // namespace
}  // namespace baton::testing
