// tests/cli/guard_stores.h — the stores cli_guard_test runs its scenarios
// on: sqlite:// (a file, no server) and a private server of each other
// kind this build and machine have, started on first use on a free
// loopback port and stopped when the binary exits (one per kind).
#ifndef BATON_TESTS_CLI_GUARD_STORES_H_
#define BATON_TESTS_CLI_GUARD_STORES_H_

#include <sys/types.h>

#include <string>
#include <vector>

namespace baton::testing {

struct StoreUnderTest {
  std::string name;  // "sqlite", "batond", ...
  std::string url;   // what `baton --store` takes
  pid_t pid = 0;     // batond's process (to stop it), else 0
};

// The kinds to run, in a fixed order (test names use them).
std::vector<std::string> store_kinds();

// The store of `kind`, started on first use; nullptr with *error saying
// why it could not start.
const StoreUnderTest* store_under_test(const std::string& kind,
                                       std::string* error);

}  // namespace baton::testing

#endif  // BATON_TESTS_CLI_GUARD_STORES_H_
