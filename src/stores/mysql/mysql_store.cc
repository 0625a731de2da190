// stores/mysql/mysql_store.cc — Store on MySQL/MariaDB: one InnoDB
// transaction per operation under the serialization rows (the class is in
// store_impl.h; its requests in request.cc).
#include "core/validate.h"
#include "stores/mysql/store_impl.h"

namespace baton::store::my_impl {

std::shared_ptr<sqlstep::LocalBell> bell_for(const std::string& key) {
  static std::mutex mu;
  static auto* bells =
      new std::map<std::string, std::weak_ptr<sqlstep::LocalBell>>();
  std::lock_guard<std::mutex> lk(mu);
  auto& w = (*bells)[key];
  auto b = w.lock();
  if (!b) {
    b = std::make_shared<sqlstep::LocalBell>();
    w = b;
  }
  return b;
}

Result<Grant> MysqlStore::extend(std::string_view name_v,
                                 const OwnerToken& token, milliseconds ttl,
                                 const CallContext& ctx) {
  const std::string name(name_v), t = token.to_string();
  Result<Grant> g = Error(Errc::internal, "not run");
  if (auto fast = fast_extend(ctx, name, t, ttl)) {
    g = std::move(*fast);
  } else {
    g = transact<Grant>(ctx, {name}, [&](Tx& tx) -> Result<Grant> {
      return sqlstep::extend_step(tx, name, t, ttl.count());
    });
  }
  if (g.ok()) touch_doorbell(name, t, ttl);
  return g;
}

Result<ReleaseResult> MysqlStore::release(std::string_view name_v,
                                          const OwnerToken& token,
                                          const CallContext& ctx) {
  const std::string name(name_v), t = token.to_string();
  // The lease's doorbell is let go in the round trip of the COMMIT, after
  // it: a successor woken by it reads the grant.
  const SteadyTime d = deadline(ctx);
  Doorbell bell = held_doorbell(name, t);
  // Not on a name this store's acquires found busy (BusyNames): the
  // release would find a waiter. (A failed fast release marks nothing: the
  // first lease on a name is a holders row, released the long way.)
  if (!busy_.busy(name)) {
    if (auto fast = fast_release(d, name, t, bell)) {
      ring();
      let_go(std::move(bell), d);
      return *fast;
    }
  }
  auto res = transact<ReleaseResult>(
      ctx, {name},
      [&](Tx& tx) -> Result<ReleaseResult> {
        return sqlstep::release_step(tx, name, t);
      },
      &bell, BellOp::let_go);
  ring();
  let_go(std::move(bell), d);
  return res;
}

Result<std::vector<LockInfo>> MysqlStore::list(std::string_view prefix,
                                               std::size_t limit,
                                               const CallContext& ctx) {
  const std::size_t capped = std::min<std::size_t>(limit, 100'000);
  const std::string p = my::hex_literal(prefix);
  const std::string len = std::to_string(prefix.size());
  const std::string now =
      "TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6))";
  const std::string sql =
      "SELECT name FROM " + o_.prefix + "holders WHERE LEFT(name, " + len +
      ") = " + p + " AND expires_us > " + now + " UNION SELECT name FROM " +
      o_.prefix + "queue WHERE LEFT(name, " + len + ") = " + p +
      " AND withdrawn = 0 AND deadline_us > " + now +
      " AND (heartbeat_us IS NULL OR heartbeat_us > " + now +
      ") UNION SELECT name FROM " + o_.prefix + "locks WHERE LEFT(name, " +
      len + ") = " + p + " AND h_token <> '' AND h_expires_us > " + now +
      " ORDER BY name LIMIT " + std::to_string(capped);
  auto rs = simple_query(ctx, sql);
  if (!rs.ok()) return std::move(rs).error();
  std::vector<std::string> names;
  for (std::size_t i = 0; i < rs->front().rows.size(); ++i) {
    names.push_back(rs->front().at(i, 0));
  }
  return in_use(ctx, names);
}

Result<sqlstep::AcquireOutcome> MysqlStore::pass(
    const CallContext& ctx, const AcquireSpec& spec, const std::string& token,
    Mode mode, long long wait_ms, std::int64_t* arrival, Doorbell* bell,
    std::optional<my::BellTarget>* target) {
  const std::int64_t hb_us = o_.waiter_timeout.count() * 1000;
  const bool take = bell != nullptr && !bell->tried;
  auto out = transact<sqlstep::AcquireOutcome>(
      ctx, {spec.name},
      [&](Tx& tx) -> Result<sqlstep::AcquireOutcome> {
        auto r = sqlstep::acquire_step(tx, spec, token, mode, wait_ms, hb_us,
                                       arrival);
        if (!r.ok()) return r;
        *target = std::nullopt;
        if (r->position > 0) {
          *target = my::bell_target(tx.at(spec.name), token, tx.now());
        }
        r->mine = nullptr;  // into the transaction's rows
        return r;
      },
      take ? bell : nullptr, take ? BellOp::take : BellOp::none);
  // Not granted at once: the name is busy; its next calls skip the fast
  // path for a while (BusyNames).
  if ((out.ok() && !out->grant) ||
      (!out.ok() && out.error().code() == Errc::not_acquired)) {
    busy_.mark(spec.name);
  }
  return out;
}

Result<sqlstep::AcquireOutcome> MysqlStore::peek(
    const CallContext& ctx, const std::string& name, const std::string& token,
    std::int64_t arrival, std::optional<my::BellTarget>* target) {
  auto r = simple_query(ctx, my::load_sql(o_.prefix, {name}, false));
  if (!r.ok()) return std::move(r).error();
  std::int64_t now = 0;
  auto st = my::parse_state(*r, 0, {name}, &now);
  const my::NameState& s = st[name];
  const Tx tx(o_.prefix, sqlstep::Dialect::mysql, {}, now);
  auto out = sqlstep::quiet_look(tx, s, token, o_.waiter_timeout.count() * 1000,
                                 arrival);
  *target = std::nullopt;
  if (out.position > 0) *target = my::bell_target(s, token, now);
  out.mine = nullptr;
  return out;
}

Result<std::vector<LockInfo>> MysqlStore::infos(
    const CallContext& ctx, const std::vector<std::string>& names) {
  auto r = simple_query(ctx, my::load_sql(o_.prefix, names, false));
  if (!r.ok()) return std::move(r).error();
  std::int64_t now = 0;
  auto st = my::parse_state(*r, 0, names, &now);
  std::vector<LockInfo> out;
  for (const auto& n : names) out.push_back(sqlstep::lock_info(n, st[n], now));
  return out;
}

Result<std::int64_t> MysqlStore::counter(const CallContext& ctx,
                                         sqlstep::CounterOp op,
                                         std::string_view name,
                                         std::int64_t n) {
  const std::string t = o_.prefix + "counters";
  const std::string k = my::hex_literal(name);
  std::string sql;
  if (op == sqlstep::CounterOp::get) {
    sql = "SELECT value FROM " + t + " WHERE name = " + k;
  } else if (op == sqlstep::CounterOp::add) {
    // One statement: the row is created or changed atomically.
    sql = "START TRANSACTION;INSERT INTO " + t + " (name, value) VALUES (" + k +
          ", " + std::to_string(n) +
          ") ON DUPLICATE KEY UPDATE value = value + VALUES(value);"
          "SELECT value FROM " +
          t + " WHERE name = " + k + ";COMMIT";
  } else {
    // The guarded decrement: never below zero.
    sql = "START TRANSACTION;UPDATE " + t + " SET value = value - " +
          std::to_string(n) + " WHERE name = " + k +
          " AND value >= " + std::to_string(n) + ";SELECT value FROM " + t +
          " WHERE name = " + k + ";COMMIT";
  }
  const SteadyTime d = deadline(ctx);
  for (int attempt = 0;; ++attempt) {
    auto c = pool_.get(d);
    if (!c.ok()) return std::move(c).error();
    my::DbError db;
    auto r = (*c)->query(sql, d, &db);
    if (!r.ok()) {
      if (!(*c)->broken()) {
        (void)(*c)->query("ROLLBACK", d);
        pool_.put(std::move(*c));
      }
      if (my::retryable(db.code) && my::Clock::now() < d) {
        retry_pause(attempt, d);
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
    if (op == sqlstep::CounterOp::take && (*r)[1].affected == 0) {
      return Error(Errc::not_acquired, "counter " + core::quote_name(name) +
                                           " is " + std::to_string(v) +
                                           "; cannot take " +
                                           std::to_string(n));
    }
    return v;
  }
}

}  // namespace baton::store::my_impl
