#!/usr/bin/env bash
# tests/support/run_suites_concurrently.sh MAX BINARY — runs each test suite
# of the gtest BINARY in a process of its own, at most MAX at a time, and
# fails if any of them fails (or if the binary lists no suite).
#
# For test binaries whose suites mostly wait (leases running out, servers
# starting) and share nothing but the binary: one ctest slot then holds
# several waits at once instead of one after the other. Each process starts
# the servers its own suites use (a suite per store kind) and stops them at
# its exit. The output of every process is printed whole, one after the
# other, with the suite's name and exit status.
set -uo pipefail
max=$1
binary=$2
dir=$(mktemp -d /tmp/baton-suites.XXXXXX)
trap 'rm -rf "$dir"' EXIT

mapfile -t suites < <("$binary" --gtest_list_tests | sed -n 's/^\([A-Za-z0-9_]*\)\.$/\1/p')
if [[ ${#suites[@]} -eq 0 ]]; then
  echo "run_suites_concurrently: $binary lists no test suite" >&2
  exit 1
fi

start=$SECONDS
pids=()
for suite in "${suites[@]}"; do
  while (($(jobs -rp | wc -l) >= max)); do wait -n || true; done
  ("$binary" --gtest_filter="$suite.*" >"$dir/$suite.log" 2>&1
   echo $? >"$dir/$suite.rc") &
  pids+=($!)
done
wait

fail=0
for suite in "${suites[@]}"; do
  rc=$(cat "$dir/$suite.rc" 2>/dev/null || echo "no status")
  echo "=== $suite: exit $rc ==="
  cat "$dir/$suite.log"
  [[ $rc == 0 ]] || fail=1
done
echo "run_suites_concurrently: ${#suites[@]} suites, at most $max at once," \
  "$((SECONDS - start)) s"
for suite in "${suites[@]}"; do
  rc=$(cat "$dir/$suite.rc" 2>/dev/null || echo "no status")
  [[ $rc == 0 ]] || echo "FAILED suite: $suite (exit $rc)"
done
exit $fail
