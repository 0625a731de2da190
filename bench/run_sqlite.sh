#!/usr/bin/env bash
# bench/run_sqlite.sh — sqlite:// on one host against flock(2) on a file
# (raw-flock://, what flock(1) does) and against batond on the same host,
# in one run (docs/stores/sqlite.md, docs/benchmarks.md).
#
# For each of the three: uncontended pairs/s (1 client, its own lock),
# contended pairs/s (CLIENTS clients on one lock) and the handoff workload
# (2 clients, release -> next holder's grant p50). batond runs durable
# (--fsync always) like sqlite:// (WAL, synchronous=FULL); flock has no
# durability and no lease at all: it is the floor. Clients are threads of
# one baton_lockbench process, each with its own store connection (sqlite://:
# its own Client and SQLite connections; raw-flock: its own open file
# description per lock). Everything in a temp dir on the work disk; batond
# on a free loopback port, stopped by pid. Prints a Markdown table (also
# $WORK/report.md, raw JSON lines in $WORK/results.jsonl).
#
# Environment (defaults): BUILD_DIR=build-bench DURATION=3s CLIENTS=4
#   REPEATS=1  SKIP_BUILD=1 to use the binaries as they are.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD_DIR:-$ROOT/build-bench}
DURATION=${DURATION:-3s}
CLIENTS=${CLIENTS:-4}
REPEATS=${REPEATS:-1}
log() { echo "[run_sqlite] $*" >&2; }

if [[ -z ${SKIP_BUILD:-} ]]; then
  if [[ ! -f $BUILD/CMakeCache.txt ]]; then
    cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release \
      -DBATON_BUILD_BENCH=ON -DBATON_WITH_SQLITE=ON >&2
  fi
  cmake --build "$BUILD" -j2 --target batond baton_lockbench >&2
fi
BATOND=${BATOND:-$BUILD/bin/batond}
LOCKBENCH=$BUILD/bin/baton_lockbench
for b in "$BATOND" "$LOCKBENCH"; do
  [[ -x $b ]] || { log "missing $b"; exit 1; }
done
command -v jq >/dev/null || { log "missing jq (apt-get install jq)"; exit 1; }

WORK=$(mktemp -d "${TMPDIR:-/tmp}/baton-bench-sqlite.XXXXXX")
RESULTS=$WORK/results.jsonl
: >"$RESULTS"
log "work dir $WORK ($(df -P "$WORK" | awk 'NR==2 {print $1}'))"

BATOND_PID=
cleanup() {
  if [[ -n $BATOND_PID ]]; then
    kill -TERM "$BATOND_PID" 2>/dev/null || true
    wait "$BATOND_PID" 2>/dev/null || true
  fi
  rm -rf "$WORK/batond-data" "$WORK/flock" "$WORK"/locks.db*
}
trap cleanup EXIT
trap 'exit 130' INT TERM

mkdir -p "$WORK/batond-data" "$WORK/flock"
"$BATOND" --listen 127.0.0.1:0 --log-level warn --data-dir "$WORK/batond-data" \
  --fsync always >"$WORK/batond.log" 2>&1 &
BATOND_PID=$!
PORT=
for ((i = 0; i < 100; i++)); do
  PORT=$(sed -n 's/^batond ready port=\([0-9]*\).*/\1/p' "$WORK/batond.log" || true)
  [[ -n $PORT ]] && break
  kill -0 "$BATOND_PID" 2>/dev/null || break
  sleep 0.1
done
[[ -n $PORT ]] || { log "batond did not start:"; cat "$WORK/batond.log" >&2; exit 1; }

declare -A STORES=(
  [sqlite]="sqlite://$WORK/locks.db"
  [flock]="raw-flock://$WORK/flock"
  [batond]="baton://127.0.0.1:$PORT"
)
run() {  # label store workload clients
  local out rc=0
  out=$(timeout --kill-after=5 120 "$LOCKBENCH" --json --store "$2" \
    --workload "$3" --clients "$4" --locks 1 --duration "$DURATION") || rc=$?
  if [[ $rc -ne 0 || -z $out ]]; then
    log "$1 $3 failed (rc=$rc)"
    return
  fi
  jq -c --arg lbl "$1" '. + {"store_label": $lbl}' <<<"$out" >>"$RESULTS"
}
for ((rep = 1; rep <= REPEATS; rep++)); do
  for s in sqlite flock batond; do
    log "rep $rep: $s"
    run "$s" "${STORES[$s]}" uncontended 1
    run "$s" "${STORES[$s]}" contended "$CLIENTS"
    run "$s" "${STORES[$s]}" handoff 2
  done
done

{
  echo "| store | uncontended pairs/s (1 client) | contended pairs/s ($CLIENTS clients, 1 lock) | handoff p50 (2 clients) | handoff p99 |"
  echo "|---|---:|---:|---:|---:|"
  for s in sqlite flock batond; do
    jq -rs --arg s "$s" '
      def med: sort | if length == 0 then null else .[(length / 2 | floor)] end;
      def w($w): map(select(.store_label == $s and .workload == $w));
      "| \($s) | \(w("uncontended") | map(.pairs_per_sec) | med | floor)"
      + " | \(w("contended") | map(.pairs_per_sec) | med | floor)"
      + " | \(w("handoff") | map(.handoff.p50_us) | med) µs"
      + " | \(w("handoff") | map(.handoff.p99_us) | med) µs |"' "$RESULTS"
  done
  echo
  echo "DURATION=$DURATION REPEATS=$REPEATS CLIENTS=$CLIENTS, $(nproc) cores, $(df -P "$WORK" | awk 'NR==2 {print $1}'), $(date -u '+%F %H:%M UTC')"
} | tee "$WORK/report.md"
