// stores/postgres/postgres_store.h — the postgres:// store.
//
//   postgres://user[:password]@host:port[,host2:port2]/db?schema=baton
//       &max_open_connections=16&max_idle_connections=16
//       &connection_max_lifetime=30m&connection_max_idle_time=5m
//       &request_timeout=5s&connect_timeout=5s&waiter_timeout=5s
//       &recheck_interval=100ms&serialize=name|global&sslmode=...
//
// (The options are the descriptor's; the parser also takes the
// database/sql spellings MaxOpenConnections, ConnectionMaxLifetime, ...,
// which differ only in case and '_'.) Without a password in the URL, libpq
// reads PGPASSWORD or the password file (~/.pgpass, PGPASSFILE or
// ?passfile=). Passwords are never logged: messages name the server as
// host:port/db only.
//
// Every primitive is one round trip: one statement or one PL/pgSQL
// function call in the store's own PostgreSQL schema, created or migrated
// at open under an advisory lock. All times are database times
// (clock_timestamp()); the client's clock is never read for expiry. A
// waiting request's wake-up source is the store's LISTEN connection: the
// scheduling pass that grants it sends NOTIFY with the grant in the
// payload, which wait_change() returns. Each look refreshes the waiter's
// heartbeat (under the name's advisory lock in shared mode while nothing
// can be granted; docs/stores/postgres.md, "Contention").
//
// Thread safety: safe for concurrent use (Store contract).
#ifndef BATON_STORES_POSTGRES_POSTGRES_STORE_H_
#define BATON_STORES_POSTGRES_POSTGRES_STORE_H_

#include <chrono>
#include <string>
#include <vector>

#include "baton/error.h"
#include "baton/store_descriptor.h"
#include "stores/postgres/pg_conn.h"

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

// The descriptor's options.
std::vector<OptionSpec> options();

// The settings and libpq parameters a parsed URL asks for
// (invalid_argument naming a setting the parser cannot judge: the schema
// name, sslpassword).
Result<StoreOptions> settings(const StoreUrl& url, ConnParams* params,
                              std::string* where);
}  // namespace pg

// postgres:// and postgresql://: connects, installs the schema and starts
// the listener; unavailable if the server cannot be reached.
const StoreDescriptor& postgres_descriptor();

}  // namespace baton::store

#endif  // BATON_STORES_POSTGRES_POSTGRES_STORE_H_
