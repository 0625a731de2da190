#!/usr/bin/env bash
# tests/zookeeper/mixed_builds.sh — a rolling upgrade on zookeeper://: two
# baton builds (an older and a newer `baton` CLI) on one private ZooKeeper
# at the same time must exclude each other and share one FIFO queue
# (docs/stores/zookeeper.md, "Rolling upgrades"). Not part of scripts/test
# (it needs the older build); run it by hand:
#
#   tests/zookeeper/mixed_builds.sh OLD_BATON NEW_BATON [ROUNDS]
#
# The server comes from baton_test_servers next to NEW_BATON
# (BATON_TEST_SERVERS to override); KIND=<store kind> runs it on another
# store kind of tests/support/stores. Per round, builds X and Y alternate:
# X holds the lock (`baton run`) for 7 s; meanwhile a try by Y is refused
# (exit 75); then Y, X and Y queue, 2 s apart, and each holds 0.4 s. The
# round passes if the four commands ran one at a time in arrival order.
# Exit 0 if every round passed.
set -uo pipefail
OLD=${1:?usage: mixed_builds.sh OLD_BATON NEW_BATON [ROUNDS]}
NEW=${2:?usage: mixed_builds.sh OLD_BATON NEW_BATON [ROUNDS]}
ROUNDS=${3:-6}
KIND=${KIND:-zookeeper}
SERVERS=${BATON_TEST_SERVERS:-$(dirname "$NEW")/baton_test_servers}
[[ -x $SERVERS ]] || { echo "no $SERVERS (build baton_test_servers)" >&2; exit 64; }

WORK=$(mktemp -d "${TMPDIR:-/tmp}/baton-mixed.XXXXXX")
coproc SRV { "$SERVERS" --kind "$KIND" --dir "$WORK/servers" --no-proxy; }
trap 'echo quit >&"${SRV[1]}" 2>/dev/null || true; wait "$SRV_PID" 2>/dev/null || true; rm -rf "$WORK"' EXIT
URL=
while IFS= read -r line <&"${SRV[0]}"; do
  case $line in
    direct_url=*) URL=${line#direct_url=} ;;
    ready) break ;;
    error*) echo "$line" >&2; exit 69 ;;
  esac
done
[[ -n $URL ]] || { echo "the servers printed no URL" >&2; exit 69; }
echo "store: $URL"

fail=0
for ((r = 1; r <= ROUNDS; ++r)); do
  if ((r % 2)); then X=$OLD Y=$NEW xn=old yn=new; else X=$NEW Y=$OLD xn=new yn=old; fi
  lock=mixed-$r-$RANDOM
  log=$WORK/r$r.log
  hold() {  # hold BIN TAG SECONDS: run a command under the lock, log its span
    "$1" --store "$URL" run "$lock" --wait 60s --ttl 30s -- sh -c \
      "echo \$(date +%s%N) start $2; sleep $3; echo \$(date +%s%N) end $2" \
      >>"$log" 2>>"$WORK/r$r.err"
  }
  pids=()
  hold "$X" "1-$xn" 7 & pids+=($!)
  sleep 2.5
  "$Y" --store "$URL" acquire "$lock" --wait 0 >/dev/null 2>&1
  rc=$?
  [[ $rc == 75 ]] || { echo "round $r: a try by $yn while $xn holds: exit $rc, not 75"; fail=1; }
  hold "$Y" "2-$yn" 0.4 & pids+=($!)
  sleep 2
  hold "$X" "3-$xn" 0.4 & pids+=($!)
  sleep 2
  hold "$Y" "4-$yn" 0.4 & pids+=($!)
  wait "${pids[@]}"
  sort -n "$log" >"$log.sorted"
  order=$(awk '$2 == "start" { printf "%s ", $3 }' "$log.sorted")
  overlap=$(awk '$2 == "start" { if (h) bad = 1; h = 1 } $2 == "end" { h = 0 }
                 END { print bad + 0 }' "$log.sorted")
  echo "round $r: order: $order overlap: $overlap"
  if [[ $order != "1-$xn 2-$yn 3-$xn 4-$yn " || $overlap != 0 ]]; then
    echo "round $r FAILED:"; cat "$log.sorted" "$WORK/r$r.err"
    fail=1
  fi
done
if ((fail)); then echo "mixed builds: FAILED"; else echo "mixed builds: exclusion and FIFO held in $ROUNDS rounds"; fi
exit $fail
