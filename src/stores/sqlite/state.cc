// stores/sqlite/state.cc — loading some lock names' rows in the write
// transaction.
#include "stores/sqlite/state.h"

namespace baton::store::sq {

Result<std::map<std::string, NameState>> load_state(
    Conn& conn, const std::string& p, const std::vector<std::string>& names) {
  const std::string in = sqlstep::in_list(names);
  std::map<std::string, NameState> out;
  for (const auto& n : names) out[n];
  auto locks = conn.query(std::string("SELECT ") + sqlstep::kLockColumns +
                          " FROM " + p + "locks WHERE name IN " + in);
  if (!locks.ok()) return std::move(locks).error();
  sqlstep::add_locks(*locks, &out);
  auto hs =
      conn.query(std::string("SELECT ") + sqlstep::kHolderColumns + " FROM " +
                 p + "holders WHERE name IN " + in + " ORDER BY fencing");
  if (!hs.ok()) return std::move(hs).error();
  sqlstep::add_holders(*hs, &out);
  auto qs =
      conn.query(std::string("SELECT ") + sqlstep::kQueueColumns + " FROM " +
                 p + "queue WHERE name IN " + in + " ORDER BY id");
  if (!qs.ok()) return std::move(qs).error();
  sqlstep::add_requests(*qs, &out);
  return out;
}

}  // namespace baton::store::sq
