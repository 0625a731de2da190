// cli/cmd_bench.cc — `baton bench`: the lock load generator (src/bench) on
// any store: pairs/s, acquire and handoff latency, fairness, worst wait.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>
#include <thread>

#include "baton/metrics.h"
#include "bench/loadgen.h"
#include "cli/cli.h"

namespace baton::cli {

namespace {

using std::chrono::milliseconds;

struct BenchFlags {
  std::string workload = "uncontended";
  int clients = 1;  // if not given: handoff 2, fair 10, else 1
  CLI::Option* clients_option = nullptr;
  std::int64_t locks = 1;
  std::string duration = "10s";
  std::string ttl = "30s";
  std::string hold = "0";
  std::string prefix;
  int server_pid = 0;
  bool no_label = false;
  bool json = false;
  std::string metrics_file;
};

int do_bench(const Globals& globals, const BenchFlags& flags) {
  bench::LoadOptions o;
  o.store = globals.store;
  auto workload = bench::parse_workload(flags.workload);
  if (!workload) return report(workload.error());
  o.workload = *workload;
  auto duration = parse_duration_flag("--duration", flags.duration, false);
  if (!duration) return report(duration.error());
  auto ttl = parse_duration_flag("--ttl", flags.ttl, false);
  if (!ttl) return report(ttl.error());
  auto hold = parse_duration_flag("--hold", flags.hold, false);
  if (!hold) return report(hold.error());
  if (flags.clients_option->count() == 0) {
    o.clients = o.workload == bench::Workload::handoff ? 2
                : o.workload == bench::Workload::fair  ? 10
                                                       : 1;
  } else if (flags.clients < 1) {
    return report(Errc::invalid_argument, "--clients must be at least 1, got " +
                                              std::to_string(flags.clients));
  } else {
    o.clients = flags.clients;
  }
  o.locks = flags.locks;
  o.duration = *duration;
  o.ttl = *ttl;
  o.hold = std::chrono::duration_cast<std::chrono::microseconds>(*hold);
  o.prefix = flags.prefix;
  o.server_pid = flags.server_pid;
  o.no_label = flags.no_label;
  if (o.ttl <= o.hold) {
    return report(Errc::invalid_argument,
                  "--hold must be shorter than --ttl, or leases expire while "
                  "held");
  }
  if (isatty(STDERR_FILENO) && o.workload != bench::Workload::hold &&
      o.workload != bench::Workload::waiters) {
    o.progress = [](double secs, std::uint64_t pairs, std::uint64_t errors) {
      char line[160];
      std::snprintf(line, sizeof line,
                    "\r\033[K%6.1f s  %10llu pairs  %10.0f pairs/s  %llu "
                    "errors",
                    secs, static_cast<unsigned long long>(pairs),
                    secs > 0 ? static_cast<double>(pairs) / secs : 0.0,
                    static_cast<unsigned long long>(errors));
      std::cerr << line << std::flush;
    };
  }
  // Safety net: every run stops itself at its deadline (segments has two
  // phases of --duration each); if a store never answers, give up later.
  const auto limit = o.duration * 2 + std::chrono::seconds(60);
  std::thread([limit] {
    std::this_thread::sleep_for(limit);
    std::fprintf(stderr, "\nbaton: internal: bench did not finish in time\n");
    std::_Exit(kExitInternal);
  }).detach();

  std::shared_ptr<PrometheusMetrics> metrics;
  if (!flags.metrics_file.empty()) {
    metrics = std::make_shared<PrometheusMetrics>();
    o.observer = metrics;
  }
  auto result = bench::run_load(o);
  if (o.progress) std::cerr << "\r\033[K" << std::flush;
  if (!result) return report(result.error());
  if (metrics) {
    if (auto written = metrics->write_file(flags.metrics_file); !written) {
      return report(written.error());
    }
  }
  std::cout << (flags.json ? bench::to_json(*result) + "\n"
                           : bench::to_text(*result))
            << std::flush;
  return result->completed ? kExitOk : kExitFailure;
}

}  // namespace

Command add_bench_command(CLI::App& app, const Globals& globals) {
  auto flags = std::make_shared<BenchFlags>();
  CLI::App* sub = app.add_subcommand(
      "bench",
      "Load-test a store: acquire+release pairs/s, acquire and handoff "
      "latency, fairness (Jain index) and worst wait. Bounded by --duration.");
  sub->add_option("--workload", flags->workload,
                  "uncontended | contended | handoff | fair | mixed | "
                  "microbatch | segments | hold | waiters (docs/cli.md)")
      ->capture_default_str();
  flags->clients_option =
      sub->add_option("--clients", flags->clients,
                      "Simulated clients, one connection each (default 1; "
                      "handoff 2; fair 10)");
  sub->add_option("--locks", flags->locks,
                  "Shared locks (contended, mixed); leases to hold (hold)")
      ->capture_default_str();
  sub->add_option("--duration", flags->duration,
                  "How long the run lasts (it stops itself)")
      ->capture_default_str();
  sub->add_option("--ttl", flags->ttl, "Lease TTL")->capture_default_str();
  sub->add_option("--hold", flags->hold,
                  "How long each grant is held before release")
      ->capture_default_str();
  sub->add_option("--prefix", flags->prefix,
                  "Lock-name prefix (default bench/<pid>)");
  sub->add_option("--server-pid", flags->server_pid,
                  "hold: read this process's VmRSS before and after");
  sub->add_flag("--no-label", flags->no_label, "hold: acquire without LABEL");
  sub->add_flag("--json", flags->json, "Print one JSON object");
  sub->add_option("--metrics-file", flags->metrics_file,
                  "Observe every call with the Prometheus metrics and write "
                  "them here at the end (the observer's cost: bench/ab.sh "
                  "NEW_ARGS)");
  return {sub, [flags, &globals] { return do_bench(globals, *flags); }};
}

}  // namespace baton::cli
