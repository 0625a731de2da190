// stores/postgres/schema.h — the postgres:// store's SQL: tables and
// PL/pgSQL functions (raw strings in schema_*.cc), installed idempotently
// under an advisory lock with a version table.
//
// Thread safety: pure data and functions; install_schema() uses the
// connection it is given (one caller at a time).
#ifndef BATON_STORES_POSTGRES_SCHEMA_H_
#define BATON_STORES_POSTGRES_SCHEMA_H_

#include <string>
#include <string_view>

#include "baton/error.h"

namespace baton::store::pg {

class PgConn;
struct Deadline;

inline constexpr int kSchemaVersion = 8;

extern const char* const kSchemaTables;
extern const char* const kSchemaScheduler;
extern const char* const kSchemaMulti;

// The whole script with "@S@" replaced by `schema` (a checked identifier).
std::string schema_script(std::string_view schema);

// True if `schema` is a plain lower-case identifier usable unquoted
// ([a-z_][a-z0-9_]*, at most 40 bytes so "<schema>_wake" fits a channel).
bool valid_schema_name(std::string_view schema);

// Creates or migrates the schema to kSchemaVersion: one transaction under
// pg_advisory_xact_lock, so concurrent first starts do not race. A
// migration takes the tables it alters all at once; while clients keep
// them busy it tries again (until `deadline`).
Status install_schema(PgConn& conn, std::string_view schema, Deadline deadline);

}  // namespace baton::store::pg

#endif  // BATON_STORES_POSTGRES_SCHEMA_H_
