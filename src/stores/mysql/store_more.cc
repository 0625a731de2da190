// stores/mysql/store_more.cc — acquire_some / acquire_all, counters and
// the factory of the mysql:// store.
#include "stores/mysql/store_impl.h"

namespace baton::store {
namespace my_impl {

Result<std::int64_t> MysqlStore::counter(const char* op, std::string_view name,
                                         std::int64_t n) {
  if (Status st = core::validate_name(name, "counter name"); !st.ok()) {
    return st.error();
  }
  const std::string t = o_.prefix + "counters";
  const std::string k = my::hex_literal(name);
  const std::string op_s = op;
  std::string sql;
  if (op_s == "get") {
    sql = "SELECT value FROM " + t + " WHERE name = " + k;
  } else if (op_s == "add") {
    // One statement: the row is created or changed atomically.
    sql = "START TRANSACTION;INSERT INTO " + t + " (name, value) VALUES (" + k +
          ", " + std::to_string(n) +
          ") ON DUPLICATE KEY UPDATE value = value + VALUES(value);"
          "SELECT value FROM " +
          t + " WHERE name = " + k + ";COMMIT";
  } else {
    // Seed 003's guarded decrement: never below zero.
    sql = "START TRANSACTION;UPDATE " + t + " SET value = value - " +
          std::to_string(n) + " WHERE name = " + k +
          " AND value >= " + std::to_string(n) + ";SELECT value FROM " + t +
          " WHERE name = " + k + ";COMMIT";
  }
  const TimePoint deadline = request_deadline();
  for (int attempt = 0;; ++attempt) {
    auto c = pool_.get(deadline);
    if (!c.ok()) return std::move(c).error();
    my::DbError db;
    auto r = (*c)->query(sql, deadline, &db);
    if (!r.ok()) {
      if (!(*c)->broken()) {
        (void)(*c)->query("ROLLBACK", deadline);
        pool_.put(std::move(*c));
      }
      if (my::retryable(db.code) && Clock::now() < deadline) {
        jitter_sleep(attempt);
        continue;
      }
      if (db.code == 1690 || db.code == 1264) {  // out of range
        return Error(Errc::invalid_argument,
                     "counter " + core::quote_name(name) + ": adding " +
                         std::to_string(n) + " would overflow");
      }
      return std::move(r).error();
    }
    pool_.put(std::move(*c));
    // get: one result; add/take: START, the change, SELECT, COMMIT.
    const my::ResultSet& last = r->size() == 1 ? r->front() : (*r)[2];
    const std::int64_t v = last.rows.empty() ? 0 : last.num(0, 0);
    if (op_s == "take" && (*r)[1].affected == 0) {
      return Error(Errc::not_acquired, "counter " + core::quote_name(name) +
                                           " is " + std::to_string(v) +
                                           "; cannot take " +
                                           std::to_string(n));
    }
    return v;
  }
}

Result<std::vector<Grant>> MysqlStore::acquire_multi(const MultiSpec& spec,
                                                     milliseconds wait) {
  if (Status st = core::validate(spec, wait); !st.ok()) return st.error();
  const bool all = spec.all_or_nothing;
  const bool waits = wait > milliseconds::zero();
  const TimePoint end = end_of(wait);
  std::int64_t arrival = 0;
  auto step = [&](my::MultiMode mode, long long wait_ms) {
    return transact<my::MultiOutcome>(
        spec.names, [&](Tx& tx) -> Result<my::MultiOutcome> {
          if (arrival == 0) arrival = tx.now();
          return my::multi_step(tx, spec, mode, wait_ms,
                                o_.waiter_timeout.count() * 1000, arrival);
        });
  };
  auto done = [&](const my::MultiOutcome& m) {
    return all ? m.grants.size() == spec.names.size()
               : (!m.grants.empty() || m.pending == 0);
  };
  std::uint64_t seen = generation();
  auto r = step(all && !waits ? my::MultiMode::try_ : my::MultiMode::wait,
                ms_left(end));
  int round = 0;
  for (;;) {
    if (r.ok() && (done(*r) || !waits)) return r->grants;
    if (!r.ok() && r.error().code() != Errc::unavailable) {
      return std::move(r).error();
    }
    if (Clock::now() >= end || call_deadline_passed()) break;
    nap(cap_to_call_deadline(std::min(end, Clock::now() + recheck(round++))),
        seen);
    if (Clock::now() >= end && !all) break;
    seen = generation();
    r = step(my::MultiMode::wait, std::max<long long>(ms_left(end), 1));
  }
  if (!all) {
    auto again = step(my::MultiMode::wait, 1);
    if (!again.ok()) return std::move(again).error();
    return again->grants;
  }
  Result<my::MultiOutcome> last = Error(Errc::internal, "not run");
  for (int attempt = 0; attempt < 4; ++attempt) {
    if (attempt > 0) jitter_sleep(attempt * 4);
    last = step(my::MultiMode::withdraw, 0);
    if (last.ok() || last.error().code() != Errc::unavailable) break;
  }
  ring();
  if (last.ok() && last->grants.size() == spec.names.size()) {
    return last->grants;
  }
  if (!last.ok() && last.error().code() != Errc::timeout) {
    return std::move(last).error();
  }
  return Error(Errc::timeout, "not all of the " +
                                  std::to_string(spec.names.size()) +
                                  " locks were granted within " +
                                  std::to_string(wait.count()) + "ms");
}

}  // namespace my_impl

Result<std::unique_ptr<Store>> open_mysql_store(const core::Url& url) {
  if (url.scheme != "mysql" && url.scheme != "mariadb") {
    return Error(Errc::invalid_argument,
                 "store URL \"" + url.safe() + "\" is not mysql://");
  }
  my::ConnParams params;
  std::string where;
  auto o = my::parse_options(url, &params, &where);
  if (!o.ok()) return std::move(o).error();
  auto store = std::make_unique<my_impl::MysqlStore>(
      std::move(*o), std::move(params), std::move(where), url.safe());
  if (Status st = store->open(); !st.ok()) return st.error();
  return std::unique_ptr<Store>(std::move(store));
}

}  // namespace baton::store
