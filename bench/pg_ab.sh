#!/usr/bin/env bash
# bench/pg_ab.sh — two builds of the postgres:// store against each other
# and against the durable floor, interleaved on ONE private PostgreSQL 15
# (durable: the server's defaults), so a noisy machine hits both alike.
#
#   bench/pg_ab.sh A_LOCKBENCH B_LOCKBENCH
#
# Per round: the floor (pgbench, 1 client: one durable upsert + one update
# committed without the flush, as bench/run_postgres.sh), then A and B
# (baton_lockbench --workload $WORKLOAD --clients $CLIENTS), in alternating
# order. Each build gets its own schema (?schema=a / b), so two schema
# versions can be compared. Prints one line per run and the ratios.
# Environment: ROUNDS=3 DURATION=4 WORKLOAD=contended CLIENTS=8
#   PROFILE=durable (the server's defaults) | nosync (fsync=off,
#   synchronous_commit=off, full_page_writes=off: no flush, so the CPU of
#   each pair shows)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
A=${1:?A lockbench}; B=${2:?B lockbench}
ROUNDS=${ROUNDS:-3}; DURATION=${DURATION:-4}
WORKLOAD=${WORKLOAD:-contended}; CLIENTS=${CLIENTS:-8}
PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/baton-pgab.XXXXXX")
AS=()
if [[ $(id -u) == 0 ]]; then chown postgres "$WORK"; AS=(runuser -u postgres --); fi
case ${PROFILE:=durable} in
  durable) EXTRA="" ;;
  nosync) EXTRA="-c fsync=off -c synchronous_commit=off -c full_page_writes=off" ;;
  *) echo "pg_ab.sh: PROFILE must be durable or nosync" >&2; exit 64 ;;
esac
PORT=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"${AS[@]}" "$PGBIN/initdb" -D "$WORK/data" -A trust -U postgres -E UTF8 --locale=C >"$WORK/initdb.log"
"${AS[@]}" "$PGBIN/pg_ctl" -D "$WORK/data" -l "$WORK/pg.log" -w -t 60 \
  -o "-p $PORT -k $WORK -c listen_addresses=127.0.0.1 -c max_connections=200 $EXTRA" start >/dev/null
PG_PID=$(head -1 "$WORK/data/postmaster.pid")
trap 'kill -INT $PG_PID 2>/dev/null; sleep 1; rm -rf "$WORK"' EXIT
psql() { "$PGBIN/psql" -q -h 127.0.0.1 -p "$PORT" -U postgres "$@" postgres; }
psql -f "$ROOT/bench/pg/floor-setup.sql"
floor() {
  timeout 60 "$PGBIN/pgbench" -n -M prepared -h 127.0.0.1 -p "$PORT" -U postgres \
    -c 1 -j 1 -T "$DURATION" -f "$ROOT/bench/pg/floor.sql" postgres 2>&1 | awk '/^tps = / {print int($3); exit}'
}
store() {  # BIN SCHEMA -> "pairs/s handoff_p50_us"
  timeout $((DURATION + 60)) "$1" --json --workload "$WORKLOAD" --clients "$CLIENTS" \
    --store "postgres://postgres@127.0.0.1:$PORT/postgres?schema=$2" \
    --duration "${DURATION}s" --prefix "r$RANDOM" |
    /usr/bin/python3 -c 'import json,sys; r=json.load(sys.stdin); print(round(r["pairs_per_sec"]), r.get("handoff",{}).get("p50_us",0))'
}
echo "# $(date -u '+%F %H:%M UTC'), $(nproc) cores, PostgreSQL $("$PGBIN/postgres" --version | awk '{print $3}'), $PROFILE, $WORKLOAD, $CLIENTS clients, ${DURATION}s runs"
for ((r = 1; r <= ROUNDS; r++)); do
  f=$(floor)
  if ((r % 2)); then a=$(store "$A" a); b=$(store "$B" b); else b=$(store "$B" b); a=$(store "$A" a); fi
  read -r ap ah <<<"$a"; read -r bp bh <<<"$b"
  echo "round $r: floor(1 client) $f | A $ap pairs/s (handoff p50 $ah us) = $(echo "scale=2; $ap/$f" | bc)x floor | B $bp pairs/s (handoff p50 $bh us) = $(echo "scale=2; $bp/$f" | bc)x floor"
done
