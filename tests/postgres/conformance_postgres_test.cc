// tests/postgres/conformance_postgres_test.cc — the conformance suite on
// postgres://, against a private PostgreSQL 15 started for this binary.
// Every client opens its own store (own pool and LISTEN connection), as
// separate processes would.
#include "conformance.h"
#include "pg_server.h"

namespace {

baton::Result<baton::Client> open_pg(const baton::ClientOptions& options) {
  return baton::Client::open(baton::testing::pg_server().url(), options);
}

}  // namespace

INSTANTIATE_CONFORMANCE(Postgres, open_pg, [] {
  baton::conformance::StoreTraits traits;
  traits.unsupported["watch"] =
      "PostgreSQL has no change feed over a table without a NOTIFY in every "
      "lock call, which would tax every caller for the sake of a watcher: "
      "baton status --serve polls";
  return traits;
}());
