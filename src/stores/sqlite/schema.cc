// stores/sqlite/schema.cc — the sqlite:// store's tables: the same as the
// other SQL stores' (the unique (name, slot) index included), with
// times in CLOCK_MONOTONIC microseconds and names stored as BLOBs.
#include "stores/sqlite/schema.h"

#include <string>

namespace baton::store::sq {
namespace {

const char* const kTables = R"SQL(
CREATE TABLE IF NOT EXISTS @P@schema_version (
  version    INTEGER NOT NULL PRIMARY KEY,
  applied_at INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS @P@meta (
  key   TEXT NOT NULL PRIMARY KEY,
  value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS @P@locks (
  name         BLOB NOT NULL PRIMARY KEY,
  capacity     INTEGER NOT NULL,
  last_fencing INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS @P@holders (
  name       BLOB NOT NULL,
  slot       INTEGER NOT NULL,
  token      BLOB NOT NULL,
  fencing    INTEGER NOT NULL,
  ttl_ms     INTEGER NOT NULL,
  granted_us INTEGER NOT NULL,
  expires_us INTEGER NOT NULL,
  holds      INTEGER NOT NULL,
  label      BLOB NOT NULL,
  rkey       BLOB NOT NULL,
  aliases    BLOB NOT NULL,
  shared     INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (name, slot)
);
CREATE INDEX IF NOT EXISTS @P@holders_token ON @P@holders (token);
CREATE TABLE IF NOT EXISTS @P@queue (
  id           INTEGER PRIMARY KEY AUTOINCREMENT,
  name         BLOB NOT NULL,
  token        BLOB NOT NULL,
  kind         INTEGER NOT NULL,
  ttl_ms       INTEGER NOT NULL,
  label        BLOB NOT NULL,
  rkey         BLOB NOT NULL,
  arrived_us   INTEGER NOT NULL,
  deadline_us  INTEGER NOT NULL,
  heartbeat_us INTEGER NULL,
  withdrawn    INTEGER NOT NULL DEFAULT 0,
  shared       INTEGER NOT NULL DEFAULT 0,
  UNIQUE (name, token)
);
CREATE INDEX IF NOT EXISTS @P@queue_token ON @P@queue (token);
CREATE TABLE IF NOT EXISTS @P@counters (
  name  BLOB NOT NULL PRIMARY KEY,
  value INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS @P@fences (
  resource BLOB NOT NULL PRIMARY KEY,
  highest  INTEGER NOT NULL
);
)SQL";

std::string with_prefix(const std::string& prefix, const char* text) {
  std::string in = text, out;
  std::size_t pos = 0;
  for (;;) {
    const std::size_t at = in.find("@P@", pos);
    if (at == std::string::npos) break;
    out.append(in, pos, at - pos);
    out += prefix;
    pos = at + 3;
  }
  out.append(in, pos, std::string::npos);
  return out;
}

std::string quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    out += c;
    if (c == '\'') out += '\'';
  }
  return out + "'";
}

}  // namespace

Status install_schema(Conn& conn, const StoreOptions& o) {
  if (Status st = conn.exec("BEGIN IMMEDIATE"); !st.ok()) return st;
  auto fail = [&](Error e) -> Status {
    (void)conn.exec("ROLLBACK");
    return e;
  };
  auto have = conn.query(
      "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = " +
      quote(o.prefix + "schema_version"));
  if (!have.ok()) return fail(std::move(have).error());
  int version = 0;
  if (have->num(0, 0) == 1) {
    auto v = conn.query("SELECT COALESCE(MAX(version), 0) FROM " + o.prefix +
                        "schema_version");
    if (!v.ok()) return fail(std::move(v).error());
    version = static_cast<int>(v->num(0, 0));
  }
  if (version > kSchemaVersion) {
    return fail(
        Error(Errc::invalid_argument,
              "sqlite database \"" + o.path + "\" has tables \"" + o.prefix +
                  "*\" of schema version " + std::to_string(version) +
                  "; this build knows up to " + std::to_string(kSchemaVersion) +
                  " (nothing was changed)"));
  }
  if (version < kSchemaVersion) {
    if (Status st = conn.exec(with_prefix(o.prefix, kTables)); !st.ok()) {
      return fail(st.error());
    }
    // Version 2 (rule 18): the mode column, added to tables version 1
    // made (CREATE TABLE IF NOT EXISTS leaves them as they were); old rows
    // read as exclusive. BEGIN IMMEDIATE orders concurrent openers, and
    // the column is added only when missing.
    for (const char* t : {"holders", "queue"}) {
      auto has = conn.query("SELECT COUNT(*) FROM pragma_table_info(" +
                            quote(o.prefix + t) + ") WHERE name = 'shared'");
      if (!has.ok()) return fail(std::move(has).error());
      if (has->num(0, 0) != 0) continue;
      if (Status st = conn.exec("ALTER TABLE " + o.prefix + t +
                                " ADD COLUMN shared INTEGER NOT NULL "
                                "DEFAULT 0");
          !st.ok()) {
        return fail(st.error());
      }
    }
    if (Status st = conn.exec("INSERT OR IGNORE INTO " + o.prefix +
                              "schema_version (version, applied_at) VALUES (" +
                              std::to_string(kSchemaVersion) +
                              ", CAST(strftime('%s','now') AS "
                              "INTEGER))");
        !st.ok()) {
      return fail(st.error());
    }
  }
  auto boot = conn.query("SELECT value FROM " + o.prefix +
                         "meta WHERE key = 'boot_id'");
  if (!boot.ok()) return fail(std::move(boot).error());
  const std::string now_boot = boot_id();
  if (boot->rows.empty() || boot->at(0, 0) != now_boot) {
    // A different boot: CLOCK_MONOTONIC restarted, every stored time is
    // from another clock. Every lease and queued request has expired.
    if (Status st = conn.exec(
            "DELETE FROM " + o.prefix + "holders;DELETE FROM " + o.prefix +
            "queue;INSERT INTO " + o.prefix +
            "meta (key, value) VALUES ('boot_id', " + quote(now_boot) +
            ") ON CONFLICT (key) DO UPDATE SET value = excluded.value");
        !st.ok()) {
      return fail(st.error());
    }
  }
  if (Status st = conn.exec("COMMIT"); !st.ok()) return fail(st.error());
  return {};
}

}  // namespace baton::store::sq
