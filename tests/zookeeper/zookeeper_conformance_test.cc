// tests/zookeeper/zookeeper_conformance_test.cc — the conformance suite on
// zookeeper://, against one private ZooKeeper 3.8 server started for this
// binary (tests/zookeeper/zk_process.h). Every client opens its own store,
// so its own ZooKeeper session, as separate processes would. Nothing is
// marked unsupported: shared mode (rule 18) runs too.
#include <cstdlib>

#include "conformance.h"
#include "zk_process.h"

namespace {

baton::testing::ZkProcess* g_server = nullptr;

baton::testing::ZkProcess& server() {
  if (g_server == nullptr) {
    // No rule of the suite restarts the server: skip the fsync of every
    // write, which the suite's thousands of writes would wait for on a
    // shared disk. zookeeper_store_test keeps forceSync=yes.
    baton::testing::ZkProcess::Options o;
    o.force_sync = false;
    g_server = new baton::testing::ZkProcess(o);
    std::atexit([] { delete g_server; });
  }
  return *g_server;
}

baton::Result<baton::Client> open_under_test(
    const baton::ClientOptions& options) {
  return baton::testing::open_zk_client(server().url(), options);
}

baton::conformance::StoreTraits traits() {
  return baton::conformance::StoreTraits{};
}

}  // namespace

INSTANTIATE_CONFORMANCE(ZooKeeper, open_under_test, traits());
