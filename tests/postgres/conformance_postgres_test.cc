// tests/postgres/conformance_postgres_test.cc — the conformance suite on
// postgres://, against a private PostgreSQL 15 started for this binary.
// Every client opens its own store (own pool and LISTEN connection), as
// separate processes would.
#include "conformance.h"
#include "pg_server.h"
#include "postgres_traits.h"

namespace {

baton::Result<baton::Client> open_pg(const baton::ClientOptions& options) {
  return baton::Client::open(baton::testing::pg_server().url(), options);
}

}  // namespace

INSTANTIATE_CONFORMANCE(Postgres, open_pg, baton::testing::postgres_traits());
