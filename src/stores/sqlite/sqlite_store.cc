// stores/sqlite/sqlite_store.cc — Store on one SQLite file: one BEGIN
// IMMEDIATE transaction per change; waiters sleep on the inotify bell until
// a release, or until the next instant a locking pass could change
// something (a lease or a request ahead expiring, their own heartbeat),
// with a jittered re-check as the fallback (the class is in store_impl.h).
#include "stores/sqlite/store_impl.h"

namespace baton::store::sq_impl {

Result<std::map<std::string, NameState>> SqliteStore::read_state(
    const std::vector<std::string>& names, std::int64_t* now) {
  const TimePoint deadline = request_deadline();
  auto c = pool_.get(deadline);
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

Result<Grant> SqliteStore::acquire(const AcquireSpec& spec, milliseconds wait) {
  if (Status st = core::validate(spec, wait); !st.ok()) return st.error();
  const std::string token = spec.token.to_string();
  if (wait <= milliseconds::zero()) {
    std::int64_t arrival = 0;
    auto r = pass(spec, token, Mode::try_, 0, &arrival);
    if (!r.ok()) return std::move(r).error();
    return *r->grant;
  }
  const TimePoint end = end_of(wait);
  std::int64_t arrival = 0;
  std::uint64_t seen = bell_->generation();
  auto r = pass(spec, token, Mode::wait, ms_left(end), &arrival);
  std::int64_t due = r.ok() ? r->due_us : kNever;
  for (;;) {
    if (r.ok() && r->grant) return *r->grant;
    if (!r.ok() && r.error().code() != Errc::unavailable) {
      return std::move(r).error();
    }
    if (Clock::now() >= end || call_deadline_passed()) break;
    // The releaser's transaction grants the head of the queue and rings
    // the bell; a waiter otherwise sleeps until something is due, or the
    // fallback re-check.
    const TimePoint until = cap_to_call_deadline(
        std::min({end, Clock::now() + recheck(), steady_at(due)}));
    bell_->nap(until, seen);
    if (Clock::now() >= end) break;
    // A non-locking look first: granted meanwhile, or nothing to do.
    seen = bell_->generation();
    auto light = peek(spec.name, token, arrival);
    if (light.ok() && light->grant) return *light->grant;
    if (light.ok() && light->position > 0) {
      due = light->due_us;
      continue;
    }
    r = pass(spec, token, Mode::wait, ms_left(end), &arrival);
    due = r.ok() ? r->due_us : kNever;
  }
  Result<Pass> last = Error(Errc::internal, "not run");
  for (int attempt = 0; attempt < 4; ++attempt) {
    if (attempt > 0) jitter_sleep(attempt * 4);
    last = pass(spec, token, Mode::withdraw, 0, &arrival);
    if (last.ok() || last.error().code() != Errc::unavailable) break;
  }
  bell_->ring();
  if (last.ok() && last->grant) return *last->grant;
  if (!last.ok() && last.error().code() != Errc::timeout) {
    return std::move(last).error();
  }
  return Error(Errc::timeout, "lock " + core::quote_name(spec.name) +
                                  " was not granted within " +
                                  std::to_string(wait.count()) + "ms");
}

Result<Grant> SqliteStore::extend(std::string_view name_v,
                                  const OwnerToken& token, milliseconds ttl) {
  if (Status st = core::validate_name(name_v); !st.ok()) return st.error();
  if (Status st = core::validate_ttl(ttl); !st.ok()) return st.error();
  const std::string name(name_v), t = token.to_string();
  return transact<Grant>({name}, [&](Tx& tx) -> Result<Grant> {
    return sqlstep::extend_step(tx, name, t, ttl.count());
  });
}

Result<ReleaseResult> SqliteStore::release(std::string_view name_v,
                                           const OwnerToken& token) {
  if (Status st = core::validate_name(name_v); !st.ok()) return st.error();
  const std::string name(name_v), t = token.to_string();
  auto res =
      transact<ReleaseResult>({name}, [&](Tx& tx) -> Result<ReleaseResult> {
        return sqlstep::release_step(tx, name, t);
      });
  bell_->ring();
  return res;
}

Result<std::vector<LockInfo>> SqliteStore::list(std::string_view prefix,
                                                std::size_t limit) {
  if (prefix.find('\0') != std::string_view::npos) {
    return Error(Errc::invalid_argument, "name prefix contains a NUL byte");
  }
  if (limit == 0) return std::vector<LockInfo>{};
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
    auto c = pool_.get(request_deadline());
    if (!c.ok()) return std::move(c).error();
    auto rs = (*c)->query(sql);
    pool_.put(std::move(*c));
    if (!rs.ok()) return std::move(rs).error();
    for (std::size_t i = 0; i < rs->rows.size(); ++i) {
      names.push_back(rs->at(i, 0));
    }
  }
  if (names.empty()) return std::vector<LockInfo>{};
  auto r = infos(names);
  if (!r.ok()) return std::move(r).error();
  std::vector<LockInfo> out;
  for (auto& i : *r) {
    if (!i.holders.empty() || !i.waiters.empty()) out.push_back(std::move(i));
  }
  return out;
}

Result<Pass> SqliteStore::pass(const AcquireSpec& spec,
                               const std::string& token, Mode mode,
                               long long wait_ms, std::int64_t* arrival) {
  const std::int64_t hb_us = o_.waiter_timeout.count() * 1000;
  return transact<Pass>({spec.name}, [&](Tx& tx) -> Result<Pass> {
    auto r =
        sqlstep::acquire_step(tx, spec, token, mode, wait_ms, hb_us, arrival);
    if (!r.ok()) return std::move(r).error();
    const std::int64_t due = r->mine != nullptr
                                 ? next_due(tx.at(spec.name), r->mine, tx.now())
                                 : kNever;
    return Pass{std::move(r->grant), r->position, due};
  });
}

Result<Pass> SqliteStore::peek(const std::string& name,
                               const std::string& token, std::int64_t arrival) {
  std::int64_t now = 0;
  auto st = read_state({name}, &now);
  if (!st.ok()) return std::move(st).error();
  NameState& s = (*st)[name];
  for (const auto& h : s.holders) {
    if (h.has(token) && h.expires_us > now) {
      Tx tx(o_.prefix, sqlstep::Dialect::sqlite, {}, now,
            sq::wall_now_us() - now);
      return Pass{tx.to_grant(h, s.capacity, arrival), 0, kNever};
    }
  }
  Pass p;
  const sq::Request* mine = s.request_of(token);
  p.position =
      sqlstep::quiet_position(s, mine, now, o_.waiter_timeout.count() * 1000);
  if (p.position > 0) p.due_us = next_due(s, mine, now);
  return p;
}

Result<std::vector<LockInfo>> SqliteStore::infos(
    const std::vector<std::string>& names) {
  std::int64_t now = 0;
  auto st = read_state(names, &now);
  if (!st.ok()) return std::move(st).error();
  std::vector<LockInfo> out;
  for (const auto& n : names) {
    out.push_back(sqlstep::lock_info(n, (*st)[n], now));
  }
  return out;
}

}  // namespace baton::store::sq_impl
