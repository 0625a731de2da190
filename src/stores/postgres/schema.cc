// stores/postgres/schema.cc — installing and migrating the schema.
#include "stores/postgres/schema.h"

#include <cstdlib>
#include <thread>

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

namespace {

// Takes the tables a migration alters (those that exist) in ACCESS
// EXCLUSIVE mode, all at once, waiting at most 100 ms: a migration that
// held some while waiting for others could deadlock with a running
// client's transaction (which takes them in its own order). Once held,
// nothing else the script takes can be held by a client. Not taken in
// time: *busy, and the caller tries again.
Status lock_tables(PgConn& conn, const std::string& s, Deadline deadline,
                   bool* busy) {
  auto names = conn.query(
      "SELECT string_agg(r, ', ') FROM unnest($1::text[]) r "
      "WHERE to_regclass(r) IS NOT NULL",
      {"{" + s + ".locks," + s + ".holders," + s + ".requests," + s +
       ".holders_all}"},
      deadline);
  if (!names.ok()) return std::move(names).error();
  if (PQgetisnull(names->get(), 0, 0)) return {};
  Status st = conn.exec("SET LOCAL lock_timeout = '100ms'; LOCK TABLE " +
                            std::string(PQgetvalue(names->get(), 0, 0)) +
                            " IN ACCESS EXCLUSIVE MODE; SET LOCAL "
                            "lock_timeout = 0",
                        deadline);
  *busy = !st.ok() && st.error().code() == Errc::unavailable && !conn.broken();
  return st;
}

// One attempt of install_schema.
Status install_once(PgConn& conn, const std::string& s, Deadline deadline,
                    bool* busy) {
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
    if (Status st = lock_tables(conn, s, deadline, busy); !st.ok()) {
      return rollback(st);
    }
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

}  // namespace

Status install_schema(PgConn& conn, std::string_view schema,
                      Deadline deadline) {
  const std::string s(schema);
  for (int attempt = 1;; ++attempt) {
    bool busy = false;
    Status st = install_once(conn, s, deadline, &busy);
    const TimePoint next = Clock::now() + milliseconds{50 * attempt};
    if (!busy || next >= deadline.at()) return st;
    std::this_thread::sleep_until(next);
  }
}

}  // namespace baton::store::pg
