// tests/etcd/etcd_cluster_conformance_test.cc — the conformance suite on
// etcd:// against a private 3-member etcd 3.4 cluster started for this
// binary; the URL lists all three members, so every client fails over
// between them. (The 1-member run: etcd_conformance_test.cc.)
#include <cstdlib>

#include "conformance.h"
#include "etcd_process.h"
#include "etcd_traits.h"

namespace {

baton::testing::EtcdCluster* g_cluster = nullptr;

baton::testing::EtcdCluster& cluster() {
  if (g_cluster == nullptr) {
    g_cluster = new baton::testing::EtcdCluster(3);
    std::atexit([] { delete g_cluster; });
  }
  return *g_cluster;
}

baton::Result<baton::Client> open_under_test(
    const baton::ClientOptions& options) {
  return baton::Client::open(cluster().url(), options);
}

}  // namespace

INSTANTIATE_CONFORMANCE(
    Etcd3Members, open_under_test,
    baton::conformance::repeated(baton::testing::etcd_traits()));
