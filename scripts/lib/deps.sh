#!/usr/bin/env bash
# scripts/lib/deps.sh — installs the Debian packages baton needs that are
# missing (and only those). Sourced by scripts/test and scripts/run.
#
#   baton_install_deps build     # compilers, libraries, test tools
#   baton_install_deps servers   # + real servers the store tests start
set -euo pipefail

BATON_BUILD_PACKAGES=(
  cmake g++ make pkg-config
  ninja-build lld                     # scripts/test: faster builds and links
  libgtest-dev libgmock-dev libbenchmark-dev
  libasio-dev libhiredis-dev libyaml-cpp-dev libcli11-dev libspdlog-dev libfmt-dev
  libssl-dev openssl                  # batond TLS, batons://, rediss:// (openssl: test certificates)
  libpq-dev                           # postgres:// store
  libzookeeper-mt-dev                 # zookeeper:// store
  libmariadb-dev                      # mysql:// store (Connector/C)
  libsqlite3-dev                      # sqlite:// store
  libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc  # etcd:// store
  clang libclang-rt-14-dev            # libFuzzer for the protocol fuzzer
  redis-tools python3-redis           # interop tests: redis-cli, redis-py
  faketime                            # client clocks hours off (postgres, torture)
  fiu-utils                           # torture test: fsync/write faults
  dpkg-dev                            # cpack -G DEB: dpkg-shlibdeps, the package's dependencies
  # The Python package (python/): its tests, mypy, the wheel and the
  # fresh-virtualenv install test (Debian's /usr/bin/python3).
  python3 python3-pytest python3-venv python3-build python3-wheel python3-setuptools mypy
  python3-prometheus-client           # metrics_parser_test: the reference exposition parser
)
BATON_SERVER_PACKAGES=(
  redis-server postgresql postgresql-contrib
  zookeeper                           # zookeeper:// tests (Java 17 comes with it)
  mariadb-server                      # mysql:// tests (a private mariadbd per test binary)
  etcd-server                         # etcd:// tests
  etcd-client                         # etcdctl: users, roles and auth of the etcds:// tests (tests/support/etcd_member.h)
  nftables                            # partitions between etcd members (tests/support/stores/netns.h)
  systemd                             # systemd-analyze verify of the packaged unit
  chromium-headless-shell python3-websocket  # batond status page test (label browser)
)
# bench/compare only (not scripts/test): the peers' servers and libraries,
# the raw-engine tools and the chart.
BATON_BENCH_PACKAGES=(
  jq redis-tools postgresql-contrib mariadb-server mariadb-client
  zookeeper etcd-server etcd-client
  python3-redis python3-kazoo python3-tooz python3-etcd3
  python3-psycopg2 python3-pymysql python3-matplotlib
  nodejs
)

baton_missing_packages() {
  local p
  for p in "$@"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
      echo "$p"
    fi
  done
}

# Installs those of the given packages that are missing (apt-get, as root).
baton_install_packages() {
  local missing
  missing=$(baton_missing_packages "$@")
  if [[ -z "$missing" ]]; then
    echo "deps: all $# packages present"
    return 0
  fi
  echo "deps: installing missing packages:" $missing
  local sudo=()
  if [[ $(id -u) -ne 0 ]]; then
    if command -v sudo >/dev/null; then
      sudo=(sudo)
    else
      echo "deps: not root and no sudo; install these packages: $missing" >&2
      return 1
    fi
  fi
  export DEBIAN_FRONTEND=noninteractive
  "${sudo[@]}" apt-get update -q -o Acquire::Retries=3 </dev/null
  # shellcheck disable=SC2086
  "${sudo[@]}" apt-get install -y -q --no-install-recommends \
    -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold \
    $missing </dev/null
}

baton_install_deps() {
  local want=("${BATON_BUILD_PACKAGES[@]}")
  if [[ "${1:-build}" == servers ]]; then
    want+=("${BATON_SERVER_PACKAGES[@]}")
  fi
  baton_install_packages "${want[@]}"
}
