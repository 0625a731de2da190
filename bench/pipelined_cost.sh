#!/bin/bash
# bench/pipelined_cost.sh — server CPU per request under pipelined load:
# redis-benchmark -c 50 -P 16 -r 100000 sends
#   LOCK.ACQUIRE k:<rand> <token> 30000      to batond (each binary given)
#   LOCK.ACQUIRE k:<rand> <token> 30000 BRIEF   the same, as the baton://
#                                            client sends it (the short
#                                            grant reply; skipped for a
#                                            batond without BRIEF, or with
#                                            NO_BRIEF=1)
#   SET k:<rand> <token> NX PX 30000         to redis-server
# with a fresh server per run (no persistence) and reads the server's
# user + system CPU from /proc/PID/stat before and after N requests.
# Rounds interleave the servers, so a change of load hits all alike.
#
#   bench/pipelined_cost.sh BATOND [BATOND2 ...]
#   ROUNDS=3 N=600000 bench/pipelined_cost.sh build/a/bin/batond build/b/bin/batond
set -euo pipefail
(($# >= 1)) || { echo "usage: $0 BATOND [BATOND2 ...]" >&2; exit 2; }
N=${N:-600000}
ROUNDS=${ROUNDS:-3}
BPORT=${BPORT:-27420}
RPORT=${RPORT:-27421}
TOKEN=0123456789abcdef0123456789abcdef
tck=$(getconf CLK_TCK)
cpu() { awk -v t="$tck" '{print ($14 + $15) / t, $14 / t}' "/proc/$1/stat"; }
run() {  # label pid port command...
  local label=$1 pid=$2 port=$3 t0 u0 t1 u1 out rps
  shift 3
  read -r t0 u0 < <(cpu "$pid")
  out=$(redis-benchmark -p "$port" -c 50 -P 16 -r 100000 -n "$N" -q "$@" 2>&1 | tr '\r' '\n' | grep "requests per second" | tail -1)
  read -r t1 u1 < <(cpu "$pid")
  rps=$(sed 's/.*: \([0-9.]*\) requests.*/\1/' <<<"$out")
  python3 -c "print('%-40s cpu %.3f us/req (user %.3f)  %s req/s' % ('$label', ($t1 - $t0) * 1e6 / $N, ($u1 - $u0) * 1e6 / $N, '$rps'))"
}
for ((round = 1; round <= ROUNDS; round++)); do
  echo "round $round"
  for bin in "$@"; do
    "$bin" --listen "127.0.0.1:$BPORT" --data-dir '' >/dev/null 2>&1 &
    pid=$!
    for _ in $(seq 50); do redis-cli -p "$BPORT" PING >/dev/null 2>&1 && break; sleep 0.1; done
    run "batond $bin" "$pid" "$BPORT" LOCK.ACQUIRE k:__rand_int__ "$TOKEN" 30000
    # What the baton:// client sends, if this batond takes BRIEF.
    if [[ -z ${NO_BRIEF:-} ]] && ! redis-cli -p "$BPORT" LOCK.ACQUIRE brief-probe \
        "$TOKEN" 1000 BRIEF 2>&1 | grep -q 'unknown or incomplete'; then
      run "batond $bin BRIEF" "$pid" "$BPORT" LOCK.ACQUIRE k:__rand_int__ "$TOKEN" 30000 BRIEF
    fi
    kill "$pid"; wait "$pid" 2>/dev/null || true
  done
  redis-server --port "$RPORT" --save '' --appendonly no >/dev/null 2>&1 &
  pid=$!
  for _ in $(seq 50); do redis-cli -p "$RPORT" PING >/dev/null 2>&1 && break; sleep 0.1; done
  run "redis-server (SET NX PX)" "$pid" "$RPORT" SET k:__rand_int__ "$TOKEN" NX PX 30000
  kill "$pid"; wait "$pid" 2>/dev/null || true
done
