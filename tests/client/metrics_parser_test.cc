// PrometheusMetrics::render() read by the reference parser: python3's
// prometheus_client (text_string_to_metric_families), through
// metrics_check.py. It checks the syntax, the histograms' shape and the
// values fed here. Exits 77 (SKIPPED) without python3-prometheus-client,
// unless BATON_REQUIRE_PROMETHEUS_PARSER is set (scripts/test), where it
// fails.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "baton/metrics.h"
#include "metrics_events.h"

namespace baton::testing {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

struct Checked {
  int status = -1;
  std::string output;
};

// Runs metrics_check.py on `exposition` and `expected` (JSON).
Checked check(const std::string& exposition, const std::string& expected) {
  const fs::path dir = fs::temp_directory_path() /
                       ("baton-metrics-parser-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "metrics.prom") << exposition;
  std::ofstream(dir / "expected.json") << expected;
  const std::string cmd = std::string("/usr/bin/python3 ") + METRICS_CHECK_PY +
                          " " + (dir / "metrics.prom").string() + " " +
                          (dir / "expected.json").string() + " 2>&1";
  Checked out;
  if (FILE* p = ::popen(cmd.c_str(), "r")) {
    std::array<char, 4096> buf;
    std::size_t n;
    while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) {
      out.output.append(buf.data(), n);
    }
    const int st = ::pclose(p);
    out.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  }
  fs::remove_all(dir);
  return out;
}

TEST(MetricsParser, TheExpositionParsesWithTheValuesFed) {
  auto m = PrometheusMetrics::create({});
  ASSERT_TRUE(m.ok());
  Feeder f(**m);
  // jobs: three grants (3 ms, 40 ms, 2 s waited), a timeout after 30 s, a
  // release after 1.5 s, a loss after 70 s, renewals and their failures.
  f.granted("jobs/a", 1, 10s, 3ms);
  f.granted("jobs/b", 1, 10s, 40ms);
  f.wait_started("jobs/c");
  f.granted("jobs/c", 2, 10s, 2s);
  f.wait_started("jobs/d");
  f.timed_out("jobs/d", 30s);
  f.renewed("jobs/a", 1, 10s);
  f.renewal_failed("jobs/a", 1, true);
  f.renewal_failed("jobs/a", 1, true);
  f.renewal_failed("jobs/a", 1, false);
  f.released("jobs/a", 1, 1500ms);
  f.lost("jobs/b", 1, 70s, LostReason::deadline_passed);
  f.failed("jobs/e", Errc::unavailable, 5s);
  f.not_acquired("jobs/f");
  // A name without separator (prefix ""), a prefix needing escapes, an
  // election.
  f.granted("solo", 4, 10s);
  f.granted("we\"ird\\/x", 1, 10s);
  f.became_leader("svc/billing", 9);
  f.event(EventKind::new_leader, "svc/billing");

  const std::string expected = R"({
  "types": {
    "baton_client_wait_seconds": "histogram",
    "baton_client_hold_seconds": "histogram",
    "baton_client_grants": "counter",
    "baton_client_renewal_failures": "counter",
    "baton_client_leases_held": "gauge",
    "baton_client_leader": "gauge"
  },
  "samples": [
    ["baton_client_grants_total", {"prefix": "jobs"}, 3],
    ["baton_client_grants_total", {"prefix": ""}, 1],
    ["baton_client_grants_total", {"prefix": "we\"ird\\"}, 1],
    ["baton_client_timeouts_total", {"prefix": "jobs"}, 1],
    ["baton_client_not_acquired_total", {"prefix": "jobs"}, 1],
    ["baton_client_renewals_total", {"prefix": "jobs"}, 1],
    ["baton_client_renewal_failures_total",
     {"prefix": "jobs", "retryable": "true"}, 2],
    ["baton_client_renewal_failures_total",
     {"prefix": "jobs", "retryable": "false"}, 1],
    ["baton_client_leases_lost_total",
     {"prefix": "jobs", "reason": "deadline_passed"}, 1],
    ["baton_client_leases_lost_total",
     {"prefix": "jobs", "reason": "store_said"}, 0],
    ["baton_client_releases_total", {"prefix": "jobs"}, 1],
    ["baton_client_failures_total",
     {"prefix": "jobs", "code": "unavailable"}, 1],
    ["baton_client_wait_seconds_count",
     {"prefix": "jobs", "outcome": "granted"}, 3],
    ["baton_client_wait_seconds_sum",
     {"prefix": "jobs", "outcome": "granted"}, 2.043],
    ["baton_client_wait_seconds_bucket",
     {"prefix": "jobs", "outcome": "granted", "le": "0.001"}, 0],
    ["baton_client_wait_seconds_bucket",
     {"prefix": "jobs", "outcome": "granted", "le": "0.005"}, 1],
    ["baton_client_wait_seconds_bucket",
     {"prefix": "jobs", "outcome": "granted", "le": "0.05"}, 2],
    ["baton_client_wait_seconds_bucket",
     {"prefix": "jobs", "outcome": "granted", "le": "2.5"}, 3],
    ["baton_client_wait_seconds_bucket",
     {"prefix": "jobs", "outcome": "granted", "le": "+Inf"}, 3],
    ["baton_client_wait_seconds_count",
     {"prefix": "jobs", "outcome": "timed_out"}, 1],
    ["baton_client_wait_seconds_sum",
     {"prefix": "jobs", "outcome": "timed_out"}, 30],
    ["baton_client_wait_seconds_count",
     {"prefix": "jobs", "outcome": "failed"}, 1],
    ["baton_client_hold_seconds_sum",
     {"prefix": "jobs", "end": "released"}, 1.5],
    ["baton_client_hold_seconds_bucket",
     {"prefix": "jobs", "end": "lost", "le": "60"}, 0],
    ["baton_client_hold_seconds_bucket",
     {"prefix": "jobs", "end": "lost", "le": "300"}, 1],
    ["baton_client_leases_held", {"prefix": "jobs"}, 1],
    ["baton_client_leases_held", {"prefix": ""}, 1],
    ["baton_client_waiting_requests", {"prefix": "jobs"}, 0],
    ["baton_client_leader", {"prefix": "svc"}, 1],
    ["baton_client_elections_won_total", {"prefix": "svc"}, 1],
    ["baton_client_leader_changes_total", {"prefix": "svc"}, 1]
  ]
})";
  const Checked got = check((*m)->render(), expected);
  EXPECT_EQ(got.status, 0) << got.output << "\n--- exposition:\n"
                           << (*m)->render();
  std::printf("metrics_check.py: %s", got.output.c_str());
}

// The checker itself fails on what it must catch: a histogram whose
// buckets are not cumulative, a +Inf bucket that is not _count, a value
// other than the one expected, a line that is not the format.
TEST(MetricsParser, TheCheckerCatchesBrokenExpositions) {
  const std::string head = "# HELP h_seconds x\n# TYPE h_seconds histogram\n";
  const Checked not_cumulative = check(head +
                                           "h_seconds_bucket{le=\"1\"} 3\n"
                                           "h_seconds_bucket{le=\"+Inf\"} 2\n"
                                           "h_seconds_sum 1\n"
                                           "h_seconds_count 2\n",
                                       "{}");
  EXPECT_NE(not_cumulative.status, 0) << not_cumulative.output;
  const Checked bad_count = check(head +
                                      "h_seconds_bucket{le=\"1\"} 1\n"
                                      "h_seconds_bucket{le=\"+Inf\"} 2\n"
                                      "h_seconds_sum 1\n"
                                      "h_seconds_count 3\n",
                                  "{}");
  EXPECT_NE(bad_count.status, 0) << bad_count.output;
  const Checked wrong_value =
      check("# TYPE c_total counter\nc_total{prefix=\"a\"} 2\n",
            R"({"samples": [["c_total", {"prefix": "a"}, 3]]})");
  EXPECT_NE(wrong_value.status, 0) << wrong_value.output;
  const Checked garbage = check("c_total{prefix=\"a} 2\n", "{}");
  EXPECT_NE(garbage.status, 0) << garbage.output;
  const Checked good =
      check("# TYPE c_total counter\nc_total{prefix=\"a\"} 3\n",
            R"({"samples": [["c_total", {"prefix": "a"}, 3]]})");
  EXPECT_EQ(good.status, 0) << good.output;
}

}  // namespace
}  // namespace baton::testing

int main(int argc, char** argv) {
  if (std::system("/usr/bin/python3 -c 'import prometheus_client.parser' "
                  ">/dev/null 2>&1") != 0) {
    const char* missing =
        "no python3-prometheus-client (apt-get install "
        "python3-prometheus-client)";
    if (std::getenv("BATON_REQUIRE_PROMETHEUS_PARSER") != nullptr) {
      std::fprintf(stderr, "metrics_parser_test: FAILED: %s\n", missing);
      return 1;
    }
    std::printf("metrics_parser_test: SKIPPED: %s\n", missing);
    return 77;
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
