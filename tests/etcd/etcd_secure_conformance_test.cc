// tests/etcd/etcd_secure_conformance_test.cc — the conformance suite on
// etcds:// with everything on: TLS with client certificates required,
// etcd authentication enabled, and a user that is not root, holding only
// the role of docs/stores/etcd.md ("Security": readwrite on the store's
// prefix). One member started for this binary (tests/etcd/etcd_secure.h);
// every client opens its own store, so its own channel and its own login.
#include <cstdlib>

#include "conformance.h"
#include "etcd_secure.h"
#include "etcd_traits.h"

namespace {

baton::testing::SecureEtcd* g_etcd = nullptr;

baton::testing::SecureEtcd& etcd() {
  if (g_etcd == nullptr) {
    g_etcd = new baton::testing::SecureEtcd("conf");
    std::atexit([] { delete g_etcd; });
  }
  return *g_etcd;
}

baton::Result<baton::Client> open_under_test(
    const baton::ClientOptions& options) {
  return baton::Client::open(etcd().url(), options);
}

}  // namespace

INSTANTIATE_CONFORMANCE(
    EtcdSecure, open_under_test,
    baton::conformance::repeated(baton::testing::etcd_traits()));
