// bench/loadgen.h — the lock load generator behind `baton bench` (the CLI)
// and `baton_lockbench`. Every run is bounded by its duration and stops
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
//     client library's. These two support only uncontended (and hold);
//   raw-zk://host:port[?check=children] — the ZooKeeper floor (raw_zk.h):
//     libzookeeper-mt, one session per client, create + delete of an
//     ephemeral sequential node per pair, the lock recipe (getChildren +
//     a watch on the node ahead) when contended; uncontended, contended,
//     handoff and fair. Built with BATON_WITH_ZOOKEEPER.
//   raw-flock:///dir — the one-host floor (raw_flock.h): flock(2) on a
//     file per lock, like flock(1); uncontended, contended, handoff, fair.
//
// Workloads:
//   uncontended  each client try_acquire+release on its own lock;
//   contended    N clients on K locks (client i uses lock i % K), blocking
//                acquire then release at once; handoffs are measured from a
//                holder's release to the next waiter's grant;
//   handoff      ping-pong on one lock: a holder waits until another client
//                is parked in the queue, timestamps its release, and the
//                waiter timestamps its grant (steady_clock, one process);
//   fair         N clients contend on one lock (blocking acquire, hold
//                --hold, release); the per-client grant counts give the
//                Jain fairness index, the longest single wait the worst wait;
//   mixed        per iteration, from a per-client seeded RNG: 60% try_acquire
//                + release of the client's own lock; 25% blocking acquire
//                of one of K shared locks, one extend, release; 15%
//                try_acquire of a shared lock (busy is counted, not an
//                error) and release if granted;
//   microbatch   the micro-batch scheduler's scenario (scenarios.cc): a
//                frequent "recent" process and a rare "late" one over 100
//                namespace locks; FIFO acquire_some against try-lock
//                polling, one half each;
//   segments     the guarded-counter scenario (scenarios.cc): 50x100
//                read-modify-writes under one center lock, then 100 segments;
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
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "baton/error.h"
#include "baton/observer.h"

namespace baton::bench {

enum class Workload {
  uncontended,
  contended,
  handoff,
  fair,
  mixed,
  microbatch,
  segments,
  hold,
  waiters
};

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
  std::chrono::microseconds hold{0};  // time a grant is held before release
  // Called about once a second from the thread that called run_load()
  // (closed-loop workloads only): seconds elapsed, pairs and errors so far.
  std::function<void(double, std::uint64_t, std::uint64_t)> progress;
  // Given to every client of the run (ClientOptions::observer): the A/B of
  // the observer's cost (`baton bench --metrics-file`).
  std::shared_ptr<Observer> observer;
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
  std::uint64_t busy = 0;  // mixed: try_acquire of a shared lock refused
  // Grants per client: Jain index (sum x)^2 / (n * sum x^2), 1 = all equal.
  double jain = 0;
  std::uint64_t min_client_pairs = 0, max_client_pairs = 0;
  // Longest single wait for a grant, including a wait still unanswered
  // when the run ended (a starving client shows here).
  double worst_wait_ms = 0;
  // microbatch / segments: their own figures, as a JSON object and as text.
  std::string scenario_json, scenario_text;
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

// Jain's fairness index of per-client counts (0 if empty or all zero).
double jain_index(const std::vector<std::uint64_t>& counts);

// VmRSS of a process in KiB from /proc/PID/status, -1 if unreadable.
std::int64_t read_rss_kb(int pid);

}  // namespace baton::bench

#endif  // BATON_BENCH_LOADGEN_H_
