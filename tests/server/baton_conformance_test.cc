// tests/server/baton_conformance_test.cc — the conformance suite on
// baton://, against one real batond started on a free loopback port.
#include <memory>

#include "batond_process.h"
#include "conformance.h"

namespace {

baton::testing::BatondProcess& server() {
  static auto* p = new baton::testing::BatondProcess();
  static bool registered = [] {
    std::atexit([] { delete p; });
    return true;
  }();
  (void)registered;
  return *p;
}

baton::Result<baton::Client> open_baton(const baton::ClientOptions& options) {
  return baton::Client::open(server().url(), options);
}

}  // namespace

INSTANTIATE_CONFORMANCE(Baton, open_baton);
INSTANTIATE_ENDED_LEASE_SUITE(Baton, open_baton);
