#!/usr/bin/env bash
# tests/upgrade/rolling_upgrade.sh — a fleet upgraded one host at a time:
# an older baton and a newer one on the same store at the same time must
# exclude each other and share one FIFO queue, or the older one must be
# refused loudly. Never may both hold the lock. (docs/design.md, "Rolling
# upgrades".) Not part of scripts/test: it needs a build of an older
# commit.
#
#   tests/upgrade/rolling_upgrade.sh OLD_BATON NEW_BATON [KIND...]
#
# OLD_BATON / NEW_BATON: the `baton` binaries of the two builds (Release or
# not). KIND: store kinds of tests/support/stores (default: batond postgres
# redis redlock zookeeper mysql etcd sqlite); the servers are started by the
# new build's baton_test_servers (BATON_TEST_SERVERS, default: next to
# NEW_BATON). Per kind, three checks:
#   exclusion  each build's holder makes the other build's try fail (exit
#              75), both ways round;
#   fifo       one holder, then waiters of alternating builds queued 300 ms
#              apart: they are granted in arrival order with rising fencing
#              tokens;
#   overlap    4 holders of each build take one lock 10 times each; on one
#              clock (CLOCK_REALTIME, date +%s%N) no two critical sections
#              overlap.
# A kind where the older build is refused with an error naming the versions
# passes as "refused": from then on the fifo check wants the newer build's
# two waiters in order and the older build's two refused naming the
# versions, and the overlap check the newer build's 40 sections one at a
# time and each of the older build's 40 runs refused so. Prints one line
# per check; exits 1 if any failed.
set -uo pipefail
OLD=${1:?usage: rolling_upgrade.sh OLD_BATON NEW_BATON [KIND...]}
NEW=${2:?usage: rolling_upgrade.sh OLD_BATON NEW_BATON [KIND...]}
shift 2
KINDS=("$@")
((${#KINDS[@]})) || KINDS=(batond postgres redis redlock zookeeper mysql etcd sqlite)
SERVERS=${BATON_TEST_SERVERS:-$(dirname "$NEW")/baton_test_servers}
[[ -x $SERVERS ]] || { echo "no $SERVERS (build baton_test_servers)" >&2; exit 64; }
WORK=$(mktemp -d "${TMPDIR:-/tmp}/baton-upgrade.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
failed=0

say() { printf '%-10s %-20s %s\n' "$1" "$2" "$3"; }

# check_exclusion URL HOLDER OTHER: HOLDER's run holds; OTHER's try fails.
check_exclusion() {
  local url=$1 holder=$2 other=$3 name=upg-excl-$RANDOM out code pid
  "$holder" --store "$url" run "$name" --ttl 10s -- sh -c "touch '$WORK/held'; sleep 3" \
    >/dev/null 2>"$WORK/holder.err" &
  pid=$!
  for _ in $(seq 100); do [[ -e $WORK/held ]] && break; sleep 0.05; done
  if [[ ! -e $WORK/held ]]; then
    wait "$pid"
    echo "holder never ran: $(tail -1 "$WORK/holder.err")"
    return 2
  fi
  out=$("$other" --store "$url" run "$name" --wait 0 -- true 2>&1)
  code=$?
  wait "$pid"
  rm -f "$WORK/held"
  if [[ $code == 75 ]]; then echo "refused while held (75)"; return 0; fi
  if grep -qi "version" <<<"$out" && [[ $code != 0 ]]; then
    echo "older build refused: $out"
    return 0
  fi
  echo "the other build was not refused: exit $code: $out"
  return 1
}

# check_fifo URL: a holder of NEW, then waiters OLD NEW OLD NEW.
check_fifo() {
  local url=$1 name=upg-fifo-$RANDOM log=$WORK/fifo.log pids=() i bin
  : >"$log"
  "$NEW" --store "$url" run "$name" --ttl 20s -- sh -c "touch '$WORK/held'; sleep 2.5" \
    >/dev/null 2>&1 &
  pids+=($!)
  for _ in $(seq 100); do [[ -e $WORK/held ]] && break; sleep 0.05; done
  local order=(old new old new)
  for i in 0 1 2 3; do
    [[ ${order[$i]} == old ]] && bin=$OLD || bin=$NEW
    "$bin" --store "$url" run "$name" --wait 30s --ttl 20s -- \
      sh -c "echo \"$i \$BATON_FENCING_TOKEN\" >> '$log'; sleep 0.2" \
      >/dev/null 2>>"$WORK/fifo.err" &
    pids+=($!)
    sleep 0.3
  done
  for p in "${pids[@]}"; do wait "$p"; done
  rm -f "$WORK/held"
  local got tokens
  got=$(awk '{printf "%s", $1}' "$log")
  tokens=$(awk '{print $2}' "$log" | paste -sd' ')
  if [[ $got == 0123 ]] && sort -n -c <(awk '{print $2}' "$log") 2>/dev/null; then
    echo "granted in arrival order (old new old new), fencing $tokens"
    return 0
  fi
  # The older build refused loudly (REFUSED=1, from the exclusion check):
  # the newer build's waiters keep their order, and each of the older
  # build's two was refused naming the versions.
  if ((REFUSED)) && [[ $got == 13 ]] &&
    [[ $(grep -ci version "$WORK/fifo.err") -ge 2 ]] &&
    sort -n -c <(awk '{print $2}' "$log") 2>/dev/null; then
    echo "the newer build's waiters in arrival order, fencing $tokens; the older build's refused: $(grep -i -m1 version "$WORK/fifo.err")"
    return 0
  fi
  echo "order $got (want 0123), fencing $tokens $(tail -1 "$WORK/fifo.err" 2>/dev/null)"
  return 1
}

# check_overlap URL: 4 holders per build, 10 critical sections each.
check_overlap() {
  local url=$1 name=upg-overlap-$RANDOM log=$WORK/overlap.log pids=() b i
  : >"$log"
  for b in "$OLD" "$NEW"; do
    for i in 1 2 3 4; do
      (
        for _ in $(seq 10); do
          "$b" --store "$url" run "$name" --wait 60s --ttl 5s -- \
            sh -c "echo \"s \$(date +%s%N)\" >> '$log'; sleep 0.02; echo \"e \$(date +%s%N)\" >> '$log'" \
            >/dev/null 2>>"$WORK/overlap.err" || echo "x 0" >>"$log"
        done
      ) &
      pids+=($!)
    done
  done
  for p in "${pids[@]}"; do wait "$p"; done
  # With REFUSED=1 the older build's 40 runs must each fail, naming the
  # versions, and the newer build's 40 must run one at a time.
  local refusals=0
  [[ -f $WORK/overlap.err ]] && refusals=$(grep -ci version "$WORK/overlap.err")
  /usr/bin/python3 - "$log" "$REFUSED" "$refusals" <<'PY'
import sys
refused, refusals = sys.argv[2] == "1", int(sys.argv[3])
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
errors = sum(1 for k, _ in rows if k == "x")
events = sorted((int(t), k) for k, t in rows if k in "se")
depth = worst = 0
for _, k in events:
    depth += 1 if k == "s" else -1
    worst = max(worst, depth)
sections = sum(1 for _, k in events if k == "s")
print(f"{sections} sections, at most {worst} at once, {errors} runs failed"
      + (f" ({refusals} refusals naming the versions)" if refused else ""))
if refused:
    sys.exit(0 if worst <= 1 and sections == 40 and errors == 40 and refusals >= 40 else 1)
sys.exit(0 if worst <= 1 and errors == 0 and sections == 80 else 1)
PY
}

for kind in "${KINDS[@]}"; do
  dir=$WORK/$kind
  coproc SRV { "$SERVERS" --kind "$kind" --dir "$dir" --no-proxy; }
  url=
  while IFS= read -r line <&"${SRV[0]}"; do
    case $line in
      direct_url=*) url=${line#direct_url=} ;;
      ready | error*) break ;;
    esac
  done
  if [[ -z $url ]]; then
    say "$kind" servers "FAILED to start: $line"
    failed=1
    continue
  fi
  REFUSED=0
  rm -f "$WORK/fifo.err" "$WORK/overlap.err"
  for check in "exclusion old-holds" "exclusion new-holds" fifo overlap; do
    case $check in
      "exclusion old-holds") msg=$(check_exclusion "$url" "$OLD" "$NEW") ;;
      "exclusion new-holds") msg=$(check_exclusion "$url" "$NEW" "$OLD") ;;
      fifo) msg=$(check_fifo "$url") ;;
      overlap) msg=$(check_overlap "$url") ;;
    esac
    if [[ $? == 0 ]]; then
      [[ $msg == "older build refused"* ]] && REFUSED=1
      say "$kind" "$check" "ok: $msg"
    else
      say "$kind" "$check" "FAILED: $msg"
      failed=1
    fi
  done
  echo quit >&"${SRV[1]}"
  wait "$SRV_PID" 2>/dev/null
done
exit $failed
