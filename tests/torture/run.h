// tests/torture/run.h — one seeded torture run, start to verdict.
#ifndef BATON_TESTS_TORTURE_RUN_H_
#define BATON_TESTS_TORTURE_RUN_H_

#include <map>
#include <string>
#include <vector>

#include "torture.h"

namespace baton::torture {

struct RunResult {
  std::uint64_t seed = 0;
  std::string store_kind;
  std::string error;  // the run could not be carried out (not a verdict)
  std::map<std::string, int> faults;  // by kind ("skip:<kind>" = skipped)
  std::vector<std::string> skip_reasons;
  std::int64_t violations = 0;
  std::vector<Violation> details;   // the first ones per checker
  std::vector<Violation> findings;  // reported, not failing (checker 10)
  std::map<std::string, std::int64_t> counts;
  std::vector<Recovery> recovery;
  std::int64_t worst_recovery_ms = 0;
  std::string dir;  // kept when there are violations or with --keep
};

RunResult run_once(const Options& options, std::uint64_t seed);

// Checker 10 on a kept run's directory (rejudge.cc); prints its counts and
// findings. Returns 0, or 2 if `dir` is not a run's directory.
int judge_store_dir(const Options& options, const std::string& dir);

}  // namespace baton::torture

#endif  // BATON_TESTS_TORTURE_RUN_H_
