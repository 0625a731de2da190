#!/usr/bin/env bash
# tests/install/install_test.sh BUILD_DIR SOURCE_DIR — `cmake --install` of
# the build into a fresh prefix, then a program outside the tree found by
# find_package(baton) is configured, built and run against it; the
# installed batond and baton must run too.
set -euo pipefail
trap 'echo "install_test: failed at line $LINENO" >&2' ERR
build=$1
src=$2
tmp=$(mktemp -d /tmp/baton-install-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >"$tmp/install.log"
for f in bin/batond bin/baton include/baton/client.h share/baton/batond.yaml \
  share/baton/batond.service; do
  [[ -e "$tmp/prefix/$f" ]] || { echo "not installed: $f" >&2; exit 1; }
done
"$tmp/prefix/bin/baton" --help >/dev/null
"$tmp/prefix/bin/batond" --help >/dev/null
# The sample configuration is one batond accepts (on a free port here);
# SIGTERM stops it gracefully with status 0.
"$tmp/prefix/bin/batond" --config "$tmp/prefix/share/baton/batond.yaml" \
  --listen 127.0.0.1:0 --metrics-listen "" --data-dir "$tmp/data" >"$tmp/batond.out" 2>&1 &
pid=$!
for _ in $(seq 200); do
  grep -q "batond ready" "$tmp/batond.out" && break
  sleep 0.05
done
if ! grep -q "batond ready" "$tmp/batond.out"; then
  kill -KILL "$pid" 2>/dev/null || true
  echo "install_test: the installed batond did not start:" >&2
  cat "$tmp/batond.out" >&2
  exit 1
fi
kill -TERM "$pid"
status=0
wait "$pid" || status=$?
if [[ $status -ne 0 ]]; then
  echo "install_test: batond exited $status on SIGTERM:" >&2
  cat "$tmp/batond.out" >&2
  exit 1
fi
cmake -S "$src/tests/install/consumer" -B "$tmp/consumer" \
  -DCMAKE_PREFIX_PATH="$tmp/prefix" -DCMAKE_BUILD_TYPE=Release >"$tmp/configure.log" ||
  { cat "$tmp/configure.log" >&2; exit 1; }
cmake --build "$tmp/consumer" -j2 >"$tmp/build.log" ||
  { cat "$tmp/build.log" >&2; exit 1; }
out=$("$tmp/consumer/consumer")
echo "$out"
[[ "$out" == ok\ fencing=* ]]
echo "install test: ok (prefix $tmp/prefix)"
