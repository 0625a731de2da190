// stores/sqlite/sqlite_store.cc — Store on one SQLite file: one BEGIN
// IMMEDIATE transaction per change (the class is in store_impl.h; its
// requests in request.cc).
#include "core/jitter.h"
#include "core/validate.h"
#include "stores/sqlite/store_impl.h"

namespace baton::store::sq_impl {

Result<std::map<std::string, NameState>> SqliteStore::read_state(
    const CallContext& ctx, const std::vector<std::string>& names,
    std::int64_t* now) {
  auto c = pool_.get(deadline(ctx));
  if (!c.ok()) return std::move(c).error();
  sq::Conn& conn = **c;
  if (Status st = conn.exec("BEGIN"); !st.ok()) {
    pool_.put(std::move(*c));
    return st.error();
  }
  auto r = sq::load_state(conn, o_.prefix, names);
  *now = sq::store_now_us();
  (void)conn.exec(r.ok() ? "COMMIT" : "ROLLBACK");
  pool_.put(std::move(*c));
  return r;
}

std::int64_t SqliteStore::next_due(const NameState& s, const sq::Request* mine,
                                   std::int64_t now) const {
  std::int64_t due = kNever;
  for (const auto& h : s.holders) {
    if (h.expires_us > now) due = std::min(due, h.expires_us);
  }
  for (const auto& q : s.queue) {
    if (&q == mine) break;
    due = std::min(due, q.deadline_us);
    if (q.heartbeat_us) due = std::min(due, *q.heartbeat_us);
  }
  if (mine != nullptr && mine->heartbeat_us) {
    due = std::min(due, *mine->heartbeat_us - o_.waiter_timeout.count() * 500);
  }
  return due;
}

milliseconds SqliteStore::recheck() const {
  const long long hi = std::max<long long>(2, o_.recheck.count());
  return milliseconds{core::random_between(hi / 2, hi)};
}

Result<Grant> SqliteStore::extend(std::string_view name_v,
                                  const OwnerToken& token, milliseconds ttl,
                                  const CallContext& ctx) {
  const std::string name(name_v), t = token.to_string();
  return transact<Grant>(ctx, {name}, [&](Tx& tx) -> Result<Grant> {
    return sqlstep::extend_step(tx, name, t, ttl.count());
  });
}

Result<ReleaseResult> SqliteStore::release(std::string_view name_v,
                                           const OwnerToken& token,
                                           const CallContext& ctx) {
  const std::string name(name_v), t = token.to_string();
  auto res = transact<ReleaseResult>(
      ctx, {name}, [&](Tx& tx) -> Result<ReleaseResult> {
        return sqlstep::release_step(tx, name, t);
      });
  bell_->ring();
  return res;
}

Result<std::vector<LockInfo>> SqliteStore::list(std::string_view prefix,
                                                std::size_t limit,
                                                const CallContext& ctx) {
  const std::size_t capped = std::min<std::size_t>(limit, 100'000);
  const std::string match =
      prefix.empty() ? std::string("1")
                     : "substr(name, 1, " + std::to_string(prefix.size()) +
                           ") = " + sq::hex_literal(prefix);
  const std::string now = std::to_string(sq::store_now_us());
  const std::string sql =
      "SELECT name FROM " + o_.prefix + "holders WHERE " + match +
      " AND expires_us > " + now + " UNION SELECT name FROM " + o_.prefix +
      "queue WHERE " + match + " AND withdrawn = 0 AND deadline_us > " + now +
      " AND (heartbeat_us IS NULL OR heartbeat_us > " + now +
      ") ORDER BY name LIMIT " + std::to_string(capped);
  std::vector<std::string> names;
  {
    auto c = pool_.get(deadline(ctx));
    if (!c.ok()) return std::move(c).error();
    auto rs = (*c)->query(sql);
    pool_.put(std::move(*c));
    if (!rs.ok()) return std::move(rs).error();
    for (std::size_t i = 0; i < rs->rows.size(); ++i) {
      names.push_back(rs->at(i, 0));
    }
  }
  return in_use(ctx, names);
}

Result<std::vector<LockInfo>> SqliteStore::infos(
    const CallContext& ctx, const std::vector<std::string>& names) {
  std::int64_t now = 0;
  auto st = read_state(ctx, names, &now);
  if (!st.ok()) return std::move(st).error();
  std::vector<LockInfo> out;
  for (const auto& n : names) {
    out.push_back(sqlstep::lock_info(n, (*st)[n], now));
  }
  return out;
}

Result<std::int64_t> SqliteStore::counter(const CallContext& ctx,
                                          sqlstep::CounterOp op,
                                          std::string_view name,
                                          std::int64_t n) {
  const std::string t = o_.prefix + "counters";
  const std::string k = sq::hex_literal(name);
  const std::string select = "SELECT value FROM " + t + " WHERE name = " + k;
  if (op == sqlstep::CounterOp::get) {
    auto c = pool_.get(deadline(ctx));
    if (!c.ok()) return std::move(c).error();
    auto r = (*c)->query(select);
    pool_.put(std::move(*c));
    if (!r.ok()) return std::move(r).error();
    return r->rows.empty() ? std::int64_t{0} : r->num(0, 0);
  }
  return write_tx<std::int64_t>(
      ctx, [&](sq::Conn& conn, std::string* writes) -> Result<std::int64_t> {
        auto r = conn.query(select);
        if (!r.ok()) return std::move(r).error();
        const std::int64_t v = r->rows.empty() ? 0 : r->num(0, 0);
        std::int64_t next = 0;
        if (op == sqlstep::CounterOp::add) {
          if (__builtin_add_overflow(v, n, &next)) {
            return Error(Errc::invalid_argument,
                         "counter " + core::quote_name(name) + ": adding " +
                             std::to_string(n) + " would overflow");
          }
        } else {
          // The guarded decrement: never below zero.
          if (v < n) {
            return Error(Errc::not_acquired,
                         "counter " + core::quote_name(name) + " is " +
                             std::to_string(v) + "; cannot take " +
                             std::to_string(n));
          }
          next = v - n;
        }
        *writes = "INSERT INTO " + t + " (name, value) VALUES (" + k + ", " +
                  std::to_string(next) +
                  ") ON CONFLICT (name) DO UPDATE SET value = "
                  "excluded.value;";
        return next;
      });
}

}  // namespace baton::store::sq_impl
