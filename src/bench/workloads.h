// bench/workloads.h — the workload runners behind run_load() (loadgen.h).
// Internal to the load generator; options are validated by run_load().
#ifndef BATON_BENCH_WORKLOADS_H_
#define BATON_BENCH_WORKLOADS_H_

#include "baton/error.h"
#include "bench/loadgen.h"

namespace baton::bench {

// uncontended, contended, handoff, fair, mixed (loop.cc).
Result<LoadResult> run_loop(const LoadOptions& o);
// The application scenarios microbatch and segments (scenarios.cc; see
// docs/benchmarks.md).
Result<LoadResult> run_microbatch(const LoadOptions& o);
Result<LoadResult> run_segments(const LoadOptions& o);

}  // namespace baton::bench

#endif  // BATON_BENCH_WORKLOADS_H_
