// bench/my_costs.cc — what each part of a mysql:// acquire + release costs on
// one MariaDB connection (docs/stores/mysql.md, "Fast paths": why this
// layout). Sends, per pair and case, the statements the store sends (as its
// general log shows them) or a part of them, the cases interleaved round by
// round, and prints µs per pair.
//
//   baton_my_costs --url mysql://root@127.0.0.1:P/bench [--pairs 2000]
//                  [--rounds 3]
//
// The store's tables (prefix cost_) are made by opening a baton::Client on
// the URL with prefix=cost_; the floor's table is cost_floor.
#include <mysql.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "baton/client.h"
#include "core/url.h"

namespace {

MYSQL* g_conn = nullptr;

void q(const std::string& s) {
  if (mysql_real_query(g_conn, s.data(), s.size()) != 0) {
    throw std::runtime_error(s.substr(0, 80) + ": " + mysql_error(g_conn));
  }
  do {
    if (MYSQL_RES* r = mysql_store_result(g_conn)) mysql_free_result(r);
  } while (mysql_next_result(g_conn) == 0);
}

struct Case {
  const char* name;
  const char* what;
  std::function<void(long)> pair;
};

}  // namespace

int main(int argc, char** argv) {
  std::string url;
  int pairs = 2000, rounds = 3;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--url") {
      url = v;
    } else if (k == "--pairs") {
      pairs = std::atoi(v.c_str());
    } else if (k == "--rounds") {
      rounds = std::atoi(v.c_str());
    } else {
      std::fprintf(stderr, "unknown option %s\n", k.c_str());
      return 2;
    }
  }
  auto u = baton::core::parse_url(url);
  if (!u.ok() || (u->scheme != "mysql" && u->scheme != "mariadb") ||
      u->hosts.size() != 1 || pairs < 1 || rounds < 1) {
    std::fprintf(stderr,
                 "usage: baton_my_costs --url mysql://user@host:port/db "
                 "[--pairs N] [--rounds N]\n");
    return 2;
  }
  const std::string sep = url.find('?') == std::string::npos ? "?" : "&";
  // Opening a client makes the store's tables (prefix cost_).
  auto c = baton::Client::open(url + sep + "prefix=cost_");
  if (!c.ok()) {
    std::fprintf(stderr, "%s\n", c.error().to_string().c_str());
    return 1;
  }
  g_conn = mysql_init(nullptr);
  if (mysql_real_connect(g_conn, u->hosts[0].host.c_str(), u->user.c_str(),
                         u->password.c_str(), u->path.c_str(), u->hosts[0].port,
                         nullptr, CLIENT_MULTI_STATEMENTS) == nullptr) {
    std::fprintf(stderr, "connect: %s\n", mysql_error(g_conn));
    return 1;
  }
  try {
    q("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED");
    q("CREATE TABLE IF NOT EXISTS cost_floor (name VARCHAR(64) PRIMARY KEY) "
      "ENGINE=InnoDB");
    const std::string nm = "X'636f7374'", ser = "X'636f7374'";
    q("INSERT IGNORE INTO cost_serial (id) VALUES (" + ser + ")");
    q("INSERT IGNORE INTO cost_locks (name, capacity, high_fencing) VALUES (" +
      nm + ", 1, 0)");
    q("DELETE FROM cost_holders WHERE name = " + nm);
    const std::string read =
        "START TRANSACTION;SELECT id FROM cost_serial WHERE id IN (" + ser +
        ") ORDER BY id FOR UPDATE;SELECT TIMESTAMPDIFF(MICROSECOND, "
        "'1970-01-01 00:00:00', UTC_TIMESTAMP(6));SELECT name, capacity, "
        "high_fencing FROM cost_locks WHERE name IN (" +
        nm +
        ") FOR UPDATE;SELECT name, slot, token, fencing, ttl_ms, granted_us, "
        "expires_us, holds, label, rkey, aliases, shared FROM cost_holders "
        "WHERE name IN (" +
        nm +
        ") ORDER BY fencing FOR UPDATE;SELECT id, name, token, kind, ttl_ms, "
        "label, rkey, arrived_us, deadline_us, heartbeat_us, withdrawn, "
        "shared FROM cost_queue FORCE INDEX (queue_name_token) WHERE name IN "
        "(" +
        nm + ") FOR UPDATE";
    const std::string holder =
        "INSERT INTO cost_holders (name, slot, token, fencing, ttl_ms, "
        "granted_us, expires_us, holds, label, rkey, aliases, shared) VALUES "
        "(" +
        nm +
        ", 0, "
        "X'3332343166386633653761303434356134613336336537326633613462383738"
        "', @f, 30000, 1795618949558548, 1795618979558548, 1, X'766D3A', X'', "
        "'', 0)";
    auto upsert = [&](long f) {
      return "SET @f = " + std::to_string(f) +
             ";INSERT INTO cost_locks (name, capacity, high_fencing) VALUES (" +
             nm +
             ", 1, @f) ON DUPLICATE KEY UPDATE capacity = VALUES(capacity), "
             "high_fencing = VALUES(high_fencing);" +
             holder;
    };
    const std::string del =
        "DELETE FROM cost_holders WHERE name = " + nm + " AND slot = 0";
    // The same reads and writes as stored procedures: one statement (CALL)
    // per operation, the statements parsed once per connection, no result
    // sets for the reads. Is the cost the statements' work or their
    // sending, parsing and answering one by one?
    const std::string sp_reads =
        "START TRANSACTION;"
        "SELECT id INTO s FROM cost_serial WHERE id = " +
        ser +
        " FOR UPDATE;"
        "SET t = TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', "
        "UTC_TIMESTAMP(6));"
        "SELECT capacity, high_fencing INTO cap, lf FROM cost_locks WHERE "
        "name = " +
        nm +
        " FOR UPDATE;"
        "SELECT COUNT(*) INTO h FROM cost_holders WHERE name = " +
        nm +
        " FOR UPDATE;"
        "SELECT COUNT(*) INTO w FROM cost_queue FORCE INDEX (queue_name_token) "
        "WHERE name = " +
        nm + " FOR UPDATE;";
    const std::string sp_vars =
        "DECLARE s VARBINARY(600); DECLARE t, lf BIGINT; "
        "DECLARE cap, h, w INT;";
    q("DROP PROCEDURE IF EXISTS cost_sp_acquire");
    q("CREATE PROCEDURE cost_sp_acquire(IN f BIGINT) BEGIN " + sp_vars +
      sp_reads + "SET @f = f;" +
      "INSERT INTO cost_locks (name, capacity, high_fencing) VALUES (" + nm +
      ", 1, f) ON DUPLICATE KEY UPDATE capacity = VALUES(capacity), "
      "high_fencing = VALUES(high_fencing);" +
      holder + "; COMMIT; SELECT h, w, t; END");
    q("DROP PROCEDURE IF EXISTS cost_sp_release");
    q("CREATE PROCEDURE cost_sp_release() BEGIN " + sp_vars + sp_reads + del +
      "; COMMIT; SELECT h, w, t; END");
    // The layout postgres:// took in schema version 5, for comparison: the
    // lock's one holder kept in its own row, updated in place, one row read
    // (FOR UPDATE) per operation, as text and as procedures.
    q("CREATE TABLE IF NOT EXISTS cost_inline (name VARBINARY(512) NOT NULL "
      "PRIMARY KEY, capacity INT NOT NULL, last_fencing BIGINT NOT NULL, "
      "token VARBINARY(32) NOT NULL, fencing BIGINT NOT NULL, ttl_ms BIGINT "
      "NOT NULL, granted_us BIGINT NOT NULL, expires_us BIGINT NOT NULL, "
      "holds INT NOT NULL, label VARBINARY(256) NOT NULL, rkey VARBINARY(512) "
      "NOT NULL, shared TINYINT NOT NULL, waiting INT NOT NULL) ENGINE=InnoDB");
    q("INSERT IGNORE INTO cost_inline VALUES (" + nm +
      ", 1, 0, '', 0, 0, 0, 0, 0, '', '', 0, 0)");
    const std::string tok =
        "X'3332343166386633653761303434356134613336336537326633613462383738'";
    const std::string now_us =
        "TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6))";
    const std::string inline_read =
        "SELECT capacity, last_fencing, token, expires_us, waiting FROM "
        "cost_inline WHERE name = " +
        nm + " FOR UPDATE";
    const std::string inline_grant =
        "UPDATE cost_inline SET last_fencing = last_fencing + 1, token = " +
        tok +
        ", fencing = last_fencing, ttl_ms = 30000, granted_us = " + now_us +
        ", expires_us = " + now_us +
        " + 30000000, holds = 1, label = X'766D3A' WHERE name = " + nm +
        " AND (token = '' OR expires_us <= " + now_us + ") AND waiting = 0";
    const std::string inline_free =
        "UPDATE cost_inline SET token = '' WHERE "
        "name = " +
        nm + " AND token = " + tok;
    q("DROP PROCEDURE IF EXISTS cost_sp_inline_acquire");
    q("CREATE PROCEDURE cost_sp_inline_acquire() BEGIN "
      "DECLARE cap, w INT; DECLARE lf, e BIGINT; DECLARE tk VARBINARY(32); "
      "START TRANSACTION; SELECT capacity, last_fencing, token, expires_us, "
      "waiting INTO cap, lf, tk, e, w FROM cost_inline WHERE name = " +
      nm + " FOR UPDATE; " + inline_grant +
      "; COMMIT; SELECT ROW_COUNT(); END");
    q("DROP PROCEDURE IF EXISTS cost_sp_inline_release");
    q("CREATE PROCEDURE cost_sp_inline_release() BEGIN "
      "DECLARE cap, w INT; DECLARE lf, e BIGINT; DECLARE tk VARBINARY(32); "
      "START TRANSACTION; SELECT capacity, last_fencing, token, expires_us, "
      "waiting INTO cap, lf, tk, e, w FROM cost_inline WHERE name = " +
      nm + " FOR UPDATE; " + inline_free + "; COMMIT; SELECT ROW_COUNT(); END");
    std::vector<Case> cases = {
        {"floor", "INSERT, DELETE (autocommit)",
         [&](long) {
           q("INSERT INTO cost_floor (name) VALUES ('cost')");
           q("DELETE FROM cost_floor WHERE name = 'cost'");
         }},
        {"store", "read; write+COMMIT; read; delete+COMMIT",
         [&](long f) {
           q(read);
           q(upsert(f) + ";COMMIT");
           q(read);
           q(del + ";COMMIT");
         }},
        {"one-trip", "the same in 2 round trips",
         [&](long f) {
           q(read + ";" + upsert(f) + ";COMMIT");
           q(read + ";" + del + ";COMMIT");
         }},
        {"procedures", "CALL acquire; CALL release (same statements)",
         [&](long f) {
           q("CALL cost_sp_acquire(" + std::to_string(f) + ")");
           q("CALL cost_sp_release()");
         }},
        {"inline", "1 row: read+UPDATE+COMMIT, twice (1 trip each)",
         [&](long) {
           q("START TRANSACTION;" + inline_read + ";" + inline_grant +
             ";COMMIT");
           q("START TRANSACTION;" + inline_read + ";" + inline_free +
             ";COMMIT");
         }},
        {"inline-proc", "the same as 2 CALLs",
         [&](long) {
           q("CALL cost_sp_inline_acquire()");
           q("CALL cost_sp_inline_release()");
         }},
        {"inline-1stmt", "conditional UPDATE (+ SELECT @f), twice",
         [&](long) {
           q("UPDATE cost_inline SET last_fencing = (@f := last_fencing + 1), "
             "token = " +
             tok + ", fencing = @f, ttl_ms = 30000, granted_us = " + now_us +
             ", expires_us = " + now_us +
             " + 30000000, holds = 1, label = X'766D3A' WHERE name = " + nm +
             " AND (token = '' OR expires_us <= " + now_us +
             ") AND waiting = 0;SELECT @f, ROW_COUNT()");
           q(inline_free);
         }},
        {"no-reads", "write+COMMIT; delete+COMMIT",
         [&](long f) {
           q("START TRANSACTION;" + upsert(f) + ";COMMIT");
           q("START TRANSACTION;" + del + ";COMMIT");
         }},
        {"holder-only", "INSERT holder, DELETE holder (autocommit)",
         [&](long f) {
           q("SET @f = " + std::to_string(f) + ";" + holder);
           q(del);
         }},
        {"in-place", "2 UPDATEs of the locks row (autocommit)",
         [&](long f) {
           q("UPDATE cost_locks SET high_fencing = " + std::to_string(f) +
             " WHERE name = " + nm);
           q("UPDATE cost_locks SET high_fencing = " + std::to_string(f + 1) +
             " WHERE name = " + nm);
         }},
        {"reads-only", "read+COMMIT twice",
         [&](long) {
           q(read + ";COMMIT");
           q(read + ";COMMIT");
         }},
        {"round-trips", "4 x SELECT 1",
         [&](long) {
           for (int i = 0; i < 4; ++i) q("SELECT 1");
         }},
    };
    long f = 1'000'000'000L;
    std::printf("%-12s %-45s %s\n", "case", "per pair", "µs per pair, rounds");
    std::vector<std::vector<double>> us(cases.size());
    for (int r = 0; r < rounds; ++r) {
      for (std::size_t i = 0; i < cases.size(); ++i) {
        const auto t0 = std::chrono::steady_clock::now();
        for (int p = 0; p < pairs; ++p) cases[i].pair(f += 2);
        const double s =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
                .count();
        us[i].push_back(s / pairs * 1e6);
      }
    }
    for (std::size_t i = 0; i < cases.size(); ++i) {
      std::printf("%-12s %-45s", cases[i].name, cases[i].what);
      for (double x : us[i]) std::printf(" %7.1f", x);
      std::printf("\n");
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  mysql_close(g_conn);
  return 0;
}
