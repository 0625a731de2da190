// tests/torture/torture.h — shared types of the torture harness
// (docs/reliability.md): options, the worker's operation log, the guarded
// resource's write record, the nemesis' fault record, and the checkers.
//
// One binary, two modes. The orchestrator (run.cc) starts the store servers,
// the guarded resource (resource.cc) and ≥ 8 worker processes (worker.cc, the
// same binary with --worker), runs the nemesis (nemesis.cc) on a seeded
// schedule, then judges the logs (checkers.cc).
//
// Every timestamp is real CLOCK_REALTIME in microseconds read with a raw
// syscall (real_us()), so a worker under libfaketime still logs true times.
#ifndef BATON_TESTS_TORTURE_TORTURE_H_
#define BATON_TESTS_TORTURE_TORTURE_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace baton::torture {

using std::chrono::milliseconds;

// The true wall clock (bypasses LD_PRELOAD clock fakes).
std::int64_t real_us();

// A worker's hold, as the orchestrator reads it from the shared status
// page: the lock index (low 4 bits) plus these flags.
inline constexpr int kHoldKept = 16;    // a LeaseKeeper keeps the lease
inline constexpr int kHoldShared = 32;  // a shared hold: it reads only

struct Options {
  // batond|postgres|redis|redlock|zookeeper (memory: is refused)
  std::string store_kind = "batond";
  std::uint64_t seed = 0;         // 0 = pick one (printed)
  milliseconds duration{15'000};  // fault phase of one run
  int workers = 8;
  bool fencing = true;        // false: the resource accepts every write
  bool pause_longer = false;  // negative control: only long holder pauses
  bool clock_faults = true;   // libfaketime clock steps in workers
  bool proxy_faults = true;   // cut / blackhole / delay through TcpProxy
  bool disk_faults = true;    // batond: fiu write/fsync errors, full disk
  int minutes = 0;            // long mode: stop starting runs after this
  int runs = 1;               // long mode: at most this many runs
  bool json = false;          // one JSON object per run on stdout
  bool keep = false;          // keep the run directory
  std::string self;           // path of this binary (for workers)
  milliseconds ttl{1'000};    // lease TTL used by workers
  std::vector<std::string> only_faults;  // --faults a,b: only these kinds
  bool keep_on_violation = true;         // off for the negative control
  bool counters = true;  // the store offers Counter (not redlock://)
  // Negative control of checker 8 (test only): keeper holds use an
  // emulation of the old LeaseKeeper, whose lost notice waited for a
  // synchronous renewal call to return.
  bool late_notice = false;
  // Negative control of checker 9 (test only): shared holders also write,
  // half of the time (rule 18 forbids it; the resource must notice).
  bool shared_writes = false;
  // Negative control of checker 10 (test only, redlock): each worker is
  // given one master of the set as a plain redis:// store instead of the
  // whole set — clients that disagree on where the lock lives. One lock is
  // then granted to several workers at once.
  bool split_masters = false;
  // redlock: the store URL carries restart_guard = 3 × TTL (every master's
  // data marked old at start), and restart_empty restarts a master without
  // its data. --no-restart-guard turns the guard off, to see the double
  // grants it prevents (checker 10).
  bool restart_guard = true;
  int redlock_masters = 3;  // --redlock-masters N (3..9)
  // etcd, zookeeper3: each member in a network namespace of its own, and the
  // partition faults between members (partition_leader, partition_bridge,
  // partition_flap). Set by main when it can be (root, nftables, a store
  // the harness starts); --no-partitions turns it off.
  bool member_namespaces = false;
  // --store URL: a store already running elsewhere (not started, killed or
  // restarted here); store_kind is then the URL's scheme. Its lock and
  // counter names carry a per-run prefix (name_prefix), so runs do not
  // see each other's leftovers.
  std::string store_url;
  std::string name_prefix = "torture-";
};

// The prefix of every lock and counter name of this process (set by the
// orchestrator per run and passed to the workers).
void set_name_prefix(std::string prefix);
const std::string& name_prefix();

// Lock names and capacities used by every run.
struct LockSpec {
  std::string name;
  std::uint32_t capacity;
};
std::vector<LockSpec> lock_specs();  // under name_prefix()
std::string counter_name();          // under name_prefix()

// One line of a worker log (worker.cc writes, checkers.cc reads).
//   kind: acquire | try | extend | release | foreign_extend |
//         foreign_release | write | counter, and for keeper holds
//         (checker 8): deadline (invoke = observed, complete = the safe
//         deadline on real_us()), lost (on_lost ran), lost_seen (lost()
//         read true), deadline_passed (past the deadline, no notice yet)
struct Op {
  int worker = 0;  // incarnation id (unique per run)
  std::string kind;
  std::string lock;
  std::int64_t invoke_us = 0;
  std::int64_t complete_us = 0;  // 0 = never completed (process died)
  std::string result;            // ok | <errc name> | accepted | rejected ...
  std::uint64_t fencing = 0;
  std::int64_t expires_ms = 0;  // store_expires_at_ms of a granted lease
  std::int64_t wait_ms = -1;    // acquire: wait; counter: value
  std::uint64_t seq = 0;        // write/counter sequence number
  // write under a keeper: when the worker last checked its lease (real_us)
  // before this write; deadline_passed: the safe deadline then.
  std::int64_t aux = 0;
  // acquire: a shared (read) hold, rule 18. Shared holders of one lock
  // coexist, so checkers count them as one holder among themselves.
  bool shared = false;
};

// An operation that granted a lease (acquire, try or multi that succeeded).
inline bool is_grant(const Op& o) {
  return (o.kind == "acquire" || o.kind == "try" || o.kind == "multi") &&
         o.result == "ok";
}

// One write seen by the guarded resource.
struct Write {
  int worker = 0;
  std::uint64_t seq = 0;
  std::string lock;
  std::uint64_t fencing = 0;
  bool accepted = false;
  std::int64_t at_us = 0;
  // postgres runs: the SQL fenced_write's answer for the same write
  // ('A' accepted, 'R' rejected, '?' no answer, 0 not asked).
  char sql = 0;
  // Rule 18 (read-write locks): 'W' a write (in progress until the
  // writer's "E" line), 'D' a read by a shared holder.
  char verb = 'W';
  // A read that was accepted while a write was in progress: the writer
  // (worker id, else -1), its token and when its write began.
  int writer = -1;
  std::uint64_t writer_token = 0;
  std::int64_t write_begun_us = 0;
  // A write whose token a shared holder read with (a shared holder wrote).
  bool shared_writer = false;
};

// One fault the nemesis injected, with the time it started and healed.
struct Fault {
  std::string kind;
  int worker = -1;  // target worker incarnation, -1 = not a worker fault
  std::int64_t start_us = 0;
  std::int64_t end_us = 0;
  std::string detail;
};

struct Violation {
  std::string checker;
  std::string what;
};

struct Recovery {
  std::string lock;
  bool acquired = false;
  std::int64_t elapsed_ms = 0;
  std::int64_t bound_ms = 0;
  std::string error;  // why it was not acquired
};

struct Judged {
  std::vector<Violation> violations;
  std::map<std::string, std::int64_t> counts;  // ops, grants, writes ...
  // What is reported but fails nothing (checker 10's store overlaps that
  // fencing caught: one example per fault combination).
  std::vector<Violation> findings;
};

// Checkers 1–4, 6, 7, 9 over the logs (5 is measured live: run.cc).
Judged check_all(const Options& options, const std::vector<Op>& ops,
                 const std::vector<Write>& writes,
                 const std::vector<Fault>& faults, std::int64_t counter_final,
                 bool counter_known);

// Checker 8 (rules 13 and 14, the holder's side; checkers_holder.cc).
Judged check_holder(const Options& options, const std::vector<Op>& ops,
                    const std::vector<Fault>& faults);

// Whether the servers' wall clocks are stepped (nemesis
// server_clock_step; run.cc): with clock faults, on servers the harness
// starts, of a kind whose servers read the clock through libc (zookeeper,
// zookeeper3, redlock; etcd is Go), with libbaton_clockshift.so built.
bool server_clocks_on(const Options& o);

// Whether a server's wall clock was stepped (nemesis server_clock_step)
// at some time in [a, b], widened by the largest step (5 s) and a second
// more on each side: the store's clock then was not the real one, so an
// expiry the store reports on its clock is not comparable with real_us().
inline bool server_clock_stepped(const std::vector<Fault>& faults,
                                 std::int64_t a, std::int64_t b) {
  constexpr std::int64_t kSlack = 6'100'000;
  for (const Fault& f : faults) {
    if (f.kind == "server_clock_step" && a <= f.end_us + kSlack &&
        f.start_us - kSlack <= b) {
      return true;
    }
  }
  return false;
}

// Checker 10 (the store's own exclusion, from the grant records;
// checkers_store.cc).
Judged check_store_exclusion(const Options& options, const std::vector<Op>& ops,
                             const std::vector<Write>& writes,
                             const std::vector<Fault>& faults);

// Worker mode: runs until `stop_file` exists or `deadline_us` passes.
int worker_main(int argc, char** argv);

// Parses "v|k|lock|..." lines of one worker log.
// `bad_lines` counts lines that do not parse.
std::vector<Op> read_ops(const std::string& path, int* bad_lines);

}  // namespace baton::torture

#endif  // BATON_TESTS_TORTURE_TORTURE_H_
