// tests/mysql/mysql_conformance_test.cc — the conformance suite on
// mysql://, against one private MariaDB 10.11 started for this binary
// (tests/mysql/my_process.h), durable commits on. Every client opens its
// own store (own connection pool), as separate processes would. No rule is
// marked unsupported (shared mode, rule 18, included).
#include <cstdlib>

#include "conformance.h"
#include "my_process.h"
#include "mysql_traits.h"

namespace {

baton::testing::MyProcess* g_server = nullptr;

baton::testing::MyProcess& server() {
  if (g_server == nullptr) {
    g_server = new baton::testing::MyProcess();
    std::atexit([] { delete g_server; });
  }
  return *g_server;
}

baton::Result<baton::Client> open_under_test(
    const baton::ClientOptions& options) {
  return baton::Client::open(server().url(), options);
}

}  // namespace

INSTANTIATE_CONFORMANCE(MySQL, open_under_test, baton::testing::mysql_traits());
