// tests/cli/guard_stores.h — the stores cli_guard_test runs its scenarios
// on: sqlite:// (a file, no server) and a private server (or cluster) of
// every other kind, from the shared test library baton_test_stores
// (tests/support/stores/), started on first use on free loopback ports
// without proxies and stopped when the binary exits (one per kind).
#ifndef BATON_TESTS_CLI_GUARD_STORES_H_
#define BATON_TESTS_CLI_GUARD_STORES_H_

#include <string>

#include "tests/support/stores/store_cluster.h"

namespace baton::testing {

struct StoreUnderTest {
  std::string name;                 // "sqlite", "batond", ...
  std::string url;                  // what `baton --store` takes
  StoreCluster* cluster = nullptr;  // its servers (freeze(), ...)
};

// The store of `kind` (sqlite, batond, postgres, mysql, redis, zookeeper,
// etcd), started on first use; nullptr with *error saying why it could not
// start.
const StoreUnderTest* store_under_test(const std::string& kind,
                                       std::string* error);
// Stops its servers (if started); a later store_under_test starts anew.
void stop_store_under_test(const std::string& kind);

}  // namespace baton::testing

#endif  // BATON_TESTS_CLI_GUARD_STORES_H_
