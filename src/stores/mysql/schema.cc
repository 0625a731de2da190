// stores/mysql/schema.cc — the mysql:// store's tables, created and
// migrated idempotently under a GET_LOCK named after the database and
// prefix (8 processes starting at once do not race; CREATE TABLE IF NOT
// EXISTS would not race either, the lock orders the version check).
#include <string>

#include "stores/mysql/mysql_store.h"

namespace baton::store::my {
namespace {

// "@P@" is the table prefix. Times are database microseconds since the Unix
// epoch, from TIMESTAMPDIFF(MICROSECOND, '1970-01-01', UTC_TIMESTAMP(6)).
const char* const kTables = R"SQL(
CREATE TABLE IF NOT EXISTS @P@schema_version (
  version    INT NOT NULL PRIMARY KEY,
  applied_at DATETIME(6) NOT NULL
) ENGINE=InnoDB;
CREATE TABLE IF NOT EXISTS @P@serial (
  id VARBINARY(600) NOT NULL PRIMARY KEY
) ENGINE=InnoDB;
CREATE TABLE IF NOT EXISTS @P@locks (
  name         VARBINARY(512) NOT NULL PRIMARY KEY,
  capacity     INT NOT NULL,
  high_fencing BIGINT NOT NULL,
  others       INT NOT NULL DEFAULT 0,
  h_token      VARBINARY(32) NOT NULL DEFAULT '',
  h_fencing    BIGINT NOT NULL DEFAULT 0,
  h_ttl_ms     BIGINT NOT NULL DEFAULT 0,
  h_granted_us BIGINT NOT NULL DEFAULT 0,
  h_expires_us BIGINT NOT NULL DEFAULT 0,
  h_label      VARBINARY(256) NOT NULL DEFAULT ''
) ENGINE=InnoDB;
CREATE TABLE IF NOT EXISTS @P@holders (
  name       VARBINARY(512) NOT NULL,
  slot       INT NOT NULL,
  token      VARBINARY(32) NOT NULL,
  fencing    BIGINT NOT NULL,
  ttl_ms     BIGINT NOT NULL,
  granted_us BIGINT NOT NULL,
  expires_us BIGINT NOT NULL,
  holds      INT NOT NULL,
  label      VARBINARY(256) NOT NULL,
  rkey       VARBINARY(512) NOT NULL,
  aliases    BLOB NOT NULL,
  shared     TINYINT NOT NULL DEFAULT 0,
  PRIMARY KEY (name, slot),
  KEY holders_token (token)
) ENGINE=InnoDB;
CREATE TABLE IF NOT EXISTS @P@queue (
  id           BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
  name         VARBINARY(512) NOT NULL,
  token        VARBINARY(32) NOT NULL,
  kind         TINYINT NOT NULL,
  ttl_ms       BIGINT NOT NULL,
  label        VARBINARY(256) NOT NULL,
  rkey         VARBINARY(512) NOT NULL,
  arrived_us   BIGINT NOT NULL,
  deadline_us  BIGINT NOT NULL,
  heartbeat_us BIGINT NULL,
  withdrawn    TINYINT NOT NULL DEFAULT 0,
  shared       TINYINT NOT NULL DEFAULT 0,
  UNIQUE KEY queue_name_token (name, token),
  KEY queue_token (token)
) ENGINE=InnoDB;
CREATE TABLE IF NOT EXISTS @P@counters (
  name  VARBINARY(512) NOT NULL PRIMARY KEY,
  value BIGINT NOT NULL
) ENGINE=InnoDB;
CREATE TABLE IF NOT EXISTS @P@fences (
  resource VARBINARY(512) NOT NULL PRIMARY KEY,
  highest  BIGINT NOT NULL
) ENGINE=InnoDB
)SQL";

// The protected resource's check, like postgres://'s
// baton.fenced_write: true iff p_token is at least the highest token seen
// for p_resource, which it records. Call it in the transaction of the
// write it guards (the upsert holds the resource's row lock to COMMIT).
const char* const kFencedWrite = R"SQL(
CREATE FUNCTION IF NOT EXISTS @P@fenced_write(p_resource VARBINARY(512),
                                              p_token BIGINT)
RETURNS BOOLEAN NOT DETERMINISTIC MODIFIES SQL DATA
BEGIN
  INSERT INTO @P@fences (resource, highest) VALUES (p_resource, p_token)
  ON DUPLICATE KEY UPDATE highest = GREATEST(highest, VALUES(highest));
  RETURN (SELECT highest FROM @P@fences WHERE resource = p_resource) = p_token;
END
)SQL";

// Version 2 (rule 18): the mode of each lease and request. A table made by
// version 1 gets the column here (CREATE TABLE IF NOT EXISTS leaves it
// as it was); rows from before read as exclusive.
const char* const kModeTables[] = {"holders", "queue"};

// Version 3 (the one-statement fast paths, docs/stores/mysql.md): the
// lock's only holder kept in its locks row (h_*), and `others`, the
// name's holders and queue rows, kept by every scheduling transaction.
// The fencing column is renamed in the same statement, so that a process
// of an older build, which would write holders and queue rows without
// counting them, fails on its next read instead (its leases stay valid
// rows, counted below, until they expire or are released by a new one).
const char* const kInlineHolder =
    "ALTER TABLE @P@locks CHANGE last_fencing high_fencing BIGINT NOT NULL, "
    "ADD COLUMN others INT NOT NULL DEFAULT 0, "
    "ADD COLUMN h_token VARBINARY(32) NOT NULL DEFAULT '', "
    "ADD COLUMN h_fencing BIGINT NOT NULL DEFAULT 0, "
    "ADD COLUMN h_ttl_ms BIGINT NOT NULL DEFAULT 0, "
    "ADD COLUMN h_granted_us BIGINT NOT NULL DEFAULT 0, "
    "ADD COLUMN h_expires_us BIGINT NOT NULL DEFAULT 0, "
    "ADD COLUMN h_label VARBINARY(256) NOT NULL DEFAULT ''";
// Idempotent; run by every migration to version 3 (also one that an
// earlier, cut-short migration left after its ALTER).
const char* const kCountOthers =
    "UPDATE @P@locks l SET others = (SELECT COUNT(*) FROM @P@queue q WHERE "
    "q.name = l.name) + (SELECT COUNT(*) FROM @P@holders h WHERE h.name = "
    "l.name)";

std::string with_prefix(const std::string& prefix, const char* text = kTables) {
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

}  // namespace

Status install_schema(Conn& conn, const StoreOptions& o, const ConnParams& p,
                      TimePoint deadline) {
  auto settings = conn.query(
      "SELECT @@innodb_flush_log_at_trx_commit, @@log_bin, @@sync_binlog",
      deadline);
  if (!settings.ok()) return std::move(settings).error();
  const ResultSet& s = settings->front();
  const std::int64_t flush = s.num(0, 0), log_bin = s.num(0, 1),
                     sync_binlog = s.num(0, 2);
  if (!o.allow_non_durable) {
    if (flush != 1) {
      return Error(Errc::invalid_argument,
                   "mysql server has innodb_flush_log_at_trx_commit=" +
                       std::to_string(flush) +
                       ": a crash could lose acknowledged grants (set it to "
                       "1, or allow_non_durable=true for throwaway tests)");
    }
    if (log_bin != 0 && sync_binlog != 1) {
      return Error(Errc::invalid_argument,
                   "mysql server has binary logging on with sync_binlog=" +
                       std::to_string(sync_binlog) +
                       ": a crash could lose acknowledged grants (set it to "
                       "1, or allow_non_durable=true for throwaway tests)");
    }
  }
  const std::string lock = hex_literal("baton-schema:" + p.db + "." + o.prefix);
  const long long secs = std::max<long long>(
      1,
      std::chrono::duration_cast<std::chrono::seconds>(deadline - Clock::now())
          .count());
  auto got = conn.query(
      "SELECT GET_LOCK(" + lock + ", " + std::to_string(secs) + ")", deadline);
  if (!got.ok()) return std::move(got).error();
  if (got->front().num(0, 0) != 1) {
    return Error(Errc::unavailable,
                 "mysql: timed out waiting for another process's schema "
                 "installation");
  }
  auto finish = [&](Status st) {
    (void)conn.query("SELECT RELEASE_LOCK(" + lock + ")", deadline);
    return st;
  };
  auto have = conn.query(
      "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = "
      "DATABASE() AND table_name = '" +
          o.prefix + "schema_version'",
      deadline);
  if (!have.ok()) return finish(std::move(have).error());
  int version = 0;
  if (have->front().num(0, 0) == 1) {
    auto v = conn.query(
        "SELECT COALESCE(MAX(version), 0) FROM " + o.prefix + "schema_version",
        deadline);
    if (!v.ok()) return finish(std::move(v).error());
    version = static_cast<int>(v->front().num(0, 0));
  }
  if (version > kSchemaVersion) {
    return finish(Error(Errc::internal, "mysql tables \"" + o.prefix +
                                            "*\" have version " +
                                            std::to_string(version) +
                                            "; this build knows up to " +
                                            std::to_string(kSchemaVersion)));
  }
  if (version < kSchemaVersion) {
    auto created = conn.query(with_prefix(o.prefix), deadline);
    if (!created.ok()) return finish(std::move(created).error());
    for (const char* t : kModeTables) {
      // Idempotent: only when the column is missing (the GET_LOCK above
      // orders concurrent starts; a migration cut short is redone).
      auto has = conn.query(
          "SELECT COUNT(*) FROM information_schema.columns WHERE "
          "table_schema = DATABASE() AND table_name = '" +
              o.prefix + t + "' AND column_name = 'shared'",
          deadline);
      if (!has.ok()) return finish(std::move(has).error());
      if (has->front().num(0, 0) != 0) continue;
      auto added = conn.query("ALTER TABLE " + o.prefix + t +
                                  " ADD COLUMN shared TINYINT NOT NULL "
                                  "DEFAULT 0",
                              deadline);
      if (!added.ok()) return finish(std::move(added).error());
    }
    auto inl = conn.query(
        "SELECT COUNT(*) FROM information_schema.columns WHERE table_schema "
        "= DATABASE() AND table_name = '" +
            o.prefix + "locks' AND column_name = 'high_fencing'",
        deadline);
    if (!inl.ok()) return finish(std::move(inl).error());
    if (inl->front().num(0, 0) == 0) {
      auto altered = conn.query(with_prefix(o.prefix, kInlineHolder), deadline);
      if (!altered.ok()) return finish(std::move(altered).error());
    }
    auto counted = conn.query(with_prefix(o.prefix, kCountOthers), deadline);
    if (!counted.ok()) return finish(std::move(counted).error());
    // Needs CREATE ROUTINE (and, with binary logging, SUPER or
    // log_bin_trust_function_creators); without them the store works and
    // only the helper is missing (docs/stores/mysql.md).
    DbError db;
    auto helper =
        conn.query(with_prefix(o.prefix, kFencedWrite), deadline, &db);
    if (!helper.ok() && conn.broken()) return finish(std::move(helper).error());
    auto mark =
        conn.query("INSERT IGNORE INTO " + o.prefix +
                       "schema_version (version, applied_at) VALUES (" +
                       std::to_string(kSchemaVersion) + ", UTC_TIMESTAMP(6))",
                   deadline);
    if (!mark.ok()) return finish(std::move(mark).error());
  }
  return finish({});
}

}  // namespace baton::store::my
