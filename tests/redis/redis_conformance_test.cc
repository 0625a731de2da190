// tests/redis/redis_conformance_test.cc — the conformance suite on redis://
// (one private redis-server) or, built with REDLOCK_N, on redlock:// over
// REDLOCK_N private instances.
#include <cstdlib>
#include <memory>
#include <vector>

#include "conformance.h"
#include "redis_process.h"

#ifndef REDLOCK_N
#define REDLOCK_N 0
#endif

namespace {

using Servers = std::vector<std::unique_ptr<baton::testing::RedisProcess>>;
Servers* g_servers = nullptr;

Servers& servers() {
  if (g_servers == nullptr) {
    g_servers = new Servers();
    for (int i = 0; i < (REDLOCK_N == 0 ? 1 : REDLOCK_N); ++i) {
      g_servers->push_back(std::make_unique<baton::testing::RedisProcess>());
    }
    std::atexit([] { delete g_servers; });
  }
  return *g_servers;
}

baton::Result<baton::Client> open_under_test(
    const baton::ClientOptions& options) {
  const std::string url =
      REDLOCK_N == 0 ? servers()[0]->url()
                     // A per-instance timeout (ms) well above the
                     // default 250ms: the suite's 16-thread rules
                     // run beside other tests on 2 shared cores,
                     // where 250ms without a reply happens
                     // without any fault.
                     : baton::testing::redlock_url(servers(), "?timeout=1000");
  return baton::testing::open_client(url, options);
}

baton::conformance::StoreTraits traits() {
  baton::conformance::StoreTraits t;
  if (REDLOCK_N != 0) {
    t.unsupported["counters"] =
        "redlock:// has no atomic read-modify-write across independent "
        "masters; counters are offered by redis:// only";
  }
  return t;
}

}  // namespace

#if REDLOCK_N == 0
INSTANTIATE_CONFORMANCE(Redis, open_under_test, traits());
#elif REDLOCK_N == 3
INSTANTIATE_CONFORMANCE(Redlock3, open_under_test, traits());
#else
INSTANTIATE_CONFORMANCE(Redlock5, open_under_test,
                        baton::conformance::repeated(traits()));
#endif
