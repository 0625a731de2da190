// stores/mysql/state.cc — loading some lock names' rows in one round trip.
#include "stores/mysql/state.h"

namespace baton::store::my {

std::string load_sql(const std::string& p,
                     const std::vector<std::string>& names, bool lock) {
  const std::string in = sqlstep::in_list(names);
  const std::string fu = lock ? " FOR UPDATE" : "";
  // The locking read of the queue goes through the (name, token) index,
  // unsorted (add_requests sorts by id). With ORDER BY id the optimizer
  // scanned the primary key of a small queue table instead, and a locking
  // scan waits on the rows of every other name it meets: one name's step
  // waited for another's (MySchema.LockingReadsOfOneNameDoNotWaitForAnother).
  // A non-locking look cannot wait on rows, and the primary key order is
  // cheaper for a long queue of one name (50 waiters on one lock: 20-25 %
  // more handoffs per second than through the index).
  return std::string(
             "SELECT TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', "
             "UTC_TIMESTAMP(6));SELECT ") +
         sqlstep::kLockColumns + " FROM " + p + "locks WHERE name IN " + in +
         fu + ";SELECT " + sqlstep::kHolderColumns + " FROM " + p +
         "holders WHERE name IN " + in + " ORDER BY fencing" + fu + ";SELECT " +
         sqlstep::kQueueColumns + " FROM " + p + "queue" +
         (lock ? " FORCE INDEX (queue_name_token) WHERE name IN " + in + fu
               : " WHERE name IN " + in + " ORDER BY id");
}

std::map<std::string, NameState> parse_state(
    const std::vector<ResultSet>& sets, std::size_t first,
    const std::vector<std::string>& names, std::int64_t* now_us) {
  std::map<std::string, NameState> out;
  for (const auto& n : names) out[n];
  *now_us = sets[first].num(0, 0);
  sqlstep::add_locks(sets[first + 1], &out);
  sqlstep::add_holders(sets[first + 2], &out);
  sqlstep::add_requests(sets[first + 3], &out);
  return out;
}

}  // namespace baton::store::my
