#!/usr/bin/env bash
# tests/upgrade/batond_two_builds.sh — a rolling upgrade of baton://
# clients and batond: two builds of `baton` (an older and a newer one) take
# turns on one lock of one batond, and must exclude each other and be
# granted in the order they queued (one FIFO queue). Run against each build's batond, so
# it covers what rolling_upgrade.sh (clients of two builds on the new
# batond) does not: the newer clients on the older batond. Not part of
# scripts/test (it needs an older build); run it by hand:
#
#   tests/upgrade/batond_two_builds.sh OLD_BATON NEW_BATON OLD_BATOND NEW_BATOND
#
# Each run: 8 `baton run` processes, alternately old and new, started
# 250 ms apart on one lock; each holds it for 300 ms. Prints the holders'
# order and "ok", or what went wrong (exit 1). About 10 s.
set -euo pipefail
OLD=${1:?usage: batond_two_builds.sh OLD_BATON NEW_BATON OLD_BATOND NEW_BATOND}
NEW=${2:?usage}
OLD_D=${3:?usage}
NEW_D=${4:?usage}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/baton-two-builds.XXXXXX")
PIDS=()
trap 'for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$WORK"' EXIT

# one_batond BATOND LABEL: the mixed queue on a fresh batond.
one_batond() {
  local batond=$1 label=$2 log=$WORK/$2.log out=$WORK/$2.out port=
  "$batond" --listen 127.0.0.1:0 --data-dir '' >"$out" 2>&1 &
  local pid=$!
  PIDS+=("$pid")
  for _ in $(seq 100); do
    port=$(sed -n 's/.*batond ready port=\([0-9]*\).*/\1/p' "$out")
    [[ -n $port ]] && break
    sleep 0.05
  done
  [[ -n $port ]] || { echo "$label: batond did not start: $(cat "$out")"; return 1; }
  local want=() runs=()
  for i in 1 2 3 4 5 6 7 8; do
    local who bin
    if ((i % 2)); then who=old$i bin=$OLD; else who=new$i bin=$NEW; fi
    want+=("$who")
    "$bin" --store "baton://127.0.0.1:$port" run mixed --ttl 5s --wait 30s -- \
      sh -c "echo start $who >>'$log'; sleep 0.3; echo end $who >>'$log'" &
    runs+=($!)
    sleep 0.25
  done
  local failed=0
  for r in "${runs[@]}"; do wait "$r" || failed=1; done
  kill "$pid"; wait "$pid" 2>/dev/null || true
  ((failed == 0)) || { echo "$label: a run failed"; return 1; }
  # Exclusion: every start is followed by its own end before the next start.
  local prev= order=()
  while read -r what who; do
    if [[ $what == start ]]; then
      [[ -z $prev ]] || { echo "$label: $who started while $prev held the lock"; return 1; }
      prev=$who
      order+=("$who")
    else
      [[ $who == "$prev" ]] || { echo "$label: $who ended while $prev held it"; return 1; }
      prev=
    fi
  done <"$log"
  echo "$label batond: ${order[*]}"
  [[ "${order[*]}" == "${want[*]}" ]] || { echo "$label: not in queue order (want ${want[*]})"; return 1; }
}

one_batond "$NEW_D" new
one_batond "$OLD_D" old
echo ok
