// PrometheusMetrics (baton/metrics.h) fed by hand-made events: prefixes
// and their cap, the gauges, threads, options and write_file. The
// exposition's syntax is checked by the reference parser in
// metrics_parser_test.cc.
#include "baton/metrics.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "metrics_events.h"

namespace baton::testing {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

// The value of the sample whose line starts with `series` + " ", or -1.
double value_of(const std::string& text, const std::string& series) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(series + " ", 0) == 0) {
      return std::stod(line.substr(series.size() + 1));
    }
  }
  return -1;
}

// The distinct prefix="..." values of the samples of `metric`.
std::set<std::string> prefixes_of(const std::string& text,
                                  const std::string& metric) {
  std::set<std::string> out;
  std::istringstream in(text);
  std::string line;
  const std::string head = metric + "{prefix=\"";
  while (std::getline(in, line)) {
    if (line.rfind(head, 0) != 0) continue;
    const std::size_t end = line.find('"', head.size());
    out.insert(line.substr(head.size(), end - head.size()));
  }
  return out;
}

std::shared_ptr<PrometheusMetrics> make(MetricsOptions o = {}) {
  auto m = PrometheusMetrics::create(std::move(o));
  EXPECT_TRUE(m.ok()) << (m.ok() ? "" : m.error().to_string());
  return *m;
}

TEST(Metrics, PrefixIsTheNameUpToItsSeparators) {
  MetricsOptions o;
  o.prefix_segments = 2;
  auto m = make(o);
  Feeder f(*m);
  for (const char* name :
       {"jobs/nightly/2026-11-25", "jobs:eu", "plain", "a.b.c.d", "/root"}) {
    f.granted(name, 1, 10s);
  }
  const auto got = prefixes_of(m->render(), "baton_client_grants_total");
  EXPECT_EQ(got, (std::set<std::string>{"jobs/nightly", "jobs", "", "a.b"}));
}

TEST(Metrics, TenThousandNamesKeepTheSeriesBounded) {
  auto m = make();  // max_prefixes 100
  Feeder f(*m);
  for (int i = 0; i < 10'000; ++i) {
    // 300 prefixes, some names without a separator.
    const std::string name = i % 7 == 0 ? "solo-" + std::to_string(i)
                                        : "p" + std::to_string(i % 300) +
                                              "/job-" + std::to_string(i);
    f.wait_started(name);
    f.granted(name, static_cast<std::uint64_t>(i + 1), 1h, 5ms);
    f.released(name, static_cast<std::uint64_t>(i + 1), 2s);
  }
  const std::string text = m->render();
  for (const char* metric :
       {"baton_client_grants_total", "baton_client_leases_held",
        "baton_client_wait_seconds_count", "baton_client_hold_seconds_count",
        "baton_client_waiting_requests"}) {
    const auto got = prefixes_of(text, metric);
    EXPECT_LE(got.size(), 101u) << metric;
    EXPECT_TRUE(got.count("_other")) << metric;
  }
  EXPECT_EQ(text.find("job-"), std::string::npos) << "a raw name leaked";
  EXPECT_EQ(text.find("solo"), std::string::npos) << "a raw name leaked";
  // Every grant counted, in some series.
  double grants = 0;
  for (const std::string& p : prefixes_of(text, "baton_client_grants_total")) {
    grants += value_of(text, "baton_client_grants_total{prefix=\"" + p + "\"}");
  }
  EXPECT_EQ(grants, 10'000);
  EXPECT_LT(text.size(), 400'000u);
}

TEST(Metrics, RawNamesAreOptInAndStillCapped) {
  MetricsOptions o;
  o.raw_names = true;
  o.max_prefixes = 50;
  auto m = make(o);
  Feeder f(*m);
  for (int i = 0; i < 1000; ++i) f.granted("n" + std::to_string(i), 1, 10s);
  const std::string text = m->render();
  EXPECT_EQ(prefixes_of(text, "baton_client_grants_total").size(), 51u);
  EXPECT_NE(text.find("prefix=\"n0\""), std::string::npos);
  EXPECT_EQ(value_of(text, "baton_client_grants_total{prefix=\"_other\"}"),
            950);
}

TEST(Metrics, HeldGaugeFollowsGrantsReleasesAndDeadlines) {
  auto clock = std::make_shared<ManualClock>();
  MetricsOptions o;
  o.clock = clock;
  auto m = make(o);
  Feeder f(*m, clock);
  const std::string held = "baton_client_leases_held{prefix=\"jobs\"}";
  f.granted("jobs/a", 7, 10s);
  EXPECT_EQ(value_of(m->render(), held), 1);
  f.released("jobs/a", 7, 1s);
  EXPECT_EQ(value_of(m->render(), held), 0);

  // Dropped without release: gone from the gauge once its deadline passed.
  f.granted("jobs/b", 8, 1s);
  EXPECT_EQ(value_of(m->render(), held), 1);
  clock->advance(1500ms);
  EXPECT_EQ(value_of(m->render(), held), 0);

  // A renewal moves the deadline.
  f.granted("jobs/c", 9, 1s);
  f.renewed("jobs/c", 9, 5s);
  clock->advance(2s);
  EXPECT_EQ(value_of(m->render(), held), 1);
  f.lost("jobs/c", 9, 2s, LostReason::store_said);
  EXPECT_EQ(value_of(m->render(), held), 0);

  // Reentrant holds: one lease until its last hold is given back.
  f.granted("jobs/d", 10, 10s);
  f.granted("jobs/d", 10, 10s);
  EXPECT_EQ(value_of(m->render(), held), 1);
  f.released("jobs/d", 10, 1s);
  EXPECT_EQ(value_of(m->render(), held), 1);
  f.released("jobs/d", 10, 1s);
  EXPECT_EQ(value_of(m->render(), held), 0);
  const std::string text = m->render();
  EXPECT_EQ(value_of(text, "baton_client_grants_total{prefix=\"jobs\"}"), 5);
  EXPECT_EQ(value_of(text, "baton_client_releases_total{prefix=\"jobs\"}"), 3);
  EXPECT_EQ(value_of(text,
                     "baton_client_leases_lost_total{prefix=\"jobs\","
                     "reason=\"store_said\"}"),
            1);
}

TEST(Metrics, WaitingGaugeMatchesAWaitToItsEndOnTheSameThread) {
  auto m = make();
  Feeder f(*m);
  const std::string waiting = "baton_client_waiting_requests{prefix=\"q\"}";
  f.wait_started("q/1");
  EXPECT_EQ(value_of(m->render(), waiting), 1);
  // Another thread's immediate grant of the same lock ends no wait here.
  std::thread([&] { f.granted("q/1", 1, 10s); }).join();
  EXPECT_EQ(value_of(m->render(), waiting), 1);
  f.timed_out("q/1", 30s);
  EXPECT_EQ(value_of(m->render(), waiting), 0);
  f.wait_started("q/2");
  f.cancelled("q/2", 2s);
  f.wait_started("q/3");
  f.failed("q/3", Errc::unavailable);
  const std::string text = m->render();
  EXPECT_EQ(value_of(text, waiting), 0);
  EXPECT_EQ(value_of(text, "baton_client_timeouts_total{prefix=\"q\"}"), 1);
  EXPECT_EQ(value_of(text, "baton_client_cancellations_total{prefix=\"q\"}"),
            1);
  EXPECT_EQ(value_of(text,
                     "baton_client_failures_total{prefix=\"q\","
                     "code=\"unavailable\"}"),
            1);
}

TEST(Metrics, LeaderGaugeAndElectionCounters) {
  auto m = make();
  Feeder f(*m);
  const std::string leader = "baton_client_leader{prefix=\"svc\"}";
  f.event(EventKind::new_leader, "svc/billing");
  f.became_leader("svc/billing", 3);
  EXPECT_EQ(value_of(m->render(), leader), 1);
  f.event(EventKind::stopped_leading, "svc/billing");
  const std::string text = m->render();
  EXPECT_EQ(value_of(text, leader), 0);
  EXPECT_EQ(value_of(text, "baton_client_elections_won_total{prefix=\"svc\"}"),
            1);
  EXPECT_EQ(
      value_of(text, "baton_client_leadership_ended_total{prefix=\"svc\"}"), 1);
  EXPECT_EQ(value_of(text, "baton_client_leader_changes_total{prefix=\"svc\"}"),
            1);
}

TEST(Metrics, LabelValuesAreEscapedAndUtf8) {
  auto m = make();
  Feeder f(*m);
  f.granted("we\"ird\\pre\nfix/x", 1, 10s);
  f.granted("\xff\xfe/x", 1, 10s);
  const std::string text = m->render();
  EXPECT_NE(text.find("{prefix=\"we\\\"ird\\\\pre\\nfix\"}"), std::string::npos)
      << text;
  EXPECT_NE(text.find("{prefix=\"\xEF\xBF\xBD\xEF\xBF\xBD\"}"),
            std::string::npos);
}

TEST(Metrics, ThreadsFeedingAtOnceLoseNothing) {
  auto m = make();
  constexpr int kThreads = 6;
  // Small enough for ThreadSanitizer (scripts/test runs this test under
  // it), where 3,000 per thread and a reader rendering without a pause
  // took 147 s on 2 cores.
  constexpr int kPerThread = 500;
  std::atomic<bool> done{false};
  std::thread reader([&] {
    while (!done.load()) {
      (void)m->render();
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  });
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      Feeder f(*m);
      for (int i = 0; i < kPerThread; ++i) {
        const std::string name =
            "t" + std::to_string(i % 5) + "/" + std::to_string(t);
        const auto fencing = static_cast<std::uint64_t>(i + 1);
        f.wait_started(name);
        f.granted(name, fencing, 1h, 1ms);
        f.renewed(name, fencing, 1h);
        f.released(name, fencing, 1ms);
      }
    });
  }
  for (auto& th : threads) th.join();
  done = true;
  reader.join();
  const std::string text = m->render();
  double grants = 0, renewals = 0, held = 0, waiting = 0, count = 0;
  for (int p = 0; p < 5; ++p) {
    const std::string l = "{prefix=\"t" + std::to_string(p) + "\"}";
    grants += value_of(text, "baton_client_grants_total" + l);
    renewals += value_of(text, "baton_client_renewals_total" + l);
    held += value_of(text, "baton_client_leases_held" + l);
    waiting += value_of(text, "baton_client_waiting_requests" + l);
    count += value_of(text, "baton_client_hold_seconds_count{prefix=\"t" +
                                std::to_string(p) + "\",end=\"released\"}");
  }
  EXPECT_EQ(grants, kThreads * kPerThread);
  EXPECT_EQ(renewals, kThreads * kPerThread);
  EXPECT_EQ(count, kThreads * kPerThread);
  EXPECT_EQ(held, 0);
  EXPECT_EQ(waiting, 0);
}

TEST(Metrics, BadOptionsAreRefusedNamingTheField) {
  struct Case {
    const char* field;
    void (*spoil)(MetricsOptions&);
  };
  const Case cases[] = {
      {"prefix_separators",
       [](MetricsOptions& o) { o.prefix_separators = ""; }},
      {"prefix_segments", [](MetricsOptions& o) { o.prefix_segments = 0; }},
      {"prefix_segments", [](MetricsOptions& o) { o.prefix_segments = 65; }},
      {"max_prefixes", [](MetricsOptions& o) { o.max_prefixes = 0; }},
      {"wait_buckets", [](MetricsOptions& o) { o.wait_buckets = {}; }},
      {"wait_buckets",
       [](MetricsOptions& o) {
         o.wait_buckets = {1, 0.5};
       }},
      {"wait_buckets",
       [](MetricsOptions& o) {
         o.wait_buckets = {1, 1};
       }},
      {"hold_buckets", [](MetricsOptions& o) { o.hold_buckets = {-1}; }},
      {"hold_buckets",
       [](MetricsOptions& o) {
         o.hold_buckets = {1, std::numeric_limits<double>::infinity()};
       }},
  };
  for (const Case& c : cases) {
    MetricsOptions o;
    c.spoil(o);
    auto m = PrometheusMetrics::create(o);
    ASSERT_FALSE(m.ok()) << c.field;
    EXPECT_EQ(m.error().code(), Errc::invalid_argument);
    EXPECT_NE(
        m.error().message().find(std::string("MetricsOptions.") + c.field),
        std::string::npos)
        << m.error().message();
  }
  EXPECT_TRUE(PrometheusMetrics::create({}).ok());
}

TEST(Metrics, WriteFileIsAtomicAndNamesThePathOnError) {
  auto m = make();
  Feeder f(*m);
  f.granted("jobs/a", 1, 10s);
  const fs::path dir = fs::temp_directory_path() /
                       ("baton-metrics-test-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string path = (dir / "job.prom").string();
  ASSERT_TRUE(m->write_file(path).ok());
  std::ifstream in(path);
  std::stringstream got;
  got << in.rdbuf();
  EXPECT_EQ(got.str(), m->render());
  int files = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    (void)e;
    ++files;
  }
  EXPECT_EQ(files, 1) << "a temporary file was left";

  const std::string missing = (dir / "no-such-dir" / "job.prom").string();
  Status st = m->write_file(missing);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code(), Errc::invalid_argument);
  EXPECT_NE(st.error().message().find(missing), std::string::npos);
  EXPECT_NE(st.error().message().find("No such file or directory"),
            std::string::npos)
      << st.error().message();
  fs::remove_all(dir);
}

}  // namespace
}  // namespace baton::testing
