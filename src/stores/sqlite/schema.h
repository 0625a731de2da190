// stores/sqlite/schema.h — creating, migrating and checking the sqlite://
// tables, and the boot-id rule.
//
// Thread safety: one call per connection at a time.
#ifndef BATON_STORES_SQLITE_SCHEMA_H_
#define BATON_STORES_SQLITE_SCHEMA_H_

#include "stores/sqlite/db.h"
#include "stores/sqlite/sqlite_store.h"

namespace baton::store::sq {

// In one BEGIN IMMEDIATE transaction (8 processes opening a fresh file at
// once serialize on it): refuses a newer schema version naming the path,
// creates or migrates the tables, and, when the recorded boot id is not
// this boot's, drops every lease and queued request (CLOCK_MONOTONIC
// restarted: they all expired; fencing marks and counters stay).
Status install_schema(Conn& conn, const StoreOptions& o);

}  // namespace baton::store::sq

#endif  // BATON_STORES_SQLITE_SCHEMA_H_
