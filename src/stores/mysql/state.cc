// stores/mysql/state.cc — loading some lock names' rows in one round trip.
#include "stores/mysql/state.h"

#include <algorithm>

namespace baton::store::my {
namespace {

// sqlstep::kLockColumns (the fencing column renamed in version 3), then
// RowExtra's.
constexpr const char* kMyLockColumns =
    "name, capacity, high_fencing, others, h_token, h_fencing, h_ttl_ms, "
    "h_granted_us, h_expires_us, h_label";

}  // namespace

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
         kMyLockColumns + " FROM " + p + "locks WHERE name IN " + in + fu +
         ";SELECT " + sqlstep::kHolderColumns + " FROM " + p +
         "holders WHERE name IN " + in + " ORDER BY fencing" + fu + ";SELECT " +
         sqlstep::kQueueColumns + " FROM " + p + "queue" +
         (lock ? " FORCE INDEX (queue_name_token) WHERE name IN " + in + fu
               : " WHERE name IN " + in + " ORDER BY id");
}

std::map<std::string, NameState> parse_state(
    const std::vector<ResultSet>& sets, std::size_t first,
    const std::vector<std::string>& names, std::int64_t* now_us,
    std::map<std::string, RowExtra>* extra) {
  std::map<std::string, NameState> out;
  for (const auto& n : names) out[n];
  *now_us = sets[first].num(0, 0);
  const ResultSet& locks = sets[first + 1];
  sqlstep::add_locks(locks, &out);
  sqlstep::add_holders(sets[first + 2], &out);
  sqlstep::add_requests(sets[first + 3], &out);
  for (std::size_t r = 0; r < locks.rows.size(); ++r) {
    RowExtra x;
    x.row = true;
    x.others = static_cast<int>(locks.num(r, 3));
    if (!locks.at(r, 4).empty()) {
      Holder h;
      h.name = locks.at(r, 0);
      h.slot = 0;
      h.token = locks.at(r, 4);
      h.fencing = locks.num(r, 5);
      h.ttl_ms = locks.num(r, 6);
      h.granted_us = locks.num(r, 7);
      h.expires_us = locks.num(r, 8);
      h.label = locks.at(r, 9);
      auto& hs = out[h.name].holders;
      hs.push_back(h);
      // Grant order (the step's holders are read by fencing).
      std::stable_sort(hs.begin(), hs.end(),
                       [](const Holder& a, const Holder& b) {
                         return a.fencing < b.fencing;
                       });
      x.inline_holder = std::move(h);
    }
    if (extra != nullptr) (*extra)[locks.at(r, 0)] = std::move(x);
  }
  return out;
}

void spill(Tx& tx, const std::string& p,
           const std::map<std::string, RowExtra>& extra) {
  for (const auto& [name, x] : extra) {
    if (!x.inline_holder) continue;
    const Holder& h = *x.inline_holder;
    const std::string n = sqlstep::hex_literal(name);
    tx.raw("UPDATE " + p + "locks SET h_token = '' WHERE name = " + n);
    if (h.expires_us > tx.now()) {
      tx.raw("INSERT INTO " + p +
             "holders (name, slot, token, fencing, ttl_ms, granted_us, "
             "expires_us, holds, label, rkey, aliases, shared) VALUES (" +
             n + ", 0, " + sqlstep::hex_literal(h.token) + ", " +
             sql_int(h.fencing) + ", " + sql_int(h.ttl_ms) + ", " +
             sql_int(h.granted_us) + ", " + sql_int(h.expires_us) + ", 1, " +
             sqlstep::hex_literal(h.label) + ", '', '', 0)");
    } else {
      std::erase_if(tx.at(name).holders, [&](const Holder& o) {
        return o.token == h.token && o.fencing == h.fencing;
      });
    }
  }
}

void count_others(Tx& tx, const std::string& p,
                  const std::map<std::string, RowExtra>& extra) {
  // Only the names the transaction loaded (extra has their rows; a name
  // whose row it made has none there).
  for (const auto& name : tx.names()) {
    const NameState& s = tx.at(name);
    if (!s.lock_row) continue;
    const int n = static_cast<int>(s.queue.size() + s.holders.size());
    auto it = extra.find(name);
    if (it != extra.end() ? it->second.others == n : n == 0) continue;
    tx.raw("UPDATE " + p + "locks SET others = " + sql_int(n) +
           " WHERE name = " + sqlstep::hex_literal(name));
  }
}

}  // namespace baton::store::my
