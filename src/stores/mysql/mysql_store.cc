// stores/mysql/mysql_store.cc — Store on MySQL/MariaDB: one InnoDB
// transaction per operation under seed 003's serialization rows; waiting by
// re-checks paced by the place in line (the class is in store_impl.h).
#include "stores/mysql/store_impl.h"

namespace baton::store::my_impl {

std::shared_ptr<Bell> bell_for(const std::string& key) {
  static std::mutex mu;
  static auto* bells = new std::map<std::string, std::weak_ptr<Bell>>();
  std::lock_guard<std::mutex> lk(mu);
  auto& w = (*bells)[key];
  auto b = w.lock();
  if (!b) {
    b = std::make_shared<Bell>();
    w = b;
  }
  return b;
}

Result<Grant> MysqlStore::acquire(const AcquireSpec& spec, milliseconds wait) {
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
  std::uint64_t seen = generation();
  auto r = pass(spec, token, Mode::wait, ms_left(end), &arrival);
  int round = 0;
  int place = r.ok() ? r->position : 0;
  for (;;) {
    if (r.ok() && r->grant) return *r->grant;
    if (!r.ok() && r.error().code() != Errc::unavailable) {
      return std::move(r).error();
    }
    if (Clock::now() >= end || call_deadline_passed()) break;
    // The releaser's transaction grants the head of the queue, so a
    // waiter looks again after about 1-2 ms per place in line (it moves
    // up one place per handoff), at most recheck_max.
    const milliseconds delay =
        place > 0 ? place_recheck(place) : recheck(round++);
    // Only the first two in line answer the bell (no herd of re-checks
    // after every release); the rest keep their timers.
    const TimePoint until =
        cap_to_call_deadline(std::min(end, Clock::now() + delay));
    if (place == 0 || place <= 2) {
      nap(until, seen);
    } else {
      std::this_thread::sleep_until(until);
    }
    if (Clock::now() >= end) break;
    // A non-locking look first: granted meanwhile, or nothing to do.
    seen = generation();
    auto light = peek(spec.name, token, arrival);
    if (light.ok() && light->grant) return *light->grant;
    if (light.ok() && light->position > 0) {
      place = light->position;
      continue;
    }
    r = pass(spec, token, Mode::wait, ms_left(end), &arrival);
    place = r.ok() ? r->position : 0;
  }
  Result<Pass> last = Error(Errc::internal, "not run");
  for (int attempt = 0; attempt < 4; ++attempt) {
    if (attempt > 0) jitter_sleep(attempt * 4);
    last = pass(spec, token, Mode::withdraw, 0, &arrival);
    if (last.ok() || last.error().code() != Errc::unavailable) break;
  }
  ring();
  if (last.ok() && last->grant) return *last->grant;
  if (!last.ok() && last.error().code() != Errc::timeout) {
    return std::move(last).error();
  }
  return Error(Errc::timeout, "lock " + core::quote_name(spec.name) +
                                  " was not granted within " +
                                  std::to_string(wait.count()) + "ms");
}

Result<Grant> MysqlStore::extend(std::string_view name_v,
                                 const OwnerToken& token, milliseconds ttl) {
  if (Status st = core::validate_name(name_v); !st.ok()) return st.error();
  if (Status st = core::validate_ttl(ttl); !st.ok()) return st.error();
  const std::string name(name_v), t = token.to_string();
  return transact<Grant>({name}, [&](Tx& tx) -> Result<Grant> {
    return sqlstep::extend_step(tx, name, t, ttl.count());
  });
}

Result<ReleaseResult> MysqlStore::release(std::string_view name_v,
                                          const OwnerToken& token) {
  if (Status st = core::validate_name(name_v); !st.ok()) return st.error();
  const std::string name(name_v), t = token.to_string();
  auto res =
      transact<ReleaseResult>({name}, [&](Tx& tx) -> Result<ReleaseResult> {
        return sqlstep::release_step(tx, name, t);
      });
  ring();
  return res;
}

Result<std::vector<LockInfo>> MysqlStore::list(std::string_view prefix,
                                               std::size_t limit) {
  if (prefix.find('\0') != std::string_view::npos) {
    return Error(Errc::invalid_argument, "name prefix contains a NUL byte");
  }
  if (limit == 0) return std::vector<LockInfo>{};
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
      ") ORDER BY name LIMIT " + std::to_string(capped);
  auto rs = simple_query(sql);
  if (!rs.ok()) return std::move(rs).error();
  std::vector<std::string> names;
  for (std::size_t i = 0; i < rs->front().rows.size(); ++i) {
    names.push_back(rs->front().at(i, 0));
  }
  if (names.empty()) return std::vector<LockInfo>{};
  auto r = infos(names);
  if (!r.ok()) return std::move(r).error();
  // Only those still in use.
  std::vector<LockInfo> out;
  for (auto& i : *r) {
    if (!i.holders.empty() || !i.waiters.empty()) out.push_back(std::move(i));
  }
  return out;
}

Result<Pass> MysqlStore::pass(const AcquireSpec& spec, const std::string& token,
                              Mode mode, long long wait_ms,
                              std::int64_t* arrival) {
  const std::string& name = spec.name;
  const int cap = static_cast<int>(spec.capacity);
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
    if (const my::Holder* h = s.holder_of(token)) {
      return Pass{tx.to_grant(*h, s.capacity, *arrival), 0};
    }
    if (my::Request* q = s.request_of(token)) {
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
      if (q->kind == 0 &&
          *q->heartbeat_us < tx.now() + o_.waiter_timeout.count() * 1000 / 2) {
        tx.refresh(*q, tx.now() + wait_ms * 1000,
                   tx.now() + o_.waiter_timeout.count() * 1000);
      }
      int pos = 0;
      for (const auto& x : s.queue) {
        if (!x.withdrawn) ++pos;
        if (&x == q) break;
      }
      return Pass{std::nullopt, std::max(pos, 1)};
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
        return Pass{tx.to_grant(h, s.capacity, *arrival), 0};
      }
    }
    if (s.waiting(tx.now()) == 0 && s.live_holders(tx.now()) < cap) {
      auto& h = tx.grant(name, token, spec.ttl.count(), cap, spec.label,
                         spec.reentrancy_key);
      return Pass{tx.to_grant(h, cap, *arrival), 0};
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
               tx.now() + o_.waiter_timeout.count() * 1000);
    return Pass{std::nullopt, s.waiting(tx.now())};
  });
}

Result<Pass> MysqlStore::peek(const std::string& name, const std::string& token,
                              std::int64_t arrival) {
  auto r = simple_query(my::load_sql(o_.prefix, {name}, false));
  if (!r.ok()) return std::move(r).error();
  std::int64_t now = 0;
  auto st = my::parse_state(*r, 0, {name}, &now);
  NameState& s = st[name];
  for (const auto& h : s.holders) {
    if (h.has(token) && h.expires_us > now) {
      Tx tx(o_.prefix, sqlstep::Dialect::mysql, {}, now);
      return Pass{tx.to_grant(h, s.capacity, arrival), 0};
    }
  }
  Pass p;
  const my::Request* mine = s.request_of(token);
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
  return p;
}

Result<std::vector<LockInfo>> MysqlStore::infos(
    const std::vector<std::string>& names) {
  auto r = simple_query(my::load_sql(o_.prefix, names, false));
  if (!r.ok()) return std::move(r).error();
  std::int64_t now = 0;
  auto st = my::parse_state(*r, 0, names, &now);
  std::vector<LockInfo> out;
  for (const auto& n : names) {
    const NameState& s = st[n];
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

}  // namespace baton::store::my_impl
