#!/usr/bin/env bash
# tests/etcd/two_builds.sh — two builds of baton on one etcd cluster at the
# same time (a rolling upgrade): they must exclude each other and share
# one FIFO queue. Not part of scripts/test (about a minute); run it with
# the `baton` CLI of each build:
#
#   tests/etcd/two_builds.sh OLD_BATON NEW_BATON
#
# The cluster (3 members) is started by NEW_BATON's baton_test_servers
# (BATON_TEST_SERVERS, default: next to NEW_BATON) and stopped at the end.
#   1. FIFO: an OLD holder, then waiters NEW, OLD, NEW, OLD queued one
#      after the other: they must be granted in that order, with
#      increasing fencing tokens.
#   2. Exclusion: 2 OLD and 2 NEW loops of `baton run` on one lock, each
#      critical section a mkdir of one directory: a second holder finds it.
#   3. A NEW try while OLD holds is refused, and the other way round.
# Exit 0 and "two_builds: PASS" if all hold.
set -euo pipefail
OLD=${1:?usage: tests/etcd/two_builds.sh OLD_BATON NEW_BATON}
NEW=${2:?usage: tests/etcd/two_builds.sh OLD_BATON NEW_BATON}
ROUNDS=${ROUNDS:-15}
SERVERS=${BATON_TEST_SERVERS:-$(dirname "$NEW")/baton_test_servers}
[[ -x $SERVERS ]] || { echo "two_builds: no $SERVERS" >&2; exit 64; }

WORK=$(mktemp -d "${TMPDIR:-/tmp}/baton-two-builds.XXXXXX")
coproc SRV { "$SERVERS" --kind etcd --dir "$WORK/servers" --no-proxy; }
trap 'echo quit >&"${SRV[1]}" 2>/dev/null || true; wait "$SRV_PID" 2>/dev/null || true; rm -rf "$WORK"' EXIT
URL=
while IFS= read -r line <&"${SRV[0]}"; do
  case $line in
    direct_url=*) URL=${line#direct_url=} ;;
    ready) break ;;
    error*) echo "two_builds: $line" >&2; exit 69 ;;
  esac
done
[[ -n $URL ]] || { echo "two_builds: the servers printed no URL" >&2; exit 69; }
echo "store: $URL"
fail=0

waiters() {  # waiters LOCK: how many wait on LOCK (read with NEW)
  "$NEW" --store "$URL" status "$1" --json |
    /usr/bin/python3 -c 'import json,sys
d=json.load(sys.stdin)
print(sum(len(l["waiters"]) for l in d["locks"] if l["name"]==sys.argv[1]))' "$1"
}
wait_for_waiters() {  # wait_for_waiters LOCK N
  for _ in $(seq 200); do
    [[ $(waiters "$1") -ge $2 ]] && return 0
    sleep 0.05
  done
  echo "two_builds: $2 waiters never showed on $1" >&2
  return 1
}

# 1. FIFO across the two builds.
lock=fifo-$RANDOM
order=$WORK/order
go=$WORK/go  # the holder holds until every waiter queued
"$OLD" --store "$URL" run "$lock" --ttl 30s -- \
  sh -c "for i in \$(seq 600); do [ -e $go ] && exit 0; sleep 0.05; done" &
holder=$!
for _ in $(seq 100); do
  "$NEW" --store "$URL" status "$lock" --json | grep -q '"holders":\[{' && break
  sleep 0.05
done
pids=()
n=0
for bin in "$NEW" "$OLD" "$NEW" "$OLD"; do
  n=$((n + 1))
  "$bin" --store "$URL" run "$lock" --ttl 30s --wait 30s -- \
    sh -c "echo $n \$BATON_FENCING_TOKEN >>$order; sleep 0.2" &
  pids+=($!)
  wait_for_waiters "$lock" "$n"
done
touch "$go"
wait "$holder" "${pids[@]}"
echo "FIFO order (waiter, fencing token):" $(tr '\n' ' ' <"$order")
if ! /usr/bin/python3 - "$order" <<'PY'
import sys
rows = [tuple(map(int, l.split())) for l in open(sys.argv[1])]
ok = [r[0] for r in rows] == [1, 2, 3, 4] and all(
    a[1] < b[1] for a, b in zip(rows, rows[1:]))
sys.exit(0 if ok else 1)
PY
then
  echo "two_builds: FIFO across the builds broken" >&2
  fail=1
fi

# 2. Exclusion: both builds' loops on one lock.
lock=mutex-$RANDOM
cs=$WORK/cs
log=$WORK/violations
: >"$log"
loop() {  # loop BIN
  local i
  for ((i = 0; i < ROUNDS; ++i)); do
    "$1" --store "$URL" run "$lock" --ttl 10s --wait 60s -- \
      sh -c "mkdir $cs 2>/dev/null || echo VIOLATION >>$log; sleep 0.02; rmdir $cs" ||
      echo "ERROR $?" >>"$log"
  done
}
loop "$OLD" & a=$!
loop "$NEW" & b=$!
loop "$OLD" & c=$!
loop "$NEW" & d=$!
wait $a $b $c $d
echo "exclusion: $((4 * ROUNDS)) holds, $(grep -c VIOLATION "$log" || true) violations, $(grep -c ERROR "$log" || true) errors"
if [[ -s $log ]]; then
  echo "two_builds: two holders at once, or a failed run:" >&2
  sort "$log" | uniq -c >&2
  fail=1
fi

# 3. A try of one build while the other holds: refused (exit 75).
lock=try-$RANDOM
for pair in "$OLD $NEW" "$NEW $OLD"; do
  set -- $pair
  "$1" --store "$URL" run "$lock" --ttl 30s -- sleep 1 &
  h=$!
  for _ in $(seq 100); do
    "$NEW" --store "$URL" status "$lock" --json | grep -q '"holders":\[{' && break
    sleep 0.05
  done
  rc=0
  "$2" --store "$URL" acquire "$lock" --ttl 5s >/dev/null 2>&1 || rc=$?
  if ((rc != 75)); then  # 75: not acquired
    echo "two_builds: a try of $2 while $1 held exited $rc, not 75" >&2
    fail=1
  fi
  wait $h
done

if ((fail)); then
  echo "two_builds: FAIL"
  exit 1
fi
echo "two_builds: PASS"
