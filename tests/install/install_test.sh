#!/usr/bin/env bash
# tests/install/install_test.sh BUILD_DIR SOURCE_DIR — `cmake --install` of
# the build into a fresh prefix, then a C++ program outside the tree found
# by find_package(baton) is configured, built and run against it, and a C
# program against libbaton.so twice: through `pkg-config baton` and through
# find_package(baton) (target baton::c); a store of its own is proven by the
# installed conformance kit; the installed batond and baton must run too.
set -euo pipefail
trap 'echo "install_test: failed at line $LINENO" >&2' ERR
build=$1
src=$2
tmp=$(mktemp -d /tmp/baton-install-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >"$tmp/install.log"
for f in bin/batond bin/baton include/baton/client.h include/baton/baton.h \
  share/baton/batond.yaml share/baton/batond.service; do
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
# build_consumer NAME: configures and builds tests/install/NAME against
# the installed prefix with find_package(baton).
build_consumer() {
  cmake -S "$src/tests/install/$1" -B "$tmp/$1" -DCMAKE_PREFIX_PATH="$tmp/prefix" \
    -DCMAKE_BUILD_TYPE=Release >"$tmp/$1.configure.log" ||
    { cat "$tmp/$1.configure.log" >&2; exit 1; }
  cmake --build "$tmp/$1" -j2 >"$tmp/$1.build.log" ||
    { cat "$tmp/$1.build.log" >&2; exit 1; }
}
build_consumer consumer
out=$("$tmp/consumer/consumer")
echo "$out"
[[ "$out" == ok\ fencing=* ]]

# The C ABI: libbaton.so.<N> (and its development link) and baton.pc, in
# the library directory GNUInstallDirs chose.
pc=$(find "$tmp/prefix" -name baton.pc -path '*/pkgconfig/*')
[[ -n "$pc" ]] || { echo "not installed: baton.pc" >&2; exit 1; }
libdir=$(dirname "$(dirname "$pc")")
ls "$libdir"/libbaton.so.[0-9]* >/dev/null && [[ -L "$libdir/libbaton.so" ]] ||
  { echo "not installed: $libdir/libbaton.so*" >&2; exit 1; }
export PKG_CONFIG_PATH="$libdir/pkgconfig"
[[ "$(pkg-config --variable=libdir baton)" -ef "$libdir" ]] ||
  { echo "baton.pc points at $(pkg-config --variable=libdir baton)" >&2; exit 1; }
# shellcheck disable=SC2046 # pkg-config's flags are separate words
cc -std=c11 -Wall -Wextra -Wpedantic -Werror "$src/tests/install/consumer_c/main.c" \
  -o "$tmp/consumer_c_pc" $(pkg-config --cflags --libs baton) \
  -Wl,-rpath,"$(pkg-config --variable=libdir baton)" >"$tmp/pc.log" 2>&1 ||
  { cat "$tmp/pc.log" >&2; exit 1; }
out=$("$tmp/consumer_c_pc")
echo "C via pkg-config: $out"
[[ "$out" == ok\ fencing=* ]]
build_consumer consumer_c
out=$("$tmp/consumer_c/consumer_c")
echo "C via find_package: $out"
[[ "$out" == ok\ fencing=* ]]

# The conformance kit from outside the tree: a store of its own (a
# wrapper around sqlite:// through the public Store interface only) passes
# the whole suite (tests/install/store_kit).
build_consumer store_kit
"$tmp/store_kit/store_kit" --gtest_brief=1 >"$tmp/store_kit.log" 2>&1 ||
  { tail -50 "$tmp/store_kit.log" >&2; exit 1; }
grep -E '^\[  PASSED  \]' "$tmp/store_kit.log"
if grep -q 'SKIPPED' "$tmp/store_kit.log"; then
  echo "install_test: the kit skipped tests on the wrapped store:" >&2
  grep -A3 SKIPPED "$tmp/store_kit.log" >&2
  exit 1
fi
echo "install test: ok (prefix $tmp/prefix)"
