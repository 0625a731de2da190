#!/usr/bin/env bash
# bench/run_postgres.sh — the postgres:// store against raw PostgreSQL
# advisory locks on the SAME private server, in the same run.
#
# Starts a private PostgreSQL 15 (initdb as the postgres user in a temp dir,
# 127.0.0.1 on a free port, stopped by pid), then for every server profile:
#   raw     pgbench -M prepared, a script of pg_try_advisory_lock(k) +
#           pg_advisory_unlock(k) with one key per client (uncontended)
#   floor   pgbench, one single-row upsert (durable) + one single-row
#           update (commit without flush wait) per pair: the least any
#           table-backed lock with the store's durability must write
#   store   baton_lockbench --store postgres://... --workload uncontended |
#           contended | handoff, with serialize=name (per-name advisory keys)
#           and serialize=global (the micro-batch scheduler's one
#           scheduling lock)
# with 1 and 8 clients, REPEATS times each (median kept), and prints a
# Markdown table with the store/raw ratio (also $WORK/report.md; raw lines
# in $WORK/results.txt). Every run is bounded (--duration / -T plus
# `timeout`); nothing listens beyond 127.0.0.1.
#
# Environment (defaults):
#   BUILD_DIR=build-bench  DURATION=5  (seconds)  REPEATS=3  CLIENTS="1 8"
#   PROFILES="durable nosync"   durable: the server's defaults (fsync=on,
#            synchronous_commit=on); nosync: fsync=off,
#            synchronous_commit=off (what the test fixture uses)
#   WORKLOADS="uncontended contended handoff"  SERIALIZE="name global"
#   SKIP_BUILD=1 to use the binaries as they are.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD_DIR:-$ROOT/build-bench}
DURATION=${DURATION:-5}
REPEATS=${REPEATS:-3}
CLIENTS=${CLIENTS:-"1 8"}
PROFILES=${PROFILES:-"durable nosync"}
WORKLOADS=${WORKLOADS:-"uncontended contended handoff"}
SERIALIZE=${SERIALIZE:-"name global"}
PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}
PY=/usr/bin/python3

log() { echo "[run_postgres] $*" >&2; }

# shellcheck source=../scripts/lib/deps.sh
source "$ROOT/scripts/lib/deps.sh"
baton_install_packages "${BATON_BUILD_PACKAGES[@]}" postgresql \
  postgresql-contrib >&2

if [[ -z ${SKIP_BUILD:-} ]]; then
  if [[ ! -f $BUILD/CMakeCache.txt ]]; then
    cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release \
      -DBATON_BUILD_BENCH=ON >&2
  fi
  cmake --build "$BUILD" -j2 --target baton_lockbench >&2
fi
LOCKBENCH=$BUILD/bin/baton_lockbench
PGBENCH=$PGBIN/pgbench
[[ -x $PGBENCH ]] || PGBENCH=$(command -v pgbench || true)
for b in "$LOCKBENCH" "$PGBIN/initdb" "$PGBIN/pg_ctl" "$PGBENCH"; do
  [[ -n $b && -x $b ]] || { log "missing $b"; exit 1; }
done

WORK=$(mktemp -d "${TMPDIR:-/tmp}/baton-pgbench.XXXXXX")
RESULTS=$WORK/results.txt
: >"$RESULTS"
log "work dir $WORK ($(df -P "$WORK" | awk 'NR==2 {print $1}'))"

AS=()
if [[ $(id -u) == 0 ]]; then
  chown postgres "$WORK"
  AS=(runuser -u postgres --)
fi

PG_PID=""
stop_server() {
  [[ -n $PG_PID ]] || return 0
  kill -INT "$PG_PID" 2>/dev/null || true  # fast shutdown
  for ((i = 0; i < 300; i++)); do
    kill -0 "$PG_PID" 2>/dev/null || { PG_PID=""; return 0; }
    sleep 0.1
  done
  kill -QUIT "$PG_PID" 2>/dev/null || true  # immediate shutdown
  PG_PID=""
}
cleanup() {
  stop_server
  [[ -n ${KEEP_WORK:-} ]] || rm -rf "$WORK/data"
}
trap cleanup EXIT INT TERM

free_port() {
  "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# start_server PROFILE: a fresh cluster with that profile's settings.
start_server() {
  local profile=$1 extra=""
  case $profile in
    durable) extra="-c fsync=on -c synchronous_commit=on" ;;
    nosync) extra="-c fsync=off -c synchronous_commit=off -c full_page_writes=off" ;;
    *) log "unknown profile $profile"; exit 2 ;;
  esac
  rm -rf "$WORK/data"
  "${AS[@]}" "$PGBIN/initdb" -D "$WORK/data" -A trust -U postgres -E UTF8 \
    --locale=C >"$WORK/initdb.log" 2>&1 || { cat "$WORK/initdb.log" >&2; exit 1; }
  PORT=$(free_port)
  "${AS[@]}" "$PGBIN/pg_ctl" -D "$WORK/data" -l "$WORK/pg-$profile.log" -w \
    -t 60 -o "-p $PORT -k $WORK -c listen_addresses=127.0.0.1 \
      -c max_connections=200 $extra" start >&2
  PG_PID=$(head -1 "$WORK/data/postmaster.pid")
  log "postgres $profile pid $PG_PID port $PORT:" \
    "$("$PGBIN/../bin/psql" -h 127.0.0.1 -p "$PORT" -U postgres -Atc \
      "SELECT string_agg(name || '=' || setting, ' ') FROM pg_settings WHERE name IN ('fsync','synchronous_commit','wal_sync_method','commit_delay')" postgres 2>/dev/null || true)"
}

cat >"$WORK/raw.sql" <<'EOF'
SELECT pg_try_advisory_lock(:client_id + 1000);
SELECT pg_advisory_unlock(:client_id + 1000);
EOF
# The floor of any table-backed lock with the store's durability:
# bench/pg/floor-setup.sql and bench/pg/floor.sql (shared with bench/pg_ab.sh).
cp "$ROOT/bench/pg/floor-setup.sql" "$ROOT/bench/pg/floor.sql" "$WORK/"

# raw|floor CLIENTS -> pairs/s (pgbench, prepared statements, one key per
# client)
run_raw() {
  local script=$1 n=$2 out
  out=$(timeout --kill-after=5 $((DURATION + 60)) "$PGBENCH" -n -M prepared \
    -h 127.0.0.1 -p "$PORT" -U postgres -c "$n" -j "$n" -T "$DURATION" \
    -f "$WORK/$script.sql" postgres 2>&1) || { log "pgbench failed: $out"; echo 0; return; }
  echo "$out" | awk '/^tps = / {print $3; exit}'
}

# store SERIALIZE WORKLOAD CLIENTS -> "pairs/s acquire_p50_us handoff_p50_us errors"
run_store() {
  local ser=$1 wl=$2 n=$3 out rc=0
  out=$(timeout --kill-after=5 $((DURATION + 90)) "$LOCKBENCH" --json \
    --store "postgres://postgres@127.0.0.1:$PORT/postgres?serialize=$ser" \
    --workload "$wl" --clients "$n" --duration "${DURATION}s" \
    --prefix "b$RANDOM" 2>"$WORK/lockbench.err") || rc=$?
  if [[ $rc != 0 ]]; then
    log "lockbench failed ($rc): $(tail -3 "$WORK/lockbench.err")"
    echo "0 0 0 -1"
    return
  fi
  echo "$out" | "$PY" -c 'import json,sys; r=json.load(sys.stdin); print(round(r["pairs_per_sec"]), r["acquire"]["p50_us"], r.get("handoff",{}).get("p50_us",0), r["errors"])'
}

median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print (NR ? a[int((NR+1)/2)] : 0)}'; }

for profile in $PROFILES; do
  start_server "$profile"
  "$PGBIN/psql" -q -h 127.0.0.1 -p "$PORT" -U postgres -f "$WORK/floor-setup.sql" postgres >&2
  for n in $CLIENTS; do
    for script in raw floor; do
      vals=""
      for ((r = 1; r <= REPEATS; r++)); do
        v=$(run_raw "$script" "$n"); vals+=" $v"
        echo "$profile $script - $n $v" >>"$RESULTS"
        log "$profile $script clients=$n #$r: $v pairs/s"
      done
      echo "$profile $script pgbench $n $(echo "$vals" | median) 0 0" >>"$WORK/medians.txt"
    done
    for ser in $SERIALIZE; do
      for wl in $WORKLOADS; do
        [[ $wl == handoff && $n == 1 ]] && continue  # needs 2+ clients
        vals=""; hvals=""; errs=0
        for ((r = 1; r <= REPEATS; r++)); do
          read -r v p50 h50 e < <(run_store "$ser" "$wl" "$n")
          vals+=" $v"; hvals+=" $h50"; errs=$((errs + e))
          echo "$profile store-$ser $wl $n $v p50=$p50 handoff_p50=$h50 errors=$e" >>"$RESULTS"
          log "$profile store serialize=$ser $wl clients=$n #$r: $v pairs/s (acquire p50 ${p50}us, handoff p50 ${h50}us, errors $e)"
        done
        echo "$profile store-$ser $wl $n $(echo "$vals" | median) $(echo "$hvals" | median) $errs" >>"$WORK/medians.txt"
      done
    done
  done
  stop_server
done

{
  echo "## postgres:// vs raw advisory locks ($(date -u '+%F %H:%M UTC'))"
  echo
  echo "Machine: $(nproc) cores, $(uname -sr), $(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo)."
  echo "PostgreSQL $("$PGBIN/postgres" --version | awk '{print $3}'), data dir on $(df -P "$WORK" | awk 'NR==2 {print $1}'); ${DURATION}s per run, median of $REPEATS."
  echo
  echo "| profile | what | workload | clients | pairs/s | handoff p50 µs | raw pairs/s | raw / this |"
  echo "|---|---|---|---:|---:|---:|---:|---:|"
  while read -r profile what wl n v h e; do
    [[ $what == raw ]] && continue
    raw=$(awk -v p="$profile" -v n="$n" '$1 == p && $2 == "raw" && $4 == n {printf "%d", $5}' "$WORK/medians.txt")
    v=$(printf '%.0f' "$v")
    ratio=$(awk -v r="$raw" -v v="$v" 'BEGIN {if (v > 0) printf "%.2f×", r / v; else print "—"}')
    [[ $wl == handoff ]] || h="—"
    [[ $what == floor ]] && what="floor (1 upsert + 1 update)"
    [[ $e == 0 ]] || v="$v (errors $e)"
    echo "| $profile | $what | $wl | $n | $v | $h | $raw | $ratio |"
  done <"$WORK/medians.txt"
  echo
  echo "raw = pgbench -M prepared, pg_try_advisory_lock + pg_advisory_unlock, one key per client, same server, same run."
  echo "floor = pgbench -M prepared, one single-row upsert (durable commit) + one single-row update (commit without waiting for the flush) per pair: the least a table-backed lock with the store's durability writes."
  echo "store = baton_lockbench (baton::Client -> postgres:// store); serialize=name: per-name advisory keys; serialize=global: one key for every name (the micro-batch scheduler's scheduling lock)."
} | tee "$WORK/report.md"
log "report: $WORK/report.md"
