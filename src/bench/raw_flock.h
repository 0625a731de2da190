// bench/raw_flock.h — raw-flock://, the floor of a lock between processes
// of one host: flock(2) on a file, what `flock(1)` does, with nothing of
// baton (no TTL, no fencing token, no queue order, no status).
//
//   raw-flock:///dir       lock `name` is the file <dir>/<name, '/' as '_'>
//
// One open file description per lock per simulated client (flock locks
// belong to it, so threads of one process contend like processes).
//   try_acquire  flock(LOCK_EX | LOCK_NB)
//   acquire      flock(LOCK_EX), blocking (flock has no timeout: a wait
//                ends when the holder releases, as at the end of a run)
//   release      flock(LOCK_UN)
//   waiters      clients of this process blocked in acquire (the kernel
//                does not say; the handoff workload only needs "someone")
// Workloads: uncontended, contended, handoff and fair.
//
// Thread safety: one session per thread (like every Session).
#ifndef BATON_BENCH_RAW_FLOCK_H_
#define BATON_BENCH_RAW_FLOCK_H_

#include <memory>
#include <string_view>

#include "baton/error.h"
#include "bench/loadgen.h"
#include "bench/session.h"

namespace baton::bench {

bool is_raw_flock(std::string_view url);
Result<std::unique_ptr<Session>> open_raw_flock_session(const LoadOptions& o);

}  // namespace baton::bench

#endif  // BATON_BENCH_RAW_FLOCK_H_
