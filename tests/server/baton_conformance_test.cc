// tests/server/baton_conformance_test.cc — the conformance suite on
// baton:// and on batons:// (TLS, client certificate), as a user with every
// permission (AUTH user password), against one real
// batond with both listeners, started on free loopback ports.
#include <memory>

#include "baton_test_server.h"
#include "conformance.h"

namespace {

baton::Result<baton::Client> open_baton(const baton::ClientOptions& options) {
  return baton::Client::open(baton::testing::baton_url(), options);
}

baton::Result<baton::Client> open_batons(const baton::ClientOptions& options) {
  return baton::Client::open(baton::testing::batons_url(), options);
}

}  // namespace

INSTANTIATE_CONFORMANCE(Baton, open_baton);
INSTANTIATE_ENDED_LEASE_SUITE(Baton, open_baton);
INSTANTIATE_CONFORMANCE(Batons, open_batons, baton::conformance::repeated());
