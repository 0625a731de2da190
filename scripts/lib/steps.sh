# scripts/lib/steps.sh — the step log, ctest runner and build configuration
# shared by scripts/test and scripts/test-sanitizers. Sourced; expects
# `set -euo pipefail` and the repository root as the working directory.

jobs=$(nproc)
fail=0
summary=()

# Each step's start is stamped with the seconds since the script began, and
# the summary lists how long each step took, so a CI log shows where a
# script's budget went.
step_name=""
step_start=0
timings=()
end_step() {
  if [[ -n "$step_name" ]]; then
    timings+=("$(printf '%5d s  %s' $((SECONDS - step_start)) "$step_name")")
  fi
  step_name=""
}
step() {
  end_step
  step_name=$*
  step_start=$SECONDS
  echo; echo "=== $* (at ${SECONDS} s) ==="
}

total_pass=0
total_fail=0
run_ctest() {  # run_ctest NAME BUILD_DIR [ctest args...]
  local name=$1 dir=$2
  shift 2
  local log="$dir/ctest.log"
  if ctest --test-dir "$dir" --output-on-failure --no-tests=error --timeout 600 "$@" 2>&1 | tee "$log"; then
    summary+=("$name: $(grep -E 'tests passed|No tests were found' "$log" | tail -1)")
  else
    fail=1
    summary+=("$name: FAILED — $(grep -E 'tests passed' "$log" | tail -1)")
  fi
  # "NN% tests passed, F tests failed out of T"
  local line f t
  line=$(grep -E 'tests failed out of' "$log" | tail -1 || true)
  if [[ -n "$line" ]]; then
    f=$(sed -E 's/.* ([0-9]+) tests failed out of ([0-9]+).*/\1/' <<<"$line")
    t=$(sed -E 's/.* ([0-9]+) tests failed out of ([0-9]+).*/\2/' <<<"$line")
    total_fail=$((total_fail + f))
    total_pass=$((total_pass + t - f))
  fi
}

# configure DIR CMAKE_ARGS...: the builds of these scripts use Ninja, lld and
# line-table debug info (-g1: file:line in sanitizer reports and gdb
# backtraces, without the full -g that made the three builds 28 of a
# 43-minute run on 2026-11-25). A directory configured earlier with another
# generator is configured anew.
configure() {
  local dir=$1
  shift
  local gen=() link=()
  command -v ninja >/dev/null && gen=(-G Ninja)
  command -v ld.lld >/dev/null &&
    link=(-DCMAKE_EXE_LINKER_FLAGS=-fuse-ld=lld -DCMAKE_SHARED_LINKER_FLAGS=-fuse-ld=lld)
  if [[ -f "$dir/CMakeCache.txt" ]]; then
    local want=${gen[1]:-Unix Makefiles}
    grep -qx "CMAKE_GENERATOR:INTERNAL=$want" "$dir/CMakeCache.txt" || rm -rf "$dir"
  fi
  cmake -S . -B "$dir" "${gen[@]}" "${link[@]}" \
    "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG" \
    "-DCMAKE_CXX_FLAGS_DEBUG=-g1" "$@" >/dev/null
}

# The main and the ASan build are unity builds (up to 16 sources of a
# target per translation unit: the headers of gtest, asio, gRPC and spdlog
# are parsed once per batch, not once per file). The TSan build is not, so
# every library source still compiles on its own, and a missing #include
# cannot hide behind another file's.
unity=(-DCMAKE_UNITY_BUILD=ON -DCMAKE_UNITY_BUILD_BATCH_SIZE=16)

# finish SCRIPT: prints the summary and the time of each step, and exits
# non-zero when any step failed.
finish() {
  end_step
  echo
  echo "=== summary ==="
  printf '%s\n' "${summary[@]}"
  echo "time per step (total ${SECONDS} s):"
  printf '  %s\n' "${timings[@]}"
  echo "tests: $total_pass passed, $total_fail failed"
  if [[ $fail -ne 0 ]]; then
    echo "$1: FAILED"
    exit 1
  fi
  echo "$1: all passed"
}
