# bench/compare_etcd.sh — the etcd group of bench/compare (`--only etcd`),
# sourced by it (uses its BATON, PY, WORK, PIDS, DURATION, CASES,
# case_flags, free_port, wait_for, bench_baton, peer, log).
#
# Starts one etcd member AND a 3-member cluster (loopback, data on /dev/shm
# like tests/etcd/etcd_process.h: etcd 3.4 fsyncs every write and has no
# flag to skip it, so on disk the figures would measure this machine's
# disk), etcd's default heartbeat (100 ms) and election timeout (1 s).
# Measures etcd:// on both, the raw floor raw-etcd:// (same gRPC client: a
# put-if-absent with the session's lease + a guarded delete per pair) and
# the python-etcd3 / npm etcd3 peers. The clients of the cluster are given
# the leader's endpoint first (a follower forwards every write to the
# leader: one hop more, for every implementation alike).

ETCD_SHM=

# start_etcd_members VAR N: N members on free loopback ports; VAR gets the
# client endpoints (comma-separated, the leader first once it is known).
# A member that dies at start (its port taken meanwhile: seen once) makes
# the whole set start again on new ports, up to 3 times.
start_etcd_members() {
  local var=$1 n=$2 i try p cluster name eps pids ports peers ok
  [[ -n $ETCD_SHM ]] || ETCD_SHM=$(mktemp -d /dev/shm/baton-compare-etcd.XXXXXX)
  for ((try = 1; try <= 3; try++)); do
    cluster="" eps="" pids=() ports=() peers=()
    for ((i = 1; i <= n; i++)); do
      # free_port in $(...) cannot record what it handed out: record here.
      p=$(free_port); USED_PORTS="${USED_PORTS:-} $p"; ports+=("$p")
      p=$(free_port); USED_PORTS="${USED_PORTS:-} $p"; peers+=("$p")
      cluster+="${cluster:+,}$var$i=http://127.0.0.1:${peers[i - 1]}"
      eps+="${eps:+,}127.0.0.1:${ports[i - 1]}"
    done
    rm -rf "${ETCD_SHM:?}/$var"*
    for ((i = 1; i <= n; i++)); do
      name=$var$i
      etcd --name "$name" --data-dir "$ETCD_SHM/$name" \
        --listen-client-urls "http://127.0.0.1:${ports[i - 1]}" \
        --advertise-client-urls "http://127.0.0.1:${ports[i - 1]}" \
        --listen-peer-urls "http://127.0.0.1:${peers[i - 1]}" \
        --initial-advertise-peer-urls "http://127.0.0.1:${peers[i - 1]}" \
        --initial-cluster "$cluster" --initial-cluster-state new \
        --initial-cluster-token "baton-bench-$var" --logger zap --log-level warn \
        >"$WORK/etcd-$name.log" 2>&1 &
      PIDS+=($!)
      pids+=($!)
    done
    ok=
    for ((i = 0; i < 200; i++)); do
      for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null || break 2; done
      if ETCDCTL_API=3 timeout 5 etcdctl --endpoints="$eps" --command-timeout=2s endpoint health \
        >/dev/null 2>&1; then
        ok=1
        break
      fi
      sleep 0.1
    done
    [[ -n $ok ]] && break
    log "etcd ($var) did not start (try $try; logs in $WORK): starting it again on new ports"
    for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  done
  [[ -n $ok ]] || { log "etcd ($var) did not start (logs in $WORK)"; exit 1; }
  # The leader first.
  local leader rest
  leader=$(ETCDCTL_API=3 etcdctl --endpoints="$eps" endpoint status -w json 2>/dev/null |
    jq -r '.[] | select(.Status.leader == .Status.header.member_id) | .Endpoint' | head -1) || leader=''
  leader=${leader#http://}
  if [[ -n $leader ]]; then
    rest=$(echo "$eps" | tr "," "\n" | { grep -vxF "$leader" || true; } | paste -sd, -)
    eps=$leader${rest:+,$rest}
  fi
  printf -v "$var" '%s' "$eps"
}

start_etcd_group() {
  start_etcd_members E1 1
  start_etcd_members E3 3
  ETCD_PORT=${E1##*:}
  log "etcd 1 member: $E1; 3 members: $E3 (leader first)"
  # Warm up both (gRPC channels, etcd's first compactions of nothing).
  local e
  for e in "$E1" "$E3"; do
    timeout 30 "$BATON" bench --store "raw-etcd://$e" --workload uncontended --clients 4 \
      --duration 2s >/dev/null 2>>"$WORK/errors.log" || true
  done
}

# etcd_rep REP: every etcd run of one repetition.
etcd_rep() {
  local rep=$1 case setup tag eps first F P
  for case in "${CASES[@]}"; do
    read -r -a F <<<"$(case_flags "$case")"
    P=("${F[@]}" --duration "$DURATION")
    for setup in "1 member:$E1" "3 members:$E3"; do
      tag=${setup%%:*}
      eps=${setup#*:}
      first=${eps%%,*}
      bench_baton "$case" "$rep" "baton etcd:// ($tag)" etcd --store "etcd://$eps/baton-bench" \
        "${P[@]}"
      if [[ $case == u* ]]; then
        # The store with a lease per key (before shared leases): a lease
        # grant and a revoke more per pair.
        bench_baton "$case" "$rep" "baton etcd:// lease=own ($tag)" etcd \
          --store "etcd://$eps/baton-bench?lease=own" "${P[@]}"
        bench_baton "$case" "$rep" "raw etcd floor ($tag)" etcd --store "raw-etcd://$eps" "${P[@]}"
      fi
      peer "$case" "$rep" "python-etcd3 Lock ($tag)" etcd "$PY" etcd3_lock.py --url "$first" "${P[@]}"
      peer "$case" "$rep" "npm etcd3 Lock ($tag)" etcd node node/etcd3.js --url "$first" "${P[@]}"
    done
    loadavg "$case/$rep"
  done
  for setup in "1 member:$E1" "3 members:$E3"; do
    tag=${setup%%:*}
    eps=${setup#*:}
    bench_baton fair "$rep" "baton etcd:// ($tag)" etcd --store "etcd://$eps/baton-bench" \
      --workload fair --clients 10 --duration "$DURATION"
    bench_baton handoff "$rep" "baton etcd:// ($tag)" etcd --store "etcd://$eps/baton-bench" \
      --workload handoff --clients 2 --duration "$DURATION"
  done
}
