#!/usr/bin/env bash
# bench/ab.sh — two builds of baton against each other on one store kind,
# interleaved on ONE private server (or set of servers), so that a noisy
# machine hits both alike. For "no store slower by more than 5 %" checks of
# a change: build the old and the new tree (Release), then
#
#   bench/ab.sh OLD_BATON NEW_BATON KIND
#
# KIND is a store kind of tests/support/stores (batond, postgres, redis,
# redlock, zookeeper, mysql, etcd, sqlite); the servers are started by the
# new tree's baton_test_servers (BATON_TEST_SERVERS, default: next to
# NEW_BATON), without proxies, and stopped at the end. Per round and
# workload, OLD and NEW run `baton bench` in alternating order. Prints one
# line per run, then per workload the medians and NEW/OLD ratios
# (pairs/s, and handoff p50 where the workload has one).
#
# Environment: ROUNDS=3 DURATION=4s
#   WORKLOADS="uncontended:1 uncontended:50 contended:8"  (workload:clients;
#   contended runs all clients on one lock)
#   OLD_QUERY, NEW_QUERY: URL options added for that build only, e.g.
#   OLD_QUERY=schema=old NEW_QUERY=schema=new for a store whose stored
#   layout has a new version (the newer build migrates it, and the older
#   one then refuses it)
#   OLD_ARGS, NEW_ARGS: `baton bench` flags for that side only; with the
#   same binary twice, an A/B of one option, e.g. NEW_ARGS=--metrics for
#   the cost of the observer and its Prometheus metrics
set -euo pipefail
OLD=${1:?usage: bench/ab.sh OLD_BATON NEW_BATON KIND}
NEW=${2:?usage: bench/ab.sh OLD_BATON NEW_BATON KIND}
KIND=${3:?usage: bench/ab.sh OLD_BATON NEW_BATON KIND}
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-4s}
WORKLOADS=${WORKLOADS:-"uncontended:1 uncontended:50 contended:8"}
SERVERS=${BATON_TEST_SERVERS:-$(dirname "$NEW")/baton_test_servers}
[[ -x $SERVERS ]] || { echo "ab.sh: no $SERVERS (build baton_test_servers)" >&2; exit 64; }

WORK=$(mktemp -d "${TMPDIR:-/tmp}/baton-ab.XXXXXX")
coproc SRV { "$SERVERS" --kind "$KIND" --dir "$WORK/servers" --no-proxy; }
trap 'echo quit >&"${SRV[1]}" 2>/dev/null || true; wait "$SRV_PID" 2>/dev/null || true; rm -rf "$WORK"' EXIT
URL=
while IFS= read -r line <&"${SRV[0]}"; do
  case $line in
    direct_url=*) URL=${line#direct_url=} ;;
    ready) break ;;
    error*) echo "ab.sh: $line" >&2; exit 69 ;;
  esac
done
[[ -n $URL ]] || { echo "ab.sh: the servers printed no URL" >&2; exit 69; }
echo "store: $URL"

results=$WORK/results.tsv
run() {  # run BIN LABEL WORKLOAD CLIENTS ROUND
  local bin=$1 label=$2 workload=$3 clients=$4 round=$5 locks=() json url=$URL
  local query=${OLD_QUERY:-} args=${OLD_ARGS:-}
  [[ $label == new ]] && query=${NEW_QUERY:-} args=${NEW_ARGS:-}
  [[ -n $query ]] && url+=$([[ $url == *\?* ]] && echo "&" || echo "?")$query
  [[ $workload == contended ]] && locks=(--locks 1)
  json=$(timeout 120 "$bin" bench --store "$url" --workload "$workload" \
    --clients "$clients" "${locks[@]}" --duration "$DURATION" \
    --prefix "ab-$label-$round-$RANDOM" --json $args) || {
    echo "ab.sh: $label $workload:$clients failed" >&2
    return 0
  }
  /usr/bin/python3 - "$label" "$workload:$clients" "$round" "$json" >>"$results" <<'PY'
import json, sys
label, wl, rnd, text = sys.argv[1:5]
r = json.loads(text)
h = r.get("handoff", {}).get("p50_us", 0) or 0
print(f"{label}\t{wl}\t{rnd}\t{r['pairs_per_sec']:.0f}\t{h}\t{r.get('errors', 0)}")
PY
  tail -1 "$results" | awk -F'\t' '{printf "  %-4s %-16s round %s: %7s pairs/s  handoff p50 %6s us  errors %s\n", $1, $2, $3, $4, $5, $6}'
}

for ((round = 1; round <= ROUNDS; ++round)); do
  for wl in $WORKLOADS; do
    workload=${wl%%:*} clients=${wl##*:}
    if ((round % 2)); then
      run "$OLD" old "$workload" "$clients" "$round"
      run "$NEW" new "$workload" "$clients" "$round"
    else
      run "$NEW" new "$workload" "$clients" "$round"
      run "$OLD" old "$workload" "$clients" "$round"
    fi
  done
done

/usr/bin/python3 - "$results" <<'PY'
import statistics, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])]
by = {}
for label, wl, rnd, pairs, hand, err in rows:
    by.setdefault((wl, label), []).append((float(pairs), float(hand)))
print("\nworkload            old pairs/s  new pairs/s  new/old   old p50   new p50  new/old")
for wl in dict.fromkeys(w for w, _ in by):
    o, n = by.get((wl, "old"), []), by.get((wl, "new"), [])
    if not o or not n:
        continue
    op, np_ = statistics.median(p for p, _ in o), statistics.median(p for p, _ in n)
    oh, nh = statistics.median(h for _, h in o), statistics.median(h for _, h in n)
    hr = f"{nh / oh:6.2f}x" if oh and nh else "     -"
    print(f"{wl:18s} {op:12.0f} {np_:12.0f} {np_ / op:7.2f}x {oh:9.0f} {nh:9.0f} {hr}")
PY
