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
  sweep_doorbells();
  Doorbell bell = new_doorbell(spec.name, token);
  Result<Grant> out = Error(Errc::internal, "not run");
  std::optional<Grant> fast;
  if (fast_path_for(spec) && !busy_.busy(spec.name)) {
    fast = fast_acquire(spec, token, &bell);
  }
  if (fast) {
    out = std::move(*fast);
  } else if (wait <= milliseconds::zero()) {
    std::int64_t arrival = 0;
    auto r = pass(spec, token, Mode::try_, 0, &arrival, &bell);
    out =
        r.ok() ? Result<Grant>(*r->grant) : Result<Grant>(std::move(r).error());
  } else {
    out = wait_for(spec, token, wait, bell);
  }
  settle(std::move(bell), out.ok(), spec.name, token, spec.ttl);
  return out;
}

Result<Grant> MysqlStore::wait_for(const AcquireSpec& spec,
                                   const std::string& token, milliseconds wait,
                                   Doorbell& bell) {
  const TimePoint end = end_of(wait);
  std::int64_t arrival = 0;
  std::uint64_t seen = generation();
  auto r = pass(spec, token, Mode::wait, ms_left(end), &arrival, &bell);
  int round = 0;
  int place = r.ok() ? r->position : 0;
  std::optional<my::BellTarget> target = r.ok() ? r->target : std::nullopt;
  // A first pass that failed before its doorbell was taken: no doorbell.
  if (bell.conn && !bell.tried) let_go(std::move(bell));
  // A target whose doorbell was found free although it is still there (it
  // has none: no slot, acquire_some/all, a reentrant alias, or its
  // connection died): waiting on it again would not block.
  std::string silent;
  for (;;) {
    if (r.ok() && r->grant) return *r->grant;
    if (!r.ok() && r.error().code() != Errc::unavailable) {
      return std::move(r).error();
    }
    if (Clock::now() >= end || call_deadline_passed()) break;
    std::string waited_on, target_bell;
    bool rang = false;
    if (place > 0 && target && bell.held() && bell.usable() &&
        target->token != silent) {
      target_bell =
          my::doorbell_name(where_, o_.prefix, spec.name, target->token);
      // A target in this process: its release or withdrawal rings the
      // Bell as soon, without a round trip; the timers below apply.
      if (doorbell_local(target_bell)) target_bell.clear();
    }
    if (!target_bell.empty()) {
      // Push: block on the doorbell of the entry this request waits for,
      // at most until that entry is due, the heartbeat needs a pass, or
      // the fallback re-check (long when that entry's release is the one
      // event that can grant this request).
      const TimePoint now = Clock::now();
      const milliseconds window =
          target->exact ? long_recheck() : place_recheck(place);
      const TimePoint until =
          std::min({end, now + window, now + o_.waiter_timeout / 4,
                    now + std::chrono::microseconds{target->due_in_us} +
                        milliseconds{1}});
      waited_on = target->token;
      rang = ring_wait(bell, target_bell, until) == 1;
    } else {
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
    }
    if (Clock::now() >= end) break;
    // A non-locking look first: granted meanwhile, or nothing to do.
    seen = generation();
    auto light = peek(spec.name, token, arrival);
    if (light.ok() && light->grant) return *light->grant;
    if (light.ok() && light->position > 0) {
      place = light->position;
      target = light->target;
    } else {
      r = pass(spec, token, Mode::wait, ms_left(end), &arrival);
      place = r.ok() ? r->position : 0;
      target = r.ok() ? r->target : std::nullopt;
    }
    if (rang && target && target->token == waited_on) silent = waited_on;
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
  Result<Grant> g = Error(Errc::internal, "not run");
  if (auto fast = fast_extend(name, t, ttl)) {
    g = std::move(*fast);
  } else {
    g = transact<Grant>({name}, [&](Tx& tx) -> Result<Grant> {
      return sqlstep::extend_step(tx, name, t, ttl.count());
    });
  }
  if (g.ok()) touch_doorbell(name, t, ttl);
  return g;
}

Result<ReleaseResult> MysqlStore::release(std::string_view name_v,
                                          const OwnerToken& token) {
  if (Status st = core::validate_name(name_v); !st.ok()) return st.error();
  const std::string name(name_v), t = token.to_string();
  // The lease's doorbell is let go in the round trip of the COMMIT, after
  // it: a successor woken by it reads the grant.
  Doorbell bell = held_doorbell(name, t);
  // Not on a name this store's acquires found busy (BusyNames): the
  // release would find a waiter. (A failed fast release marks nothing: the
  // first lease on a name is a holders row, released the long way.)
  if (!busy_.busy(name)) {
    if (auto fast = fast_release(name, t, bell)) {
      ring();
      let_go(std::move(bell));
      return *fast;
    }
  }
  auto res = transact<ReleaseResult>(
      {name},
      [&](Tx& tx) -> Result<ReleaseResult> {
        return sqlstep::release_step(tx, name, t);
      },
      &bell, BellOp::let_go);
  ring();
  let_go(std::move(bell));
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
      ") UNION SELECT name FROM " + o_.prefix + "locks WHERE LEFT(name, " +
      len + ") = " + p + " AND h_token <> '' AND h_expires_us > " + now +
      " ORDER BY name LIMIT " + std::to_string(capped);
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
                              std::int64_t* arrival, Doorbell* bell) {
  const std::int64_t hb_us = o_.waiter_timeout.count() * 1000;
  const bool take = bell != nullptr && !bell->tried;
  auto out = transact<Pass>(
      {spec.name},
      [&](Tx& tx) -> Result<Pass> {
        auto r = sqlstep::acquire_step(tx, spec, token, mode, wait_ms, hb_us,
                                       arrival);
        if (!r.ok()) return std::move(r).error();
        Pass p{std::move(r->grant), r->position, std::nullopt};
        if (p.position > 0) {
          p.target = my::bell_target(tx.at(spec.name), token, tx.now());
        }
        return p;
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
      return Pass{tx.to_grant(h, s.capacity, arrival), 0, std::nullopt};
    }
  }
  Pass p{std::nullopt,
         sqlstep::quiet_position(s, s.request_of(token), now,
                                 o_.waiter_timeout.count() * 1000),
         std::nullopt};
  if (p.position > 0) p.target = my::bell_target(s, token, now);
  return p;
}

Result<std::vector<LockInfo>> MysqlStore::infos(
    const std::vector<std::string>& names) {
  auto r = simple_query(my::load_sql(o_.prefix, names, false));
  if (!r.ok()) return std::move(r).error();
  std::int64_t now = 0;
  auto st = my::parse_state(*r, 0, names, &now);
  std::vector<LockInfo> out;
  for (const auto& n : names) out.push_back(sqlstep::lock_info(n, st[n], now));
  return out;
}

}  // namespace baton::store::my_impl
