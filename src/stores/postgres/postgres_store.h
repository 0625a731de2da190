// stores/postgres/postgres_store.h — the postgres:// store.
//
//   postgres://user[:password]@host:port[,host2:port2]/db?schema=baton
//       &MaxOpenConnections=16&MaxIdleConnections=16
//       &ConnectionMaxLifetime=30m&ConnectionMaxIdleTime=5m
//       &request_timeout=5s&connect_timeout=5s&waiter_timeout=5s
//       &recheck_interval=100ms&serialize=name|global&sslmode=...
//
// Without a password in the URL, libpq reads PGPASSWORD or the password
// file (~/.pgpass, PGPASSFILE or ?passfile=). Passwords are never logged:
// messages name the server as host:port/db only.
//
// Every Store method is one PL/pgSQL function call (one round trip) in the
// store's own PostgreSQL schema, created or migrated at open under an
// advisory lock. All times are database times (clock_timestamp()); the
// client's clock is never read for expiry. A blocking acquire queues a
// request row with a heartbeat, then sleeps until the LISTEN connection
// reports its grant or a jittered re-check (recheck_interval .. 3x) comes
// due; each re-check is an idempotent call that refreshes the heartbeat
// (under the name's advisory lock in shared mode while nothing can be
// granted; docs/stores/postgres.md, "Contention"). When its wait ends it
// withdraws, or returns the grant if it was granted meanwhile. See
// docs/stores/postgres.md.
//
// Thread safety: safe for concurrent use (Store contract).
#ifndef BATON_STORES_POSTGRES_POSTGRES_STORE_H_
#define BATON_STORES_POSTGRES_POSTGRES_STORE_H_

#include <chrono>
#include <memory>
#include <string>

#include "baton/error.h"
#include "core/url.h"
#include "stores/postgres/pg_conn.h"
#include "stores/store.h"

namespace baton::store {

namespace pg {
struct StoreOptions {
  std::string schema = "baton";
  PoolOptions pool;
  milliseconds request_timeout{5000};
  milliseconds waiter_timeout{5000};   // heartbeat timeout of waiters
  milliseconds recheck_interval{100};  // re-check after 1x..3x this
  bool global_serialize = false;       // one advisory lock for all names
};

// The options and libpq parameters a URL asks for (invalid_argument naming
// an unknown or malformed setting).
Result<StoreOptions> parse_options(const core::Url& url, ConnParams* params,
                                   std::string* where);
}  // namespace pg

// The factory behind the postgres:// (and postgresql://) scheme. Connects,
// installs the schema and starts the listener; unavailable if the server
// cannot be reached.
Result<std::unique_ptr<Store>> open_postgres_store(const core::Url& url);

}  // namespace baton::store

#endif  // BATON_STORES_POSTGRES_POSTGRES_STORE_H_
