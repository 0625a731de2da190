// bench/workloads.h — the workload runners behind run_load() (loadgen.h).
// Internal to the load generator; options are validated by run_load().
#ifndef BATON_BENCH_WORKLOADS_H_
#define BATON_BENCH_WORKLOADS_H_

#include <chrono>
#include <cstdio>
#include <string>

#include "baton/error.h"
#include "bench/loadgen.h"

namespace baton::bench {

// Time left until `deadline` on the steady clock (zero once passed).
inline std::chrono::milliseconds left_until(
    std::chrono::steady_clock::time_point deadline) {
  auto l = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
  return l.count() < 0 ? std::chrono::milliseconds(0) : l;
}

// `v` with one decimal, for reports.
inline std::string fmt(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

// uncontended, contended, handoff, fair, mixed (loop.cc).
Result<LoadResult> run_loop(const LoadOptions& o);
// The application scenarios microbatch and segments (scenarios.cc; see
// docs/benchmarks.md).
Result<LoadResult> run_microbatch(const LoadOptions& o);
Result<LoadResult> run_segments(const LoadOptions& o);

}  // namespace baton::bench

#endif  // BATON_BENCH_WORKLOADS_H_
