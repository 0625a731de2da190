// tests/cli/bench_test.cc — `baton bench`, run as a subprocess: short runs
// on memory: (and on a private batond when built), checking the JSON
// fields scripts rely on, and that bad input is refused with exit 64.
// Figures are not asserted beyond "something happened" (speed belongs in
// bench/, not in tests).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <memory>
#include <regex>
#include <string>
#include <vector>

#include "process.h"

namespace baton::testing {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

const std::string kBenchCli = BATON_CLI_PATH;

ProcessResult bench(const std::string& store, std::vector<std::string> args) {
  args.insert(args.begin(), {kBenchCli, "--store", store, "bench"});
  return run(args, {}, 120s);
}

// The number after "key": in a flat or nested JSON text (first match).
double number(const std::string& json, const std::string& key) {
  std::smatch m;
  std::regex re("\"" + key + "\":(-?[0-9.]+)");
  if (!std::regex_search(json, m, re)) {
    ADD_FAILURE() << "no numeric field " << key << " in " << json;
    return -1;
  }
  return std::stod(m[1]);
}

// The object following "key": (for latency blocks and scenario phases).
std::string object(const std::string& json, const std::string& key) {
  auto at = json.find("\"" + key + "\":{");
  if (at == std::string::npos) {
    ADD_FAILURE() << "no object " << key << " in " << json;
    return {};
  }
  int depth = 0;
  for (std::size_t i = json.find('{', at); i < json.size(); ++i) {
    if (json[i] == '{') ++depth;
    if (json[i] == '}' && --depth == 0) {
      return json.substr(at, i - at + 1);
    }
  }
  return {};
}

TEST(CliBench, FairOnMemoryReportsGrantsFairnessAndHandoffs) {
  auto r = bench("memory:", {"--workload", "fair", "--clients", "4",
                             "--duration", "800ms", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("\"workload\":\"fair\""));
  EXPECT_EQ(number(r.out, "clients"), 4);
  EXPECT_EQ(number(r.out, "locks"), 1);
  EXPECT_GT(number(r.out, "pairs"), 0);
  EXPECT_GT(number(r.out, "pairs_per_sec"), 0);
  EXPECT_EQ(number(r.out, "errors"), 0) << r.out;
  const double jain = number(r.out, "jain");
  EXPECT_GT(jain, 0.25);  // 1/n is the floor: one client got everything
  EXPECT_LE(jain, 1.0);
  EXPECT_GT(number(r.out, "min_client_pairs"), 0) << "a client starved";
  EXPECT_GT(number(r.out, "worst_wait_ms"), 0);
  const std::string acquire = object(r.out, "acquire");
  EXPECT_GT(number(acquire, "count"), 0);
  EXPECT_LE(number(acquire, "p50_us"), number(acquire, "p99_us"));
  EXPECT_LE(number(acquire, "p99_us"), number(acquire, "max_us"));
  // Four clients blocking on one FIFO lock: grants are handoffs.
  EXPECT_GT(number(object(r.out, "handoff"), "count"), 0);
  EXPECT_THAT(r.out, HasSubstr("\"completed\":true"));
}

TEST(CliBench, UncontendedAndMixedTextAndJson) {
  auto text = bench("memory:", {"--clients", "2", "--duration", "300ms"});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_THAT(text.out, HasSubstr("pairs/s"));
  EXPECT_THAT(text.out, HasSubstr("fairness: Jain"));
  EXPECT_THAT(text.out, HasSubstr("errors 0"));
  // Not a terminal: no progress line on stderr.
  EXPECT_EQ(text.err, "");

  auto mixed =
      bench("memory:", {"--workload", "mixed", "--clients", "4", "--locks", "2",
                        "--duration", "500ms", "--json"});
  ASSERT_EQ(mixed.exit_code, 0) << mixed.err;
  EXPECT_THAT(mixed.out, HasSubstr("\"workload\":\"mixed\""));
  EXPECT_GT(number(mixed.out, "pairs"), 0);
  EXPECT_GE(number(mixed.out, "busy"), 0);
  EXPECT_EQ(number(mixed.out, "errors"), 0) << mixed.out;
}

TEST(CliBench, ScenariosOnMemory) {
  auto s3 = bench("memory:", {"--workload", "segments", "--json"});
  ASSERT_EQ(s3.exit_code, 0) << s3.err;
  for (const char* phase : {"center", "segments"}) {
    const std::string p = object(s3.out, phase);
    EXPECT_EQ(number(p, "modifications"), 5000) << phase;
    EXPECT_EQ(number(p, "lost_updates"), 0) << phase;
    EXPECT_GT(number(p, "seconds"), 0) << phase;
  }
  auto s0 = bench("memory:",
                  {"--workload", "microbatch", "--duration", "3s", "--json"});
  ASSERT_EQ(s0.exit_code, 0) << s0.err;
  for (const char* mode : {"fifo", "polling"}) {
    const std::string m = object(s0.out, mode);
    EXPECT_GT(number(m, "namespaces_processed"), 0) << mode;
    EXPECT_GT(number(object(m, "recent"), "runs_started"), 0) << mode;
    EXPECT_GT(number(object(m, "late"), "runs_started"), 0) << mode;
    EXPECT_EQ(number(m, "errors"), 0) << mode << ": " << s0.out;
  }
}

TEST(CliBench, BadInputExits64NamingTheProblem) {
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"--workload", "nope"}, "workload must be"},
      {{"--clients", "-1"}, "--clients"},
      {{"--clients", "0"}, "--clients"},
      {{"--duration", "soon"}, "--duration"},
      {{"--duration", "0s"}, "--duration"},
      {{"--workload", "fair", "--locks", "3"}, "fair"},
      {{"--locks", "0"}, "--locks"},
      {{"--hold", "1s", "--ttl", "500ms"}, "--hold"},
  };
  for (const Case& c : cases) {
    auto r = bench("memory:", c.args);
    EXPECT_EQ(r.exit_code, 64)
        << c.args[0] << " " << c.args[1] << ": " << r.err;
    EXPECT_THAT(r.err, HasSubstr(c.message)) << c.args[0];
    EXPECT_EQ(r.out, "");
  }
  auto raw = bench("raw-redis://127.0.0.1:1",
                   {"--workload", "contended", "--duration", "1s"});
  EXPECT_EQ(raw.exit_code, 64) << raw.err;
  EXPECT_THAT(raw.err, HasSubstr("only uncontended"));
}

#ifdef BATOND_PATH
TEST(CliBench, ContendedOnBatondMeasuresHandoffs) {
  const int port = free_port();
  Process server({BATOND_PATH, "--listen", "127.0.0.1:" + std::to_string(port),
                  "--data-dir", ""});
  ASSERT_TRUE(wait_for_port(port, 10s)) << server.err();
  const std::string store = "baton://127.0.0.1:" + std::to_string(port);
  auto r = bench(store, {"--workload", "contended", "--clients", "4", "--locks",
                         "2", "--duration", "1s", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("\"store\":\"" + store + "\""));
  EXPECT_GT(number(r.out, "pairs"), 0);
  EXPECT_EQ(number(r.out, "errors"), 0) << r.out;
  EXPECT_GT(number(object(r.out, "handoff"), "count"), 0);
  server.signal(SIGTERM);
  EXPECT_EQ(server.wait(10s).exit_code, 0);
}
#endif

}  // namespace
}  // namespace baton::testing
