#!/usr/bin/env bash
# bench/zk_disk.sh — zookeeper:// under contention against the raw
# ZooKeeper lock recipe, on this machine's disk and on a slower one, in one
# run: what an fsynced commit on the hand-over's critical path costs.
#
# Starts one private ZooKeeper per disk profile (127.0.0.1, a free port, a
# temp data dir, stopped by pid):
#   disk   the machine's own disk (ZooKeeper's default forceSync=yes)
#   slow   the same, with bench/slow_fsync.c preloaded: every fsync and
#          fdatasync of the server first sleeps SLOW_FSYNC_US (a disk
#          whose commits take about that much longer)
#   ensemble  three servers on loopback (one quorum, the machine's disk),
#          every client connected to the same one: writes need a quorum,
#          reads are answered by that server alone, as in production
# and for ROUNDS rounds runs, back to back, each LOCKBENCH binary given
# (e.g. two builds to compare, interleaved) with --workload contended
# --clients N --locks 1 for N in CLIENTS, and the raw floor (raw-zk://, the
# ephemeral-sequential recipe with the same C client's synchronous calls)
# from the first binary, and with RAW_ASYNC=1 the floor again with its
# create and delete made as the store makes its calls (raw-zk://…?api=async:
# async + wait, one thread hop more per call), and with RAW_GRANT=1 the
# floor of the store's guarantee (raw-zk://…?grant=write: a waiter that
# becomes first writes its node, the write that starts a store-clocked,
# fenced lease). Prints one line per run and a median table (Markdown).
#
# Usage: bench/zk_disk.sh [LOCKBENCH ...]   (default build-bench's)
#   PROFILES=ensemble bench/zk_disk.sh   # the three-server case only
# Environment (defaults): ROUNDS=3 DURATION=4 (s) CLIENTS="50 4"
#   PROFILES="disk slow" SLOW_FSYNC_US=1000 RAW_ASYNC=0
#   WORKLOAD=contended (or uncontended: each client its own lock)
#   RAW_GRANT=0
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-4}
CLIENTS=${CLIENTS:-"50 4"}
PROFILES=${PROFILES:-"disk slow"}
SLOW_FSYNC_US=${SLOW_FSYNC_US:-1000}
RAW_ASYNC=${RAW_ASYNC:-0}
WORKLOAD=${WORKLOAD:-contended}
RAW_GRANT=${RAW_GRANT:-0}
[[ $WORKLOAD == contended || $WORKLOAD == uncontended ]] ||
  { echo "zk_disk: WORKLOAD must be contended or uncontended" >&2; exit 64; }
BENCHES=("$@")
[[ ${#BENCHES[@]} -gt 0 ]] || BENCHES=("$ROOT/build-bench/bin/baton_lockbench")
for b in "${BENCHES[@]}"; do
  [[ -x "$b" ]] || { echo "zk_disk: no executable $b" >&2; exit 64; }
done

WORK=$(mktemp -d "${TMPDIR:-/tmp}/baton-zkdisk.XXXXXX")
log() { echo "[zk_disk] $*" >&2; }
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

gcc -O2 -shared -fPIC -o "$WORK/slow_fsync.so" "$ROOT/bench/slow_fsync.c" -ldl

ZK_PIDS=()
stop_zk() {
  for p in "${ZK_PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${ZK_PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  ZK_PIDS=()
}
trap 'stop_zk; rm -rf "$WORK"' EXIT

start_ensemble() {  # three servers; ZK_PORT: the first one's client port
  local i d ports=() quorum=() election=() servers=""
  for i in 1 2 3; do
    ports+=("$(free_port)") quorum+=("$(free_port)") election+=("$(free_port)")
  done
  for i in 1 2 3; do
    servers+="server.$i=127.0.0.1:${quorum[$((i - 1))]}:${election[$((i - 1))]}\n"
  done
  for i in 1 2 3; do
    d=$WORK/zk-ensemble-$i
    mkdir -p "$d/data"
    echo "$i" >"$d/data/myid"
    printf "tickTime=2000\ninitLimit=10\nsyncLimit=5\ndataDir=%s\nclientPort=%s\nclientPortAddress=127.0.0.1\nadmin.enableServer=false\n4lw.commands.whitelist=ruok,srvr\nmaxClientCnxns=500\n$servers" \
      "$d/data" "${ports[$((i - 1))]}" >"$d/zoo.cfg"
    java -cp "$d:/usr/share/java/zookeeper.jar" \
      org.apache.zookeeper.server.quorum.QuorumPeerMain "$d/zoo.cfg" >"$d/zk.log" 2>&1 &
    ZK_PIDS+=($!)
  done
  for _ in $(seq 1 150); do
    if timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/${ports[0]}; echo srvr >&3; grep -qE 'Mode: (leader|follower)' <&3" 2>/dev/null; then
      ZK_PORT=${ports[0]}
      return 0
    fi
    sleep 0.2
  done
  log "the ZooKeeper ensemble did not form: $(tail -5 "$WORK/zk-ensemble-1/zk.log")"
  exit 69
}

start_zk() {  # start_zk PROFILE
  [[ $1 == ensemble ]] && { start_ensemble; return 0; }
  local d=$WORK/zk-$1 port preload=()
  port=$(free_port)
  mkdir -p "$d/data"
  printf 'tickTime=2000\ndataDir=%s\nclientPort=%s\nclientPortAddress=127.0.0.1\nadmin.enableServer=false\n4lw.commands.whitelist=ruok\nmaxClientCnxns=500\n' \
    "$d/data" "$port" >"$d/zoo.cfg"
  [[ $1 == slow ]] && preload=(env "LD_PRELOAD=$WORK/slow_fsync.so" "SLOW_FSYNC_US=$SLOW_FSYNC_US")
  "${preload[@]}" java -cp "$d:/usr/share/java/zookeeper.jar" \
    org.apache.zookeeper.server.quorum.QuorumPeerMain "$d/zoo.cfg" >"$d/zk.log" 2>&1 &
  ZK_PIDS+=($!)
  for _ in $(seq 1 100); do
    if timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$port; echo ruok >&3; read -r -t 2 a <&3; [ \"\$a\" = imok ]" 2>/dev/null; then
      ZK_PORT=$port
      return 0
    fi
    sleep 0.2
  done
  log "ZooKeeper ($1) did not start: $(tail -5 "$d/zk.log")"
  exit 69
}

run() {  # run PROFILE LABEL BIN URL CLIENTS
  local out
  local shape=(--workload contended --locks 1)
  [[ $WORKLOAD == uncontended ]] && shape=(--workload uncontended)
  out=$(timeout $((DURATION + 60)) "$3" --store "$4" "${shape[@]}" \
    --clients "$5" --duration "${DURATION}s" --json) || {
    log "$2 failed"
    return 0
  }
  python3 - "$1" "$2" "$5" "$out" >>"$WORK/results.txt" <<'PY'
import json, sys
d = json.loads(sys.argv[4])
print(sys.argv[1], sys.argv[2], sys.argv[3], d["pairs_per_sec"],
      d["handoff"]["p50_us"], d["handoff"]["p99_us"], d["errors"])
PY
  tail -1 "$WORK/results.txt" >&2
}

: >"$WORK/results.txt"
for profile in $PROFILES; do
  start_zk "$profile"
  log "$profile: ZooKeeper on port $ZK_PORT"
  for round in $(seq 1 "$ROUNDS"); do
    for n in $CLIENTS; do
      for i in "${!BENCHES[@]}"; do
        run "$profile" "store$((i + 1))" "${BENCHES[$i]}" \
          "zookeeper://127.0.0.1:$ZK_PORT/zkdisk" "$n"
      done
      run "$profile" raw "${BENCHES[0]}" "raw-zk://127.0.0.1:$ZK_PORT" "$n"
      if [[ $RAW_GRANT == 1 ]]; then
        run "$profile" raw-grant "${BENCHES[0]}" \
          "raw-zk://127.0.0.1:$ZK_PORT?grant=write" "$n"
      fi
      if [[ $RAW_ASYNC == 1 ]]; then
        run "$profile" raw-async "${BENCHES[0]}" \
          "raw-zk://127.0.0.1:$ZK_PORT?api=async" "$n"
      fi
    done
  done
  stop_zk
done

python3 - "$WORK/results.txt" "${BENCHES[@]}" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
print("binaries: " + ", ".join(f"store{i + 1} = {b}" for i, b in enumerate(sys.argv[2:])))
print()
grant = any(r[1] == "raw-grant" for r in rows)
extra = " raw-grant ÷ this |" if grant else ""
print("| server | clients | who | pairs/s (median [range]) | handoff p50 µs | handoff p99 µs | raw ÷ this, pairs/s |" + extra + " errors |")
print("| --- | --- | --- | --- | --- | --- | --- |" + (" --- |" if grant else "") + " --- |")
keys = []
for r in rows:
    k = (r[0], r[2], r[1])
    if k not in keys:
        keys.append(k)
def med(prof, n, who, col):
    v = [float(r[col]) for r in rows if (r[0], r[2], r[1]) == (prof, n, who)]
    return statistics.median(v), min(v), max(v)
for prof, n, who in keys:
    p, lo, hi = med(prof, n, who, 3)
    raw = med(prof, n, "raw", 3)[0]
    errs = sum(int(r[6]) for r in rows if (r[0], r[2], r[1]) == (prof, n, who))
    g = f" {med(prof, n, 'raw-grant', 3)[0] / p:.2f}× |" if grant else ""
    print(f"| {prof} | {n} | {who} | {p:,.0f} [{lo:,.0f}–{hi:,.0f}] | "
          f"{med(prof, n, who, 4)[0]:,.0f} | {med(prof, n, who, 5)[0]:,.0f} | "
          f"{raw / p:.2f}× |{g} {errs} |")
PY
