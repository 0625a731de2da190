// tests/postgres/conformance_postgres_test.cc — the conformance suite on
// postgres://, against a private PostgreSQL 15 started for this binary.
// Every client opens its own store (own pool and LISTEN connection), as
// separate processes would; the scheme is registered so Client::open works
// whether or not the registry has wired it yet.
#include "conformance.h"
#include "pg_server.h"
#include "stores/postgres/postgres_store.h"
#include "stores/registry.h"

namespace {

baton::Result<baton::Client> open_pg(const baton::ClientOptions& options) {
  static const bool registered =
      baton::store::register_store("postgres", [](const baton::core::Url& u) {
        return baton::store::open_postgres_store(u);
      });
  (void)registered;
  return baton::Client::open(baton::testing::pg_server().url(), options);
}

}  // namespace

INSTANTIATE_CONFORMANCE(Postgres, open_pg);
