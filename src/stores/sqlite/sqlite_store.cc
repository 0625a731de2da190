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
  const std::string& name = spec.name;
  const int cap = static_cast<int>(spec.capacity);
  const std::int64_t hb_us = o_.waiter_timeout.count() * 1000;
  return transact<Pass>({name}, [&](Tx& tx) -> Result<Pass> {
    if (*arrival == 0) *arrival = tx.now();
    tx.schedule(name);
    NameState& s = tx.at(name);
    if (s.active(tx.now()) && s.capacity != cap) {
      return Error(Errc::invalid_argument,
                   "lock " + core::quote_name(name) + " has capacity " +
                       std::to_string(s.capacity) + "; this request asks " +
                       std::to_string(cap));
    }
    if (const sq::Holder* h = s.holder_of(token)) {
      return Pass{tx.to_grant(*h, s.capacity, *arrival), 0, kNever};
    }
    if (sq::Request* q = s.request_of(token)) {
      if (q->withdrawn) {
        tx.remove_request(name, q->id);
        return Error(Errc::not_acquired, "the request for lock " +
                                             core::quote_name(name) +
                                             " was withdrawn while it waited");
      }
      if (mode != Mode::wait || wait_ms <= 0) {
        tx.remove_request(name, q->id);
        tx.pump(name);
        return Error(Errc::timeout, "wait deadline for lock " +
                                        core::quote_name(name) + " passed");
      }
      if (q->kind == 0 && *q->heartbeat_us < tx.now() + hb_us / 2) {
        tx.refresh(*q, tx.now() + wait_ms * 1000, tx.now() + hb_us);
      }
      int pos = 0;
      for (const auto& x : s.queue) {
        if (!x.withdrawn) ++pos;
        if (&x == q) break;
      }
      return Pass{std::nullopt, std::max(pos, 1), next_due(s, q, tx.now())};
    }
    if (!spec.reentrancy_key.empty()) {
      for (auto& h : s.holders) {
        if (h.rkey != spec.reentrancy_key) continue;
        if (h.holds >= 2147483647) {
          return Error(Errc::invalid_argument,
                       "lock " + core::quote_name(name) +
                           " has reached the maximum hold count");
        }
        tx.join(h, token, spec.ttl.count());
        return Pass{tx.to_grant(h, s.capacity, *arrival), 0, kNever};
      }
    }
    if (s.waiting(tx.now()) == 0 && s.live_holders(tx.now()) < cap) {
      auto& h = tx.grant(name, token, spec.ttl.count(), cap, spec.label,
                         spec.reentrancy_key);
      return Pass{tx.to_grant(h, cap, *arrival), 0, kNever};
    }
    if (mode == Mode::try_) {
      std::string why;
      if (s.live_holders(tx.now()) >= s.capacity) {
        why = " is held (" + std::to_string(s.live_holders(tx.now())) + " of " +
              std::to_string(s.capacity) + ")";
      } else {
        why = " has " + std::to_string(s.waiting(tx.now())) +
              " waiters ahead of this request";
      }
      Error e(Errc::not_acquired, "lock " + core::quote_name(name) + why);
      auto hs = tx.holder_infos(name);
      if (!hs.empty()) e.with_holders(std::move(hs));
      return e;
    }
    if (mode == Mode::withdraw || wait_ms <= 0) {
      return Error(Errc::timeout, "wait deadline for lock " +
                                      core::quote_name(name) +
                                      " passed before it was free");
    }
    tx.enqueue(name, token, 0, spec.ttl.count(), cap, spec.label,
               spec.reentrancy_key, tx.now() + wait_ms * 1000,
               tx.now() + hb_us);
    const int pos = s.waiting(tx.now());
    return Pass{std::nullopt, pos, next_due(s, s.request_of(token), tx.now())};
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
  if (mine == nullptr || mine->withdrawn || !mine->live(now) ||
      mine->kind != 0 ||
      *mine->heartbeat_us < now + o_.waiter_timeout.count() * 1000 / 2) {
    return p;
  }
  for (const auto& h : s.holders) {
    if (h.expires_us <= now) return p;
  }
  for (const auto& q : s.queue) {
    if (!q.live(now)) return p;
  }
  if (static_cast<int>(s.holders.size()) < s.capacity) return p;
  for (const auto& q : s.queue) {
    if (!q.withdrawn) ++p.position;
    if (&q == mine) break;
  }
  p.due_us = next_due(s, mine, now);
  return p;
}

Result<std::vector<LockInfo>> SqliteStore::infos(
    const std::vector<std::string>& names) {
  std::int64_t now = 0;
  auto st = read_state(names, &now);
  if (!st.ok()) return std::move(st).error();
  std::vector<LockInfo> out;
  for (const auto& n : names) {
    const NameState& s = (*st)[n];
    LockInfo info;
    info.name = n;
    info.last_fencing_token = static_cast<std::uint64_t>(s.last_fencing);
    info.capacity = s.active(now) ? static_cast<std::uint32_t>(s.capacity) : 1u;
    for (const auto& h : s.holders) {
      if (h.expires_us <= now) continue;
      info.holders.push_back({h.label, static_cast<std::uint64_t>(h.fencing),
                              milliseconds{(h.expires_us - now) / 1000},
                              static_cast<std::uint32_t>(h.holds)});
    }
    for (const auto& q : s.queue) {
      if (q.withdrawn || !q.live(now)) continue;
      info.waiters.push_back(
          {q.label,
           milliseconds{std::max<std::int64_t>(0, now - q.arrived_us) / 1000},
           q.kind == 2});
    }
    out.push_back(std::move(info));
  }
  return out;
}

}  // namespace baton::store::sq_impl
