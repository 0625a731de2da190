// tests/etcd/etcd_conformance_test.cc — the conformance suite on etcd://,
// against one private etcd 3.4 member started for this binary
// (tests/etcd/etcd_process.h). Every client opens its own store, so its own
// gRPC channel, as separate processes would.
#include <cstdlib>

#include "conformance.h"
#include "etcd_process.h"
#include "etcd_traits.h"

namespace {

baton::testing::EtcdCluster* g_cluster = nullptr;

baton::testing::EtcdCluster& cluster() {
  if (g_cluster == nullptr) {
    g_cluster = new baton::testing::EtcdCluster(1);
    std::atexit([] { delete g_cluster; });
  }
  return *g_cluster;
}

baton::Result<baton::Client> open_under_test(
    const baton::ClientOptions& options) {
  return baton::Client::open(cluster().url(), options);
}

}  // namespace

INSTANTIATE_CONFORMANCE(Etcd, open_under_test, baton::testing::etcd_traits());
