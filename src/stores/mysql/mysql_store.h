// stores/mysql/mysql_store.h — the mysql:// (and mariadb://) store.
//
//   mysql://user[:password]@host:port/db?prefix=baton_&serialize=segments
//       &segments=100&request_timeout=5s&connect_timeout=5s
//       &waiter_timeout=5s&recheck_max=50ms&max_idle=16
//       &doorbell=on&max_doorbells=64&fast_path=on
//       &password_file=/path&allow_non_durable=false
//
// Without a password in the URL it reads MYSQL_PWD or ?password_file=.
// Passwords are never logged: messages name the server as host:port/db.
//
// Fast paths (schema version 3): an acquire of a plain capacity-1 lock that
// nobody holds or waits for, and the extend and release of the lease it
// made, are one autocommit UPDATE of the lock's locks row (its only holder
// kept inline; `others` counts its holders and queue rows). Not with
// serialize=center or fast_path=off. Everything else is the scheduling
// transaction, which first moves an inline holder into holders:
// Every other lock operation is one InnoDB transaction of two round trips:
// START TRANSACTION, the serialization row(s) taken FOR UPDATE (seed 003:
// one center row, crc32(name) % N segment rows, or one row per name), the
// database time (UTC_TIMESTAMP(6)) and locking reads of the name's rows;
// then the writes the scheduling step decided (in C++) and COMMIT. All
// times are database times; the client's clock is never read for expiry.
// Waking waiters (stores/mysql/doorbell.h): each request holds a GET_LOCK
// doorbell on its own connection while it waits and holds; its successor
// blocks in GET_LOCK on it, bounded by recheck_max and the predecessor's
// expiry. Without a doorbell, waiters re-check after ~1-2 ms per place in
// line (at most recheck_max) with a non-locking read first; a release in
// this process rings the first two in line at once. See
// docs/stores/mysql.md.
//
// Thread safety: safe for concurrent use (Store contract).
#ifndef BATON_STORES_MYSQL_MYSQL_STORE_H_
#define BATON_STORES_MYSQL_MYSQL_STORE_H_

#include <chrono>
#include <memory>
#include <string>

#include "baton/error.h"
#include "core/url.h"
#include "stores/mysql/my_conn.h"
#include "stores/store.h"

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
  milliseconds recheck_max{50};       // longest waiter re-check interval
  bool doorbell = true;               // GET_LOCK doorbells (push wake-up)
  bool fast_path = true;   // one-statement acquire/extend/release of a lock
                           // nobody else holds or waits for (not with center)
  int max_doorbells = 64;  // doorbell connections per store
  bool allow_non_durable = false;  // tests only
};

// The options and connection parameters a URL asks for (invalid_argument
// naming an unknown or malformed setting).
Result<StoreOptions> parse_options(const core::Url& url, ConnParams* params,
                                   std::string* where);

// Creates or migrates the tables (idempotent, under GET_LOCK) and checks
// that the server acknowledges only durable commits.
Status install_schema(Conn& conn, const StoreOptions& o, const ConnParams& p,
                      TimePoint deadline);
inline constexpr int kSchemaVersion = 3;
}  // namespace my

// The factory behind mysql:// and mariadb://. Connects and installs the
// schema; unavailable if the server cannot be reached.
Result<std::unique_ptr<Store>> open_mysql_store(const core::Url& url);

}  // namespace baton::store

#endif  // BATON_STORES_MYSQL_MYSQL_STORE_H_
