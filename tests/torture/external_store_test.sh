#!/usr/bin/env bash
# tests/torture/external_store_test.sh TORTURE BATOND — baton_torture
# against a store it did not start (--store URL): a batond started here on
# a free loopback port, stopped by pid. Two runs, so the second one meets
# the first one's leftovers (leases of killed workers, the counter) and
# must not be confused by them (each run uses names of its own).
set -euo pipefail
torture=$1
batond=$2
dir=$(mktemp -d /tmp/baton-torture-ext.XXXXXX)
"$batond" --listen 127.0.0.1:0 --data-dir "$dir/data" --log-level warn \
  >"$dir/batond.log" 2>&1 &
pid=$!
trap 'kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; rm -rf "$dir"' EXIT
port=
for _ in $(seq 100); do
  port=$(sed -n 's/^batond ready port=\([0-9]*\).*/\1/p' "$dir/batond.log")
  [[ -n $port ]] && break
  sleep 0.1
done
[[ -n $port ]] || { echo "batond did not start:"; cat "$dir/batond.log"; exit 1; }
"$torture" --store "baton://127.0.0.1:$port" --seed 9100 --duration 6s --runs 2
