// tests/sqlite/sqlite_conformance_test.cc — the conformance suite on
// sqlite://, on one database file in a temp dir made for this binary (no
// server: the "fixture" is the directory). The directory is on tmpfs where
// there is one: the suite checks the contract's meaning, and fsync on a disk
// only made it slow (31 s instead of 20; 118 s under ASan). Durability on a
// real disk (synchronous=FULL, kill -9 mid-transaction, disk full) is
// sqlite_store_test's part, which stays in the temp directory. Every client
// opens its own store (own connections), as separate processes would. No
// rule is marked unsupported (shared mode, rule 18, included).
#include <cstdlib>

#include "conformance.h"
#include "sqlite_dir.h"

namespace {

baton::Result<baton::Client> open_under_test(
    const baton::ClientOptions& options) {
  static baton::testing::SqliteDir dir(
      baton::testing::memory_backed_dir());  // removed at exit
  return baton::Client::open(dir.url("conformance.db"), options);
}

baton::conformance::StoreTraits traits() {
  baton::conformance::StoreTraits t;
  return t;
}

}  // namespace

INSTANTIATE_CONFORMANCE(SQLite, open_under_test, traits());
