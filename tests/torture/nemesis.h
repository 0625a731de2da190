// tests/torture/nemesis.h — faults at seeded times. The schedule (when,
// which kind, how long, how far) is a pure function of the seed, so
// `--seed S` replays it; which worker a fault hits depends on who holds a
// lock at that moment (chosen among the holders with the same seeded
// generator).
#ifndef BATON_TESTS_TORTURE_NEMESIS_H_
#define BATON_TESTS_TORTURE_NEMESIS_H_

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "tests/support/stores/store_cluster.h"
#include "torture.h"

namespace baton::torture {

// What the nemesis needs from the worker pool (run.cc).
class WorkerPool {
 public:
  virtual ~WorkerPool() = default;
  // Slots whose worker holds a lock now: {slot, lock index (+ kHoldKept
  // when a LeaseKeeper keeps that lease, + kHoldShared when it is shared)}.
  virtual std::vector<std::pair<int, int>> holders() const = 0;
  virtual int slots() const = 0;
  virtual pid_t pid(int slot) const = 0;
  virtual int incarnation(int slot) const = 0;
  // True if slot's worker runs under libfaketime. Those workers take
  // clock steps only: a SIGSTOP or kill -9 of a libfaketime process was
  // seen to stall the other libfaketime processes (docs/reliability.md).
  virtual bool clock_faked(int slot) const = 0;
  // Writes the libfaketime offset of slot's worker ("+0", "+3", "-2").
  virtual void set_clock(int slot, const std::string& offset) = 0;
};

struct Planned {
  std::int64_t at_ms = 0;  // from run start
  std::string kind;
  std::int64_t length_ms = 0;  // how long the fault lasts
  std::int64_t amount = 0;     // delay ms, clock step s, server index
  std::uint64_t pick = 0;      // chooses the target
};

// A number drawn evenly from [lo, hi].
inline std::int64_t between(std::mt19937_64& rng, std::int64_t lo,
                            std::int64_t hi) {
  return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
}

// The schedule for one run (pure function of options and seed; plan.cc).
std::vector<Planned> plan_faults(const Options& options, bool has_proxy,
                                 int servers, std::uint64_t seed);

// Executes `plan` from `start_us`; returns when every fault is healed (at
// the latest at start_us + duration, plus one server restart). Skipped
// faults (e.g. no tmpfs) are recorded with kind "skip:<kind>" and a reason.
std::vector<Fault> run_nemesis(const Options& options,
                               const std::vector<Planned>& plan,
                               testing::StoreCluster& store, WorkerPool& pool,
                               std::int64_t start_us);

}  // namespace baton::torture

#endif  // BATON_TESTS_TORTURE_NEMESIS_H_
