#!/usr/bin/env bash
# bench/run_batond.sh — batond benchmarks against raw Redis, one command.
#
# Starts private servers on loopback (batond on a free port with a temp data
# dir; redis-server with --save '' --appendonly no), runs every benchmark of
# docs/benchmarks.md REPEATS times, stops the servers by pid and prints a
# Markdown report (also written to $WORK/report.md with the raw JSON lines in
# $WORK/results.jsonl). Every run is bounded (the tool's --duration plus
# `timeout`); nothing listens beyond 127.0.0.1.
#
# Environment (defaults):
#   BUILD_DIR=build-bench  DURATION=5s  REPEATS=3  CLIENTS="1 50"
#   HOLD_LOCKS=1000000  WAITERS="1000 5000 10000"
#   SECTIONS="tput durable hold waiters" (which parts to run)
#   SKIP_BUILD=1 to use the binaries as they are; BATOND=path to another batond.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD_DIR:-$ROOT/build-bench}
DURATION=${DURATION:-5s}
REPEATS=${REPEATS:-3}
CLIENTS=${CLIENTS:-"1 50"}
HOLD_LOCKS=${HOLD_LOCKS:-1000000}
WAITERS=${WAITERS:-"1000 5000 10000"}
SECTIONS=${SECTIONS:-"tput durable hold waiters"}
want() { [[ " $SECTIONS " == *" $1 "* ]]; }
PY=/usr/bin/python3

log() { echo "[run_batond] $*" >&2; }

# Install what is missing (build deps, redis-server, jq), like scripts/test.
# shellcheck source=../scripts/lib/deps.sh
source "$ROOT/scripts/lib/deps.sh"
baton_install_packages "${BATON_BUILD_PACKAGES[@]}" redis-server jq >&2

if [[ -z ${SKIP_BUILD:-} ]]; then
  if [[ ! -f $BUILD/CMakeCache.txt ]]; then
    cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release \
      -DBATON_BUILD_BENCH=ON >&2
  fi
  cmake --build "$BUILD" -j2 --target batond baton_lockbench >&2
fi
BATOND=${BATOND:-$BUILD/bin/batond}
LOCKBENCH=$BUILD/bin/baton_lockbench
for b in "$BATOND" "$LOCKBENCH"; do
  [[ -x $b ]] || { log "missing $b"; exit 1; }
done
for t in redis-server redis-cli redis-benchmark jq timeout; do
  command -v "$t" >/dev/null || { log "missing $t (apt-get install redis-server redis-tools jq)"; exit 1; }
done

WORK=$(mktemp -d "${TMPDIR:-/tmp}/baton-bench.XXXXXX")
RESULTS=$WORK/results.jsonl
: >"$RESULTS"
log "batond $BATOND built $(date -u -r "$BATOND" '+%F %H:%M UTC'); sources now sha256 $(cat "$ROOT"/src/server/*.cc "$ROOT"/src/server/*.h | sha256sum | cut -c1-12)"
log "work dir $WORK ($(df -P "$WORK" | awk 'NR==2 {print $1}'))"
# Seconds in a duration like 500ms, 5s, 2m (rounded up).
dur_s() {
  case $1 in
    *ms) echo $((${1%ms} / 1000 + 1)) ;;
    *s) echo "${1%s}" ;;
    *m) echo $((${1%m} * 60)) ;;
    *) echo 60 ;;
  esac
}

PIDS=()
stop_pid() {  # pid: SIGTERM, then SIGKILL after 10 s; forget the pid
  local pid=$1 i keep=() p
  for p in "${PIDS[@]}"; do [[ $p == "$pid" ]] || keep+=("$p"); done
  PIDS=("${keep[@]}")
  kill -TERM "$pid" 2>/dev/null || return 0
  for ((i = 0; i < 100; i++)); do
    kill -0 "$pid" 2>/dev/null || { wait "$pid" 2>/dev/null || true; return 0; }
    sleep 0.1
  done
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}
cleanup() {
  local p
  for p in "${PIDS[@]}"; do stop_pid "$p"; done
  rm -rf "$WORK"/data-* "$WORK"/redis.*/dump.rdb
}
trap cleanup EXIT
trap 'exit 130' INT TERM

N=0
# start_batond FLAGS... -> BATOND_PID, BATOND_PORT
start_batond() {
  N=$((N + 1))
  local logf=$WORK/batond.$N.log i
  : >"$logf"
  "$BATOND" --listen 127.0.0.1:0 --log-level warn "$@" >"$logf" 2>&1 &
  BATOND_PID=$!
  PIDS+=("$BATOND_PID")
  for ((i = 0; i < 100; i++)); do
    BATOND_PORT=$(sed -n 's/^batond ready port=\([0-9]*\).*/\1/p' "$logf" || true)
    [[ -n $BATOND_PORT ]] && return 0
    kill -0 "$BATOND_PID" 2>/dev/null || break
    sleep 0.1
  done
  log "batond did not start:"; cat "$logf" >&2; exit 1
}
stop_batond() { stop_pid "$BATOND_PID"; }

free_port() {  # a loopback port nobody listens on
  local p
  for _ in $(seq 1 100); do
    p=$((20000 + RANDOM % 20000))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
      echo "$p"
      return 0
    fi
  done
  return 1
}
# start_redis -> REDIS_PID, REDIS_PORT
start_redis() {
  N=$((N + 1))
  local dir=$WORK/redis.$N i
  mkdir -p "$dir"
  REDIS_PORT=$(free_port)
  redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --dir "$dir" \
    --save '' --appendonly no --daemonize no --logfile "$dir/redis.log" \
    >/dev/null 2>&1 &
  REDIS_PID=$!
  PIDS+=("$REDIS_PID")
  for ((i = 0; i < 100; i++)); do
    [[ $(redis-cli -p "$REDIS_PORT" ping 2>/dev/null) == PONG ]] && return 0
    sleep 0.1
  done
  log "redis-server did not start"; exit 1
}
stop_redis() { stop_pid "$REDIS_PID"; }

# bench CASE REP LOCKBENCH-ARGS... : one bounded run, one JSON line.
bench() {
  local case=$1 rep=$2 out rc=0 a prev="" bound=60
  shift 2
  for a in "$@"; do
    [[ $prev == --duration ]] && bound=$(dur_s "$a")
    prev=$a
  done
  # The tool stops itself at --duration; this is only a safety net.
  out=$(timeout --kill-after=5 $((bound + 90)) "$LOCKBENCH" --json "$@") || rc=$?
  if [[ -z $out ]]; then
    log "FAILED ($rc): $case: lockbench $*"
    out='{"errors":1,"first_error":"run failed","completed":false}'
  fi
  echo "$out" | jq -c --arg c "$case" --argjson r "$rep" '. + {case: $c, rep: $r}' >>"$RESULTS"
  log "$case #$rep: $(echo "$out" | jq -c '{pairs_per_sec, p50: .acquire.p50_us, hp50: .handoff.p50_us, errors}')"
}

# rbench CASE REP CLIENTS REQUESTS PORT CMD... : redis-benchmark, rps only.
rbench() {
  local case=$1 rep=$2 c=$3 n=$4 port=$5 out rps
  shift 5
  out=$(timeout --kill-after=5 120 redis-benchmark -h 127.0.0.1 -p "$port" \
    -c "$c" -n "$n" -r 1000000 --csv "$@" 2>/dev/null | tail -1) || true
  rps=$(echo "$out" | awk -F'","' '{print $2}')
  [[ $rps =~ ^[0-9.]+$ ]] || rps=0
  jq -nc --arg c "$case" --argjson r "$rep" --argjson rps "$rps" \
    '{case: $c, rep: $r, rps: $rps}' >>"$RESULTS"
  log "$case #$rep: $rps req/s"
}

LUA_PAIR="local t = ARGV[1] if redis.call('set', KEYS[1], t, 'NX', 'PX', 30000) then if redis.call('get', KEYS[1]) == t then return redis.call('del', KEYS[1]) end end return 0"
TOKEN=0123456789abcdef0123456789abcdef

for ((rep = 1; rep <= REPEATS; rep++)); do
  log "=== repetition $rep of $REPEATS"
  # 1. Throughput and handoff: batond without persistence vs raw Redis.
  if want tput; then
  start_batond --data-dir ''
  start_redis
  B=baton://127.0.0.1:$BATOND_PORT
  R=raw-redis://127.0.0.1:$REDIS_PORT
  for c in $CLIENTS; do
    bench "u/batond/$c" "$rep" --store "$B" --clients "$c" --duration "$DURATION"
    bench "u/batond-raw/$c" "$rep" --store "raw-baton://127.0.0.1:$BATOND_PORT" --clients "$c" --duration "$DURATION"
    bench "u/redis-eval/$c" "$rep" --store "$R?script=eval" --clients "$c" --duration "$DURATION"
    bench "u/redis-evalsha/$c" "$rep" --store "$R?script=evalsha" --clients "$c" --duration "$DURATION"
  done
  bench "handoff/batond/2" "$rep" --store "$B" --workload handoff --clients 2 --duration "$DURATION"
  bench "contended/batond/50x1" "$rep" --store "$B" --workload contended --clients 50 --locks 1 --duration "$DURATION"
  bench "contended/batond/50x10" "$rep" --store "$B" --workload contended --clients 50 --locks 10 --duration "$DURATION"
  # redis-benchmark for reference: the pair as one EVAL, and single commands.
  for c in $CLIENTS; do
    n=$((c == 1 ? 20000 : 200000))
    rbench "rb/redis-eval-pair/$c" "$rep" "$c" "$n" "$REDIS_PORT" \
      EVAL "$LUA_PAIR" 1 "k:__rand_int__" "$TOKEN"
    rbench "rb/redis-setnx/$c" "$rep" "$c" "$n" "$REDIS_PORT" \
      SET "k:__rand_int__" "$TOKEN" NX PX 30000
    rbench "rb/batond-acquire/$c" "$rep" "$c" "$n" "$BATOND_PORT" \
      LOCK.ACQUIRE "k:__rand_int__" "$TOKEN" 30000
  done
  stop_redis
  stop_batond
  fi

  # 2. Durability policies, data dir on the disk under $WORK.
  want durable && for policy in never batch always; do
    start_batond --data-dir "$WORK/data-$policy-$rep" --fsync "$policy"
    B=baton://127.0.0.1:$BATOND_PORT
    for c in $CLIENTS; do
      bench "durable/$policy/u/$c" "$rep" --store "$B" --clients "$c" --duration "$DURATION"
    done
    bench "durable/$policy/handoff" "$rep" --store "$B" --workload handoff --clients 2 --duration "$DURATION"
    stop_batond
  done

  # 3. Memory: 1M held locks (default config: fsync batch, data dir).
  if want hold; then
  start_batond --data-dir "$WORK/data-hold-$rep"
  bench "hold/batond" "$rep" --store "baton://127.0.0.1:$BATOND_PORT" --workload hold \
    --locks "$HOLD_LOCKS" --clients 4 --ttl 1h --duration 300s --server-pid "$BATOND_PID"
  stop_batond
  start_batond --data-dir "$WORK/data-holdnl-$rep"
  bench "hold/batond-nolabel" "$rep" --store "baton://127.0.0.1:$BATOND_PORT" --workload hold \
    --locks "$HOLD_LOCKS" --clients 4 --ttl 1h --duration 300s --server-pid "$BATOND_PID" --no-label
  stop_batond
  start_batond --data-dir ''
  bench "hold/batond-nopersist" "$rep" --store "baton://127.0.0.1:$BATOND_PORT" --workload hold \
    --locks "$HOLD_LOCKS" --clients 4 --ttl 1h --duration 300s --server-pid "$BATOND_PID"
  stop_batond
  start_redis
  bench "hold/redis" "$rep" --store "raw-redis://127.0.0.1:$REDIS_PORT" --workload hold \
    --locks "$HOLD_LOCKS" --clients 4 --ttl 1h --duration 300s --server-pid "$REDIS_PID"
  stop_redis
  fi

  # 4. Many waiters on one lock (no persistence: measures the queue).
  want waiters && for w in $WAITERS; do
    start_batond --data-dir '' --max-connections $((w + 100))
    bench "waiters/$w" "$rep" --store "baton://127.0.0.1:$BATOND_PORT" --workload waiters \
      --clients "$w" --duration 120s
    stop_batond
  done
  rm -rf "$WORK"/data-*-"$rep"
done

{
  echo "- machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(free -g | awk '/Mem:/ {print $2}') GiB RAM, kernel $(uname -r)"
  echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC'); load average before the report: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "- baton: $(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo unknown), src/server sources sha256 $(cat "$ROOT"/src/server/*.cc "$ROOT"/src/server/*.h | sha256sum | cut -c1-12) (at report time), batond binary $(date -u -r "$BATOND" '+%H:%M UTC') sha256 $(sha256sum "$BATOND" | cut -c1-12); $(redis-server --version | cut -d' ' -f1-3); $(dpkg-query -W -f='hiredis ${Version}' libhiredis-dev 2>/dev/null || true)"
  echo "- command: DURATION=$DURATION REPEATS=$REPEATS CLIENTS=\"$CLIENTS\" HOLD_LOCKS=$HOLD_LOCKS WAITERS=\"$WAITERS\" SECTIONS=\"$SECTIONS\" bench/run_batond.sh"
  echo
  "$PY" "$ROOT/bench/report.py" "$RESULTS"
} | tee "$WORK/report.md"
log "report: $WORK/report.md, raw results: $RESULTS"
