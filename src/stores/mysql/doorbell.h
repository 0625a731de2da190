// stores/mysql/doorbell.h — the GET_LOCK doorbells of mysql:// (its push
// wake-up; the argument is in docs/stores/mysql.md, "Waking waiters").
//
// Every acquire that can take one holds a MariaDB user lock, its doorbell,
// named for (server database, table prefix, lock name, owner token), on a
// connection of its own: taken in the same round trip as, and before, the
// transaction that makes its request or lease visible; kept while the
// request waits and while the lease is held; let go right after the
// release (or the withdrawal) commits, or by the server when the connection
// dies. A waiter blocks in GET_LOCK on the doorbell of the entry it waits
// for (bell_target), with a timeout no longer than its fallback re-check
// and that entry's expiry, and then reads the rows again: the rows decide,
// the doorbell is only a hint.
//
// No I/O here. Thread safety: plain functions.
#ifndef BATON_STORES_MYSQL_DOORBELL_H_
#define BATON_STORES_MYSQL_DOORBELL_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "stores/sqlstep/sql_state.h"

namespace baton::store::my {

// "baton:" and 32 hex digits (a 128-bit hash of where, prefix, name and
// token): within MariaDB's 64-character limit on user-lock names, which are
// server-wide (hence the database in `where`).
std::string doorbell_name(std::string_view where, std::string_view prefix,
                          std::string_view name, std::string_view token);

// The entry a waiting request (`token`) waits for, read from the name's
// rows at `now`: the live holders in grant order, then the live queue in
// arrival order. An exclusive request waits for the entry `capacity`
// places ahead of it (its predecessor when capacity is 1), a shared one
// for the nearest exclusive entry ahead (the shared requests between are
// granted with it).
struct BellTarget {
  std::string token;
  std::int64_t due_in_us = 0;  // until that entry's expiry / deadline
  // Its release is the event that can grant the waiter (capacity 1 and a
  // plain acquire, which holds a doorbell): a missed push is then an
  // anomaly, and the waiter's timer may be long. Otherwise (semaphores:
  // another holder may leave first) the waiter keeps its place-paced timer.
  bool exact = false;
};
std::optional<BellTarget> bell_target(const sqlstep::NameState& s,
                                      const std::string& token,
                                      std::int64_t now);

}  // namespace baton::store::my

#endif  // BATON_STORES_MYSQL_DOORBELL_H_
