#!/usr/bin/env bash
# bench/run_mysql.sh — the mysql:// store against its durable floor on the
# SAME private MariaDB, in the same run, rounds interleaved.
#
# Starts a private MariaDB (mariadb-install-db + mariadbd in a temp dir,
# 127.0.0.1 on a free port, durable commits, no binary log, stopped by
# pid), then ROUNDS times, for each client count:
#   floor   mariadb-slap, one INSERT of the lock's row (unique index) and
#           one DELETE per pair, each its own durable commit: the least a
#           table-backed grant must write (as bench/compare's floor)
#   store   baton bench --store mysql://... --workload uncontended, with
#           each of VARIANTS (URL queries; "-" is the default URL)
# and prints one line per measurement with the ratio floor ÷ store. Every
# run is bounded (--duration, a fixed query count); nothing listens beyond
# 127.0.0.1.
#
# Environment (defaults):
#   BUILD_DIR=build-bench  DURATION=4s  ROUNDS=3  CLIENTS="1 8"
#   VARIANTS="- fast_path=off doorbell=off"
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD_DIR:-$ROOT/build-bench}
BATON=$BUILD/bin/baton
DURATION=${DURATION:-4s}
ROUNDS=${ROUNDS:-3}
CLIENTS=${CLIENTS:-1 8}
VARIANTS=${VARIANTS:-- fast_path=off doorbell=off}
[[ -x $BATON ]] || { echo "run_mysql.sh: build $BATON first (ninja -C $BUILD baton_cli)" >&2; exit 2; }

WORK=$(mktemp -d /tmp/baton-mybench.XXXXXX)
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
MYPID=
cleanup() { [[ -n $MYPID ]] && kill "$MYPID" 2>/dev/null && wait "$MYPID" 2>/dev/null; rm -rf "$WORK"; }
trap cleanup EXIT

mariadb-install-db --no-defaults --user=root --datadir="$WORK/data" \
  --auth-root-authentication-method=normal --skip-test-db >"$WORK/install.log" 2>&1
mariadbd --no-defaults --user=root --datadir="$WORK/data" --bind-address=127.0.0.1 \
  --port="$PORT" --socket="$WORK/mysqld.sock" --pid-file="$WORK/mysqld.pid" --skip-log-bin \
  --max-connections=300 >"$WORK/mariadb.log" 2>&1 &
MYPID=$!
for _ in $(seq 100); do
  mariadb-admin --no-defaults -h127.0.0.1 -P"$PORT" -uroot ping >/dev/null 2>&1 && break
  sleep 0.2
done
mariadb --no-defaults -h127.0.0.1 -P"$PORT" -uroot -e \
  'CREATE DATABASE bench; CREATE TABLE bench.floor_lock (name VARCHAR(64) PRIMARY KEY) ENGINE=InnoDB'
URL="mysql://root@127.0.0.1:$PORT/bench"

floor() {  # CLIENTS: pairs/s
  local c=$1 q out secs
  q=$((c == 1 ? 5000 : 1000))
  out=$(timeout 300 mariadb-slap --no-defaults -h127.0.0.1 -P"$PORT" -uroot --create-schema=bench \
    --concurrency="$c" --iterations=1 --number-of-queries=$((q * c * 2)) --delimiter=";" \
    --query="INSERT INTO floor_lock (name) VALUES (CONCAT('u',CONNECTION_ID()));DELETE FROM floor_lock WHERE name = CONCAT('u',CONNECTION_ID())")
  secs=$(echo "$out" | sed -n 's/.*Average number of seconds to run all queries: \([0-9.]*\) seconds/\1/p')
  python3 -c "print(round($q * $c / $secs))"
}
store() {  # CLIENTS QUERY: pairs/s, acquire p50 µs
  local c=$1 q=$2 u=$URL
  [[ $q == - ]] || u="$URL?$q"
  timeout 120 "$BATON" bench --store "$u" --workload uncontended --clients "$c" \
    --duration "$DURATION" --json 2>/dev/null | tail -1 |
    python3 -c 'import json,sys; d=json.loads(sys.stdin.read()); print(round(d["pairs_per_sec"]), d["acquire"]["p50_us"])'
}

echo "mysql:// against the durable floor, $(date -u +%FT%TZ), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-6s %-8s %-16s %10s %14s %12s\n' round clients variant pairs/s acquire_p50us floor÷store
for r in $(seq "$ROUNDS"); do
  for c in $CLIENTS; do
    f=$(floor "$c")
    printf '%-6s %-8s %-16s %10s %14s %12s\n' "$r" "$c" floor "$f" - 1.00
    for v in $VARIANTS; do
      read -r p lat < <(store "$c" "$v")
      printf '%-6s %-8s %-16s %10s %14s %12s\n' "$r" "$c" "$v" "$p" "$lat" \
        "$(python3 -c "print('%.2f' % ($f / max($p, 1)))")"
    done
  done
done
