#!/usr/bin/env bash
# tests/redis/two_builds.sh — a rolling upgrade on redis:// and redlock://:
# two builds of the `baton` CLI on the same private redis-servers must
# exclude each other and share one FIFO queue (outside scripts/test: it
# needs a second build).
#
#   tests/redis/two_builds.sh OLD_BATON NEW_BATON
#
# Checks, on redis:// (one server) and on redlock:// (three), each both
# ways (old holds / new asks, and the reverse):
#   1. a try by one build while the other holds the lock is refused (75);
#   2. waiters of both builds queued behind a holder are granted in their
#      arrival order (new, old, new / old, new, old);
# and prints the first server's function libraries (one library when both
# builds run the same scripts). Exit 0 if every check passed.
set -euo pipefail
OLD=${1:?usage: two_builds.sh OLD_BATON NEW_BATON}
NEW=${2:?usage: two_builds.sh OLD_BATON NEW_BATON}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/baton-two-builds.XXXXXX")
stop() {
  for f in "$WORK"/*/redis.pid; do kill "$(cat "$f")" 2>/dev/null || true; done
  rm -rf "$WORK"
}
trap stop EXIT
PORTS=()
for i in 1 2 3; do
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  mkdir "$WORK/$i"
  redis-server --port "$port" --bind 127.0.0.1 --dir "$WORK/$i" --save '' \
    --appendonly no --logfile "$WORK/$i/redis.log" --daemonize yes \
    --pidfile "$WORK/$i/redis.pid"
  for _ in $(seq 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.05; done
  PORTS+=("$port")
done
fail=0

# exclusion HOLDER ASKER: ASKER's try while HOLDER holds must exit 75.
exclusion() {
  local holder=$1 asker=$2 lock="ex-$RANDOM" out rc=0
  out=$("$holder" --store "$STORE" acquire "$lock" --ttl 30s)
  "$asker" --store "$STORE" acquire "$lock" --ttl 30s --wait 0 >/dev/null 2>&1 || rc=$?
  if [[ $rc == 75 ]]; then
    echo "ok   exclusion: $holder holds, $asker is refused"
  else
    echo "FAIL exclusion: the second build got exit $rc (want 75)"; fail=1
  fi
  local token=${out#*token=}; token=${token%% *}
  "$holder" --store "$STORE" release "$lock" "$token" >/dev/null || true
}

# fifo A B C: a holder of A's build, then waiters of A, B, C's builds queued
# in that order; each appends its name when granted.
fifo() {
  local lock="fifo-$RANDOM" log="$WORK/order-$RANDOM" i=0 pids=()
  "$1" --store "$STORE" run "$lock" --ttl 10s -- sleep 1.5 &
  pids+=($!)
  sleep 0.5
  for b in "$@"; do
    i=$((i + 1))
    "$b" --store "$STORE" run "$lock" --ttl 10s --wait 30s -- \
      sh -c "echo $i >> $log; sleep 0.2" &
    pids+=($!)
    sleep 0.4  # each queued before the next arrives
  done
  wait "${pids[@]}"
  local got; got=$(tr '\n' ' ' < "$log")
  if [[ $got == "1 2 3 " ]]; then
    echo "ok   FIFO across builds: granted in arrival order ($got)"
  else
    echo "FAIL FIFO across builds: order $got (want 1 2 3)"; fail=1
  fi
}

for STORE in "redis://127.0.0.1:${PORTS[0]}" \
  "redlock://127.0.0.1:${PORTS[0]},127.0.0.1:${PORTS[1]},127.0.0.1:${PORTS[2]}"; do
  echo "$STORE"
  exclusion "$OLD" "$NEW"
  exclusion "$NEW" "$OLD"
  fifo "$NEW" "$OLD" "$NEW"
  fifo "$OLD" "$NEW" "$OLD"
done
echo "function libraries on the first server:"
redis-cli -p "${PORTS[0]}" FUNCTION LIST | grep -A1 '^library_name$' |
  grep -v -- '--' | grep -v '^library_name$' | sed 's/^/  /'
exit $fail
