// tests/zookeeper/zookeeper_digest_conformance_test.cc — the conformance
// suite on zookeeper:// with digest credentials: every client gives them
// (userinfo in the URL), so every node carries the digest ACL
// (docs/stores/zookeeper.md, "Security"). One private ZooKeeper 3.8
// server for this binary (tests/zookeeper/zk_process.h). ctest fails the
// binary if its output ever shows the password.
#include <cstdlib>
#include <string>

#include "conformance.h"
#include "zk_process.h"

namespace {

baton::testing::ZkProcess* g_server = nullptr;

baton::testing::ZkProcess& server() {
  if (g_server == nullptr) {
    // No rule of the suite restarts the server: no fsync of every write.
    baton::testing::ZkProcess::Options o;
    o.force_sync = false;
    g_server = new baton::testing::ZkProcess(o);
    std::atexit([] { delete g_server; });
  }
  return *g_server;
}

baton::Result<baton::Client> open_under_test(
    const baton::ClientOptions& options) {
  return baton::testing::open_zk_client(
      "zookeeper://baton:baton-zk-secret-5Kp@" + server().hostport() +
          "/baton-digest?session_timeout=4s",
      options);
}

baton::conformance::StoreTraits traits() {
  return baton::conformance::StoreTraits{};
}

}  // namespace

INSTANTIATE_CONFORMANCE(ZooKeeperDigest, open_under_test,
                        baton::conformance::repeated(traits()));
