// stores/mysql/mysql_store.h — the mysql:// (and mariadb://) store.
//
//   mysql://user[:password]@host:port/db?prefix=baton_&serialize=segments
//       &segments=100&request_timeout=5s&connect_timeout=5s
//       &waiter_timeout=5s&recheck_interval=50ms&max_idle_connections=16
//       &doorbell=on&max_doorbells=64&fast_path=on
//       &password_file=/path&allow_non_durable=false
//
// The options are the descriptor's (mysql_descriptor(); docs/stores/
// mysql.md has the table). Without a password in the URL it reads
// MYSQL_PWD or ?password_file=. Passwords are never logged: messages name
// the server as host:port/db.
//
// Every lock operation is one InnoDB transaction of two round trips:
// START TRANSACTION, the serialization row(s) taken FOR UPDATE (one center
// row, crc32(name) % N segment rows, or one row per name), the database
// time (UTC_TIMESTAMP(6)) and locking reads of the name's rows; then the
// writes the scheduling step decided (in C++, stores/sqlstep) and COMMIT.
// All times are database times; the client's clock is never read for
// expiry. Fast paths (schema version 3): an acquire of a plain capacity-1
// lock that nobody holds or waits for, and the extend and release of the
// lease it made, are one autocommit UPDATE of the lock's locks row (its
// only holder kept inline; `others` counts its holders and queue rows). Not
// with serialize=center or fast_path=off; the scheduling transaction first
// moves an inline holder into holders.
//
// Waking waiters (stores/mysql/doorbell.h): each request holds a GET_LOCK
// doorbell on its own connection while it waits and holds; its successor
// blocks in GET_LOCK on it (its wait_change), bounded by its next look.
// Without a doorbell a waiter looks again after ~1-2 ms per place in line
// (at most recheck_interval), with a non-locking read first; a release in
// this process rings the first two in line at once. See
// docs/stores/mysql.md.
//
// Thread safety: safe for concurrent use (Store contract).
#ifndef BATON_STORES_MYSQL_MYSQL_STORE_H_
#define BATON_STORES_MYSQL_MYSQL_STORE_H_

#include <chrono>
#include <string>

#include "baton/error.h"
#include "baton/store_descriptor.h"
#include "stores/mysql/my_conn.h"

namespace baton::store {

namespace my {
enum class Serialize { center, segments, name };

struct StoreOptions {
  std::string prefix = "baton_";
  Serialize serialize = Serialize::segments;
  int segments = 100;
  int max_idle = 16;
  milliseconds connect_timeout{5000};
  milliseconds request_timeout{5000};
  milliseconds waiter_timeout{5000};  // heartbeat timeout of waiters
  milliseconds recheck{50};           // longest waiter re-check interval
  bool doorbell = true;               // GET_LOCK doorbells (push wake-up)
  bool fast_path = true;   // one-statement acquire/extend/release of a lock
                           // nobody else holds or waits for (not with center)
  int max_doorbells = 64;  // doorbell connections per store
  bool allow_non_durable = false;  // tests only
};

// Creates or migrates the tables (idempotent, under GET_LOCK) and checks
// that the server acknowledges only durable commits.
Status install_schema(Conn& conn, const StoreOptions& o, const ConnParams& p,
                      TimePoint deadline);
inline constexpr int kSchemaVersion = 3;
}  // namespace my

// mysql:// and mariadb://: its options, and an open function that connects
// and installs the schema (unavailable if the server cannot be reached).
const StoreDescriptor& mysql_descriptor();

}  // namespace baton::store

#endif  // BATON_STORES_MYSQL_MYSQL_STORE_H_
