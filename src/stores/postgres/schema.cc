// stores/postgres/schema.cc — installing and migrating the schema.
#include "stores/postgres/schema.h"

#include <cstdlib>

#include "stores/postgres/pg_conn.h"

namespace baton::store::pg {

bool valid_schema_name(std::string_view schema) {
  if (schema.empty() || schema.size() > 40) return false;
  for (std::size_t i = 0; i < schema.size(); ++i) {
    const char c = schema[i];
    const bool ok =
        (c >= 'a' && c <= 'z') || c == '_' || (i > 0 && c >= '0' && c <= '9');
    if (!ok) return false;
  }
  return true;
}

std::string schema_script(std::string_view schema) {
  std::string in = std::string(kSchemaTables) + kSchemaScheduler + kSchemaMulti;
  std::string out;
  out.reserve(in.size() + 4096);
  std::size_t pos = 0;
  for (;;) {
    const std::size_t at = in.find("@S@", pos);
    if (at == std::string::npos) break;
    out.append(in, pos, at - pos);
    out.append(schema);
    pos = at + 3;
  }
  out.append(in, pos, std::string::npos);
  return out;
}

Status install_schema(PgConn& conn, std::string_view schema,
                      Deadline deadline) {
  const std::string s(schema);
  // One lock per schema name; held until COMMIT/ROLLBACK.
  auto begin = conn.exec(
      "BEGIN; SELECT pg_advisory_xact_lock(hashtextextended('baton-schema:" +
          s + "', 0));",
      deadline);
  if (!begin.ok()) return begin;
  auto rollback = [&](Status st) {
    (void)conn.exec("ROLLBACK", deadline);
    return st;
  };
  auto cur = conn.query("SELECT to_regclass($1) IS NOT NULL",
                        {s + ".schema_version"}, deadline);
  if (!cur.ok()) return rollback(std::move(cur).error());
  int version = 0;
  if (PQntuples(cur->get()) == 1 &&
      std::string(PQgetvalue(cur->get(), 0, 0)) == "t") {
    auto v = conn.query(
        "SELECT coalesce(max(version), 0) FROM " + s + ".schema_version", {},
        deadline);
    if (!v.ok()) return rollback(std::move(v).error());
    version = std::atoi(PQgetvalue(v->get(), 0, 0));
  }
  if (version > kSchemaVersion) {
    return rollback(Error(
        Errc::internal,
        "postgres schema \"" + s + "\" has version " + std::to_string(version) +
            "; this build knows up to " + std::to_string(kSchemaVersion)));
  }
  if (version < kSchemaVersion) {
    auto st = conn.exec(schema_script(s), deadline);
    if (!st.ok()) return rollback(st);
    auto mark = conn.query("INSERT INTO " + s +
                               ".schema_version (version) VALUES ($1) "
                               "ON CONFLICT DO NOTHING",
                           {std::to_string(kSchemaVersion)}, deadline);
    if (!mark.ok()) return rollback(std::move(mark).error());
  }
  return conn.exec("COMMIT", deadline);
}

}  // namespace baton::store::pg
