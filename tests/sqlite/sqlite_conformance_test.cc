// tests/sqlite/sqlite_conformance_test.cc — the conformance suite on
// sqlite://, on one database file in a temp dir made for this binary (no
// server: the "fixture" is the directory). Every client opens its own store
// (own connections), as separate processes would. Only shared mode (rule
// 18) is marked unsupported: not implemented here yet.
#include <cstdlib>

#include "conformance.h"
#include "sqlite_dir.h"

namespace {

baton::Result<baton::Client> open_under_test(
    const baton::ClientOptions& options) {
  static baton::testing::SqliteDir dir;  // removed at exit
  return baton::Client::open(dir.url("conformance.db"), options);
}

baton::conformance::StoreTraits traits() {
  baton::conformance::StoreTraits t;
  return t;
}

}  // namespace

INSTANTIATE_CONFORMANCE(SQLite, open_under_test, traits());
