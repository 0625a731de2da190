// bench/loadgen.h — the lock load generator behind `baton_lockbench` (and,
// later, `baton bench`). Every run is bounded by its duration and stops
// itself; nothing here loops without a deadline.
//
// Stores:
//   any baton store URL (baton://, memory:, redis://, ...) — driven through
//     baton::Client, one Client (own connection pool) per simulated client;
//   raw-redis://host:port[?script=eval|evalsha] — the baseline: hiredis on one
//     connection per client, `SET key tok NX PX ttl` then a Lua
//     compare-and-delete (EVAL by default, or EVALSHA of the loaded script);
//   raw-baton://host:port — batond over the same hiredis harness
//     (LOCK.ACQUIRE / LOCK.RELEASE), to tell the server's cost from the
//     client library's. The raw stores support only uncontended.
//
// Workloads:
//   uncontended  each client try_acquire+release on its own lock;
//   contended    N clients on K locks (client i uses lock i % K), blocking
//                acquire then release at once; handoffs are measured from a
//                holder's release to the next waiter's grant;
//   handoff      ping-pong on one lock: a holder waits until another client
//                is parked in the queue, timestamps its release, and the
//                waiter timestamps its grant (steady_clock, one process);
//   hold         holds --locks leases with a long TTL, pipelined over
//                --clients raw RESP connections, and reads the server's RSS
//                (VmRSS of --server-pid) before and after (baton:// or
//                raw-redis:// only);
//   waiters      one holder, then --clients connections each park a blocking
//                LOCK.ACQUIRE on the same lock; measures the time to enqueue
//                them all (INFO waiters) and to drain them through handoffs
//                (each grant is released at once) (baton:// only).
//
// Thread safety: run_load() may be called from one thread at a time.
#ifndef BATON_BENCH_LOADGEN_H_
#define BATON_BENCH_LOADGEN_H_

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "baton/error.h"

namespace baton::bench {

enum class Workload { uncontended, contended, handoff, hold, waiters };

Result<Workload> parse_workload(std::string_view text);
const char* workload_name(Workload w);

struct LoadOptions {
  std::string store = "baton://127.0.0.1:7420";
  Workload workload = Workload::uncontended;
  int clients = 1;         // simulated clients / connections / waiters
  std::int64_t locks = 1;  // contended: K locks; hold: how many leases
  std::chrono::milliseconds duration{10'000};  // hard bound of the run
  std::chrono::milliseconds ttl{30'000};       // lease TTL
  std::string prefix;     // lock-name prefix; empty = "bench/<pid>"
  int server_pid = 0;     // hold: read this process's VmRSS (0 = skip)
  bool no_label = false;  // hold: send no LABEL (default "host:pid:prog")
};

// Latency summary in microseconds.
struct Latency {
  std::uint64_t count = 0;
  double mean_us = 0, p50_us = 0, p90_us = 0, p99_us = 0, max_us = 0;
};

// Summarizes samples given in nanoseconds (reorders them).
Latency summarize(std::vector<std::uint64_t>* samples_ns);

struct LoadResult {
  std::string store;  // URL with secrets masked
  Workload workload = Workload::uncontended;
  int clients = 0;
  std::int64_t locks = 0;
  double seconds = 0;       // measured interval
  std::uint64_t pairs = 0;  // acquire+release pairs completed
  double pairs_per_sec = 0;
  Latency acquire;  // request sent -> grant received (includes waiting)
  Latency handoff;  // holder's release sent -> next holder's grant
  std::uint64_t errors = 0;
  std::string first_error;
  // hold
  std::int64_t rss_before_kb = -1, rss_after_kb = -1;
  double bytes_per_lock = 0;
  // waiters
  double connect_ms = 0, enqueue_ms = 0, drain_ms = 0;
  bool completed = true;  // false if the run hit its deadline unfinished
};

// Runs one workload. Fails only for bad options or if the store cannot be
// reached at all; errors during the run are counted in the result.
Result<LoadResult> run_load(const LoadOptions& options);

std::string to_json(const LoadResult& r);
std::string to_text(const LoadResult& r);

// VmRSS of a process in KiB from /proc/PID/status, -1 if unreadable.
std::int64_t read_rss_kb(int pid);

}  // namespace baton::bench

#endif  // BATON_BENCH_LOADGEN_H_
