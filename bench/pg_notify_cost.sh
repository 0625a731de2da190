#!/usr/bin/env bash
# bench/pg_notify_cost.sh — what a NOTIFY adds to its sender's commit in
# PostgreSQL 15 as listening backends are added (is the
# broadcast what slows postgres://'s contended handoff?).
#
# Starts a private PostgreSQL 15 (initdb as the postgres user in a temp
# dir, a Unix socket only, stopped by pid) and for each count in LISTENERS
# opens that many idle sessions that ran `LISTEN baton_wake` (psql fed by a
# pipe: the backend is idle, as a store's listener connection is), then
# runs pgbench, one client, DURATION seconds per case, ROUNDS rounds, the
# cases interleaved:
#   update           UPDATE of one row (a durable commit), and a SELECT
#                    in its place of the NOTIFY (same round trips)
#   update+notify    the same and pg_notify('baton_wake', …): every
#                    listener is signalled and forwards it to its client
#   update+other     the same with a channel nobody listens on
# Prints the median latency per commit (µs) and each case's excess over
# `update`. Environment (defaults): LISTENERS="0 8 50" DURATION=4 ROUNDS=3
#   SYNC=on (synchronous_commit; off shows the cost without the flush)
set -euo pipefail

PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}
LISTENERS=${LISTENERS:-"0 8 50"}
DURATION=${DURATION:-4}
ROUNDS=${ROUNDS:-3}
SYNC=${SYNC:-on}
[[ $(id -u) == 0 ]] || { echo "pg_notify_cost: run as root (PostgreSQL runs as postgres)" >&2; exit 64; }
WORK=$(mktemp -d "${TMPDIR:-/tmp}/baton-pgnotify.XXXXXX")
chown postgres "$WORK"
AS=(runuser -u postgres --)
LPIDS=()
stop_listeners() {
  for p in "${LPIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${LPIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  LPIDS=()
}
cleanup() {
  stop_listeners
  "${AS[@]}" "$PGBIN/pg_ctl" -D "$WORK/data" -m immediate -w stop >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT
log() { echo "[pg_notify_cost] $*" >&2; }

"${AS[@]}" "$PGBIN/initdb" -D "$WORK/data" -A trust -U postgres -E UTF8 --locale=C >"$WORK/initdb.log" 2>&1
"${AS[@]}" "$PGBIN/pg_ctl" -D "$WORK/data" -l "$WORK/pg.log" -w -o \
  "-c listen_addresses='' -k $WORK -p 55432 -c max_connections=300 -c synchronous_commit=$SYNC" start >/dev/null
PSQL=("${AS[@]}" psql -h "$WORK" -p 55432 -U postgres -q -X)
"${PSQL[@]}" -c "CREATE TABLE t (k int PRIMARY KEY, v bigint); INSERT INTO t VALUES (1, 0)" postgres
# The same four statements (round trips) in every case.
printf "BEGIN;\nUPDATE t SET v = v + 1 WHERE k = 1;\nSELECT 'x';\nCOMMIT;\n" >"$WORK/update.sql"
printf "BEGIN;\nUPDATE t SET v = v + 1 WHERE k = 1;\nSELECT pg_notify('baton_wake', 'x');\nCOMMIT;\n" >"$WORK/update+notify.sql"
printf "BEGIN;\nUPDATE t SET v = v + 1 WHERE k = 1;\nSELECT pg_notify('elsewhere', 'x');\nCOMMIT;\n" >"$WORK/update+other.sql"
chown postgres "$WORK"/*.sql

: >"$WORK/results.txt"
for n in $LISTENERS; do
  for _ in $(seq 1 "$n"); do
    (echo "LISTEN baton_wake;"; sleep $((DURATION * ROUNDS * 3 + 60))) |
      "${PSQL[@]}" postgres >/dev/null 2>&1 &
    LPIDS+=($!)
  done
  got=0
  for _ in $(seq 1 100); do
    got=$("${PSQL[@]}" -At -c "SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'LISTEN%' AND state = 'idle'" postgres)
    [[ $got -ge $n ]] && break
    sleep 0.1
  done
  log "$n listeners up ($got seen)"
  for r in $(seq 1 "$ROUNDS"); do
    for c in update update+notify update+other; do
      lat=$("${AS[@]}" "$PGBIN/pgbench" -n -c 1 -T "$DURATION" -f "$WORK/$c.sql" \
        -h "$WORK" -p 55432 -U postgres postgres 2>/dev/null |
        awk '/latency average/ {print $4}')
      echo "$n $c $lat" >>"$WORK/results.txt"
      log "listeners $n round $r $c: $lat ms"
    done
  done
  stop_listeners
done

python3 - "$WORK/results.txt" "$SYNC" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if len(l.split()) == 3]
print(f"synchronous_commit={sys.argv[2]}; µs per commit, median of the rounds [range]")
print()
print("| listeners | update | update + NOTIFY (listened) | excess | update + NOTIFY (other channel) | excess |")
print("| --- | --- | --- | --- | --- | --- |")
for n in dict.fromkeys(r[0] for r in rows):
    def m(c):
        v = [float(r[2]) * 1000 for r in rows if r[0] == n and r[1] == c]
        return statistics.median(v), min(v), max(v)
    u, nt, ot = m("update"), m("update+notify"), m("update+other")
    print(f"| {n} | {u[0]:.0f} [{u[1]:.0f}–{u[2]:.0f}] | {nt[0]:.0f} [{nt[1]:.0f}–{nt[2]:.0f}] | "
          f"{nt[0] - u[0]:+.0f} | {ot[0]:.0f} [{ot[1]:.0f}–{ot[2]:.0f}] | {ot[0] - u[0]:+.0f} |")
PY
