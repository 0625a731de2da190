#!/usr/bin/env bash
# tests/install/deb_test.sh BUILD_DIR — the Debian package of a build: made
# with `cpack -G DEB`, installed on this machine with `dpkg -i`, then the
# installed programs are run (`baton --version`, `batond --version`, a
# batond started from /usr/bin on a free loopback port with the packaged
# configuration, a `baton run` against it, batond stopped with SIGTERM),
# the unit is checked with `systemd-analyze verify` where that tool exists,
# and the package is purged again. Needs root (dpkg). Run by scripts/test.
set -euo pipefail
trap 'echo "deb_test: failed at line $LINENO" >&2' ERR
build=$(cd "$1" && pwd)
if [[ $(id -u) -ne 0 ]]; then
  echo "deb_test: needs root for dpkg -i" >&2
  exit 1
fi
tmp=$(mktemp -d /tmp/baton-deb-XXXXXX)
pid=
cleanup() {
  [[ -n $pid ]] && kill -KILL "$pid" 2>/dev/null || true
  dpkg --purge baton >/dev/null 2>&1 || true
  rm -rf "$tmp"
}
trap cleanup EXIT

(cd "$build" && cpack -G DEB -B "$tmp/pkg") >"$tmp/cpack.log" 2>&1 ||
  { cat "$tmp/cpack.log" >&2; exit 1; }
deb=$(ls "$tmp"/pkg/baton_*.deb)
echo "deb_test: built $(basename "$deb") ($(du -h "$deb" | cut -f1)); depends:"
dpkg-deb -f "$deb" Depends | sed 's/^/  /'
dpkg -i "$deb" >"$tmp/dpkg.log" 2>&1 || { cat "$tmp/dpkg.log" >&2; exit 1; }

for f in /usr/bin/baton /usr/bin/batond /usr/include/baton/client.h \
  /usr/lib/libbaton.a /usr/lib/cmake/baton/batonConfig.cmake \
  /usr/lib/systemd/system/batond.service /etc/baton/batond.yaml; do
  [[ -e $f ]] || { echo "deb_test: not installed: $f" >&2; exit 1; }
done
grep -q '^ExecStart=/usr/bin/batond ' /usr/lib/systemd/system/batond.service
/usr/bin/baton --version | tee "$tmp/version"
grep -qE '^baton [0-9]+\.[0-9]+\.[0-9]+$' "$tmp/version"
grep -qE '^commit ([0-9a-f]{40}(-dirty)?|unknown)$' "$tmp/version"
/usr/bin/batond --version | tee "$tmp/dversion"
grep -qE '^batond [0-9]+\.[0-9]+\.[0-9]+$' "$tmp/dversion"

# The installed batond with the packaged configuration, on a free port.
/usr/bin/batond --config /etc/baton/batond.yaml --listen 127.0.0.1:0 \
  --metrics-listen "" --data-dir "$tmp/data" >"$tmp/batond.out" 2>&1 &
pid=$!
for _ in $(seq 200); do
  grep -q "batond ready" "$tmp/batond.out" && break
  sleep 0.05
done
port=$(sed -nE 's/.*batond ready port=([0-9]+).*/\1/p' "$tmp/batond.out")
if [[ -z $port ]]; then
  echo "deb_test: the installed batond did not start:" >&2
  cat "$tmp/batond.out" >&2
  exit 1
fi
out=$(/usr/bin/baton --store "baton://127.0.0.1:$port" run deb-test -- \
  sh -c 'echo "fencing=$BATON_FENCING_TOKEN"')
[[ $out == fencing=1 ]] || { echo "deb_test: baton run printed: $out" >&2; exit 1; }
kill -TERM "$pid"
status=0
wait "$pid" || status=$?
pid=
[[ $status -eq 0 ]] || { echo "deb_test: batond exited $status on SIGTERM" >&2; exit 1; }
echo "deb_test: baton run against the installed batond: $out"

if command -v systemd-analyze >/dev/null; then
  systemd-analyze verify /usr/lib/systemd/system/batond.service
  echo "deb_test: systemd-analyze verify batond.service: ok"
else
  echo "deb_test: systemd-analyze not installed: the unit was not verified"
fi
echo "deb_test: ok"
