// core/lock_table.cc — LockTable: helpers, single-lock requests, introspection,
// sessions, counters and persistence. Multi-lock requests live in
// lock_table_multi.cc. Semantics: see lock_table.h.
#include "core/lock_table.h"

#include <algorithm>
#include <limits>

#include "core/lock_table_impl.h"
#include "core/validate.h"

namespace baton::core {

namespace {

Error invalid(std::string message) {
  return Error(Errc::invalid_argument, std::move(message));
}

std::chrono::milliseconds floor_ms(Nanos d) {
  if (d <= Nanos::zero()) return std::chrono::milliseconds{0};
  return std::chrono::duration_cast<std::chrono::milliseconds>(d);
}

}  // namespace

// ---------------------------------------------------------------- helpers

LockE* LockTable::Impl::find_lock(std::string_view name) {
  auto it = locks.find(std::string(name));
  return it == locks.end() ? nullptr : &it->second;
}

LockE& LockTable::Impl::get_or_create_lock(std::string_view name,
                                           std::uint32_t capacity) {
  auto [it, inserted] = locks.try_emplace(std::string(name));
  if (inserted) {
    it->second.name = it->first;
    it->second.capacity = capacity;
    names.insert(it->first);
  }
  return it->second;
}

void LockTable::Impl::mark_dirty(LockE& lock) {
  if (!lock.dirty) {
    lock.dirty = true;
    dirty.push_back(&lock);
  }
}

void LockTable::Impl::settle(Instant now) {
  while (!dirty.empty()) {
    LockE* lock = dirty.back();
    dirty.pop_back();
    lock->dirty = false;
    pump(*lock, now);
    if (lock->dirty) continue;  // re-marked by a group grant; handled later
    if (lock->holders.empty() && lock->queue.empty()) {
      names.erase(lock->name);
      locks.erase(lock->name);
    }
  }
}

bool LockTable::Impl::group_ready(const GroupE& group) const {
  for (const auto& [lock, it] : group.members) {
    if (lock->queue.begin() != it) return false;
    if (lock->holders.size() >= lock->capacity) return false;
  }
  return true;
}

void LockTable::Impl::pump(LockE& lock, Instant now) {
  while (!lock.queue.empty()) {
    WaiterIt head = lock.queue.begin();
    if (head->group != nullptr) {
      if (!group_ready(*head->group)) return;
      grant_group(*head->group, now);
      continue;
    }
    if (!head->reentrancy_key.empty()) {
      auto joined = lock.by_reentrancy_key.find(head->reentrancy_key);
      if (joined != lock.by_reentrancy_key.end() &&
          joined->second->holds < std::numeric_limits<std::uint32_t>::max()) {
        LeaseIt lease = joined->second;
        Instant arrival = head->arrival;
        OwnerToken token = head->token;
        join_lease(lock, lease, token, head->ttl, now);
        remove_waiter(lock, head);
        push_event(Event::Kind::granted, lock, token,
                   make_grant(lock, *lease, arrival));
        continue;
      }
    }
    if (lock.holders.size() >= lock.capacity) return;
    grant_waiter(lock, head, now);
  }
}

LeaseIt LockTable::Impl::add_lease(LockE& lock, const OwnerToken& token,
                                   Nanos ttl, Instant now,
                                   std::string_view label,
                                   std::string_view reentrancy_key,
                                   SessionId session) {
  LeaseE lease;
  lease.token = token;
  lease.fencing = ++fencing;
  lease.ttl = ttl;
  lease.expiry = now + ttl;
  lease.label = std::string(label);
  lease.reentrancy_key = std::string(reentrancy_key);
  lease.session = session;
  lock.holders.push_back(std::move(lease));
  LeaseIt it = std::prev(lock.holders.end());
  lock.last_fencing = std::max(lock.last_fencing, it->fencing);
  it->timer = timers.emplace(it->expiry, TimerRef{&lock, true, it, {}});
  leases.emplace(Key{lock.name, token}, std::make_pair(&lock, it));
  if (!it->reentrancy_key.empty()) {
    lock.by_reentrancy_key.emplace(it->reentrancy_key, it);
  }
  if (session != 0) {
    LeaseLinks& links = session_leases[session];
    it->session_link = links.insert(links.end(), {&lock, it});
  }
  ++totals.grants;
  ++totals.leases;
  sink_put(lock, *it);
  return it;
}

void LockTable::Impl::remove_lease(LockE& lock, LeaseIt it) {
  timers.erase(it->timer);
  leases.erase(Key{lock.name, it->token});
  for (const OwnerToken& alias : it->aliases) {
    leases.erase(Key{lock.name, alias});
  }
  if (!it->reentrancy_key.empty()) {
    auto k = lock.by_reentrancy_key.find(it->reentrancy_key);
    if (k != lock.by_reentrancy_key.end() && k->second == it) {
      lock.by_reentrancy_key.erase(k);
    }
  }
  if (it->session != 0) {
    auto s = session_leases.find(it->session);
    s->second.erase(it->session_link);
    if (s->second.empty()) session_leases.erase(s);
  }
  --totals.leases;
  lock.holders.erase(it);
  mark_dirty(lock);
}

void LockTable::Impl::set_expiry(LockE& lock, LeaseIt it, Instant expiry) {
  if (it->expiry == expiry) return;
  timers.erase(it->timer);
  it->expiry = expiry;
  it->timer = timers.emplace(expiry, TimerRef{&lock, true, it, {}});
}

void LockTable::Impl::join_lease(LockE& lock, LeaseIt lease,
                                 const OwnerToken& alias, Nanos ttl,
                                 Instant now) {
  lease->holds += 1;
  if (now + ttl > lease->expiry) {
    lease->ttl = ttl;
    set_expiry(lock, lease, now + ttl);
  }
  if (alias != lease->token) {
    lease->aliases.push_back(alias);
    leases.emplace(Key{lock.name, alias}, std::make_pair(&lock, lease));
  }
  sink_put(lock, *lease);
}

WaiterIt LockTable::Impl::add_waiter(LockE& lock, WaiterE waiter) {
  lock.queue.push_back(std::move(waiter));
  WaiterIt it = std::prev(lock.queue.end());
  it->timer = timers.emplace(it->deadline, TimerRef{&lock, false, {}, it});
  waiters.emplace(Key{lock.name, it->token}, std::make_pair(&lock, it));
  if (it->session != 0) {
    WaiterLinks& links = session_waiters[it->session];
    it->session_link = links.insert(links.end(), {&lock, it});
  }
  return it;
}

void LockTable::Impl::remove_waiter(LockE& lock, WaiterIt it) {
  timers.erase(it->timer);
  waiters.erase(Key{lock.name, it->token});
  if (it->session != 0) {
    auto s = session_waiters.find(it->session);
    s->second.erase(it->session_link);
    if (s->second.empty()) session_waiters.erase(s);
  }
  lock.queue.erase(it);
  mark_dirty(lock);
}

void LockTable::Impl::remove_group(GroupE& group,
                                   std::optional<Event::Kind> kind) {
  OwnerToken token = group.token;
  auto members = std::move(group.members);
  groups.erase(token);
  for (auto& [lock, it] : members) {
    remove_waiter(*lock, it);
    if (kind) push_event(*kind, *lock, token);
  }
}

void LockTable::Impl::grant_waiter(LockE& lock, WaiterIt it, Instant now) {
  LeaseIt lease =
      add_lease(lock, it->token, it->ttl, now, it->label, it->reentrancy_key,
                it->ephemeral ? it->session : 0);
  Instant arrival = it->arrival;
  OwnerToken token = it->token;
  remove_waiter(lock, it);
  push_event(Event::Kind::granted, lock, token,
             make_grant(lock, *lease, arrival));
}

void LockTable::Impl::grant_group(GroupE& group, Instant now) {
  OwnerToken token = group.token;
  auto members = std::move(group.members);
  groups.erase(token);
  for (auto& [lock, it] : members) {
    LeaseIt lease = add_lease(*lock, token, it->ttl, now, it->label, {}, 0);
    Instant arrival = it->arrival;
    remove_waiter(*lock, it);
    push_event(Event::Kind::granted, *lock, token,
               make_grant(*lock, *lease, arrival));
  }
}

CoreGrant LockTable::Impl::make_grant(const LockE& lock, const LeaseE& lease,
                                      Instant arrival) const {
  CoreGrant g;
  g.name = lock.name;
  g.token = lease.token;
  g.fencing_token = lease.fencing;
  g.ttl = lease.ttl;
  g.holds = lease.holds;
  g.capacity = lock.capacity;
  g.expiry = lease.expiry;
  g.valid_for = lease.expiry - arrival;
  return g;
}

LeaseRecord LockTable::Impl::make_record(const LockE& lock,
                                         const LeaseE& lease) const {
  LeaseRecord r;
  r.name = lock.name;
  r.token = lease.token;
  r.fencing_token = lease.fencing;
  r.ttl = lease.ttl;
  r.expiry = lease.expiry;
  r.holds = lease.holds;
  r.capacity = lock.capacity;
  r.label = lease.label;
  r.reentrancy_key = lease.reentrancy_key;
  r.aliases = lease.aliases;
  return r;
}

std::vector<HolderInfo> LockTable::Impl::holders_of(const LockE& lock,
                                                    Instant now) const {
  std::vector<HolderInfo> out;
  out.reserve(lock.holders.size());
  for (const LeaseE& l : lock.holders) {
    out.push_back({l.label, l.fencing, floor_ms(l.expiry - now), l.holds});
  }
  return out;
}

void LockTable::Impl::sink_put(const LockE& lock, const LeaseE& lease) {
  if (sink != nullptr) sink->lease_put(make_record(lock, lease));
}

void LockTable::Impl::push_event(Event::Kind kind, const LockE& lock,
                                 const OwnerToken& token, CoreGrant grant) {
  events.push_back(Event{kind, lock.name, token, std::move(grant)});
}

std::size_t LockTable::Impl::position_of(const LockE& lock, WaiterIt it) const {
  std::size_t pos = 1;
  for (auto i = lock.queue.begin(); i != lock.queue.end() && i != it; ++i) {
    ++pos;
  }
  return pos;
}

void LockTable::Impl::advance() {
  const Instant now = clock.now();
  while (!timers.empty() && timers.begin()->first <= now) {
    const Instant t = timers.begin()->first;
    // Everything due at instant t: wait deadlines first (a waiter whose
    // deadline is t is not granted by a lease that also dies at t), then
    // expiries, then hand out the freed capacity.
    std::vector<Key> due_waiters;
    for (auto it = timers.begin(); it != timers.end() && it->first == t; ++it) {
      if (!it->second.is_lease) {
        due_waiters.push_back(
            Key{it->second.lock->name, it->second.waiter->token});
      }
    }
    for (const Key& key : due_waiters) {
      auto w = waiters.find(key);
      if (w == waiters.end()) continue;  // removed with its group
      auto [lock, it] = w->second;
      ++totals.wait_timeouts;
      if (it->group != nullptr) {
        remove_group(*it->group, Event::Kind::wait_timed_out);
      } else {
        OwnerToken token = it->token;
        remove_waiter(*lock, it);
        push_event(Event::Kind::wait_timed_out, *lock, token);
      }
    }
    while (!timers.empty() && timers.begin()->first == t) {
      TimerRef ref = timers.begin()->second;
      LockE& lock = *ref.lock;
      ++totals.expirations;
      CoreGrant dead = make_grant(lock, *ref.lease, ref.lease->expiry);
      OwnerToken token = ref.lease->token;
      remove_lease(lock, ref.lease);
      if (sink != nullptr) sink->lease_removed(lock.name, token);
      push_event(Event::Kind::lease_expired, lock, token, std::move(dead));
    }
    settle(now);
  }
}

// ------------------------------------------------------------ LockTable

LockTable::LockTable(const Clock& clock, Limits limits)
    : impl_(std::make_unique<Impl>(clock, limits)) {}
LockTable::~LockTable() = default;

void LockTable::set_change_sink(ChangeSink* sink) { impl_->sink = sink; }

Result<AcquireOutcome> LockTable::acquire(const AcquireRequest& request) {
  return impl_->acquire(request);
}

Result<AcquireOutcome> LockTable::Impl::acquire(const AcquireRequest& r) {
  advance();
  const Instant now = clock.now();
  if (Status s = validate_name(r.name); !s.ok()) return std::move(s).error();
  if (Status s = validate_ttl(r.ttl); !s.ok()) return std::move(s).error();
  if (Status s = validate_capacity(r.capacity); !s.ok()) {
    return std::move(s).error();
  }
  if (Status s = validate_label(r.label); !s.ok()) return std::move(s).error();
  if (Status s = validate_reentrancy_key(r.reentrancy_key); !s.ok()) {
    return std::move(s).error();
  }
  if (r.token.is_zero()) return invalid("owner token is zero");

  LockE* lock = find_lock(r.name);
  if (lock != nullptr && lock->capacity != r.capacity) {
    return invalid("lock " + quote_name(r.name) + " has capacity " +
                   std::to_string(lock->capacity) + "; request asked for " +
                   std::to_string(r.capacity));
  }
  AcquireOutcome out;
  if (lock != nullptr) {
    // Idempotent retry of a granted request (or a reentrant alias).
    if (auto l = leases.find(Key{std::string(r.name), r.token});
        l != leases.end()) {
      out.granted = true;
      out.grant = make_grant(*lock, *l->second.second, now);
      return out;
    }
    // Retry of a queued request: it keeps its place.
    if (auto w = waiters.find(Key{std::string(r.name), r.token});
        w != waiters.end()) {
      WaiterIt it = w->second.second;
      if (r.wait_deadline) {
        if (*r.wait_deadline <= now) {
          if (it->group != nullptr) {
            remove_group(*it->group, std::nullopt);
          } else {
            remove_waiter(*lock, it);
          }
          settle(now);
          return Error(Errc::timeout, "wait deadline for lock " +
                                          quote_name(r.name) + " passed");
        }
        timers.erase(it->timer);
        it->deadline = *r.wait_deadline;
        it->timer = timers.emplace(it->deadline, TimerRef{lock, false, {}, it});
      }
      out.position = position_of(*lock, it);
      return out;
    }
    // Reentrant join.
    if (!r.reentrancy_key.empty()) {
      auto k = lock->by_reentrancy_key.find(std::string(r.reentrancy_key));
      if (k != lock->by_reentrancy_key.end()) {
        LeaseIt lease = k->second;
        if (lease->holds == std::numeric_limits<std::uint32_t>::max()) {
          return invalid("lock " + quote_name(r.name) +
                         " has reached the maximum hold count");
        }
        join_lease(*lock, lease, r.token, r.ttl, now);
        out.granted = true;
        out.grant = make_grant(*lock, *lease, now);
        return out;
      }
    }
  }
  const bool free = lock == nullptr || (lock->queue.empty() &&
                                        lock->holders.size() < lock->capacity);
  if (lock == nullptr && locks.size() >= limits.max_locks) {
    return invalid("the table holds " + std::to_string(locks.size()) +
                   " locks; the limit is " + std::to_string(limits.max_locks));
  }
  if (free) {
    LockE& l = get_or_create_lock(r.name, r.capacity);
    LeaseIt lease = add_lease(l, r.token, r.ttl, now, r.label, r.reentrancy_key,
                              r.ephemeral ? r.session : 0);
    out.granted = true;
    out.grant = make_grant(l, *lease, now);
    return out;
  }
  if (!r.wait_deadline) {
    std::string msg = "lock " + quote_name(r.name);
    if (lock->holders.size() >= lock->capacity) {
      msg += " is held (" + std::to_string(lock->holders.size()) + " of " +
             std::to_string(lock->capacity) + ")";
    } else {
      msg += " has " + std::to_string(lock->queue.size()) +
             " waiters ahead of this request";
    }
    return Error(Errc::not_acquired, std::move(msg))
        .with_holders(holders_of(*lock, now));
  }
  if (*r.wait_deadline <= now) {
    return Error(Errc::timeout, "wait deadline for lock " + quote_name(r.name) +
                                    " passed before it was free");
  }
  if (lock->queue.size() >= limits.max_waiters_per_lock) {
    return invalid("lock " + quote_name(r.name) + " has " +
                   std::to_string(lock->queue.size()) +
                   " waiters; the limit is " +
                   std::to_string(limits.max_waiters_per_lock));
  }
  WaiterE w;
  w.token = r.token;
  w.ttl = r.ttl;
  w.label = std::string(r.label);
  w.reentrancy_key = std::string(r.reentrancy_key);
  w.session = r.session;
  w.ephemeral = r.ephemeral;
  w.arrival = now;
  w.deadline = *r.wait_deadline;
  add_waiter(*lock, std::move(w));
  out.position = lock->queue.size();
  return out;
}

Result<CoreGrant> LockTable::extend(std::string_view name,
                                    const OwnerToken& token, Nanos ttl) {
  Impl& m = *impl_;
  m.advance();
  const Instant now = m.clock.now();
  if (Status s = validate_name(name); !s.ok()) return std::move(s).error();
  if (Status s = validate_ttl(ttl); !s.ok()) return std::move(s).error();
  auto l = m.leases.find(Key{std::string(name), token});
  if (l == m.leases.end()) {
    return Error(Errc::lock_lost, "lock " + quote_name(name) +
                                      " is not held with this owner token "
                                      "(expired, released or never granted)");
  }
  auto [lock, lease] = l->second;
  lease->ttl = ttl;
  m.set_expiry(*lock, lease, now + ttl);
  m.sink_put(*lock, *lease);
  return m.make_grant(*lock, *lease, now);
}

Result<ReleaseOutcome> LockTable::release(std::string_view name,
                                          const OwnerToken& token) {
  Impl& m = *impl_;
  m.advance();
  const Instant now = m.clock.now();
  if (Status s = validate_name(name); !s.ok()) return std::move(s).error();
  ReleaseOutcome out;
  if (auto l = m.leases.find(Key{std::string(name), token});
      l != m.leases.end()) {
    auto [lock, lease] = l->second;
    out.was_held = true;
    lease->holds -= 1;
    out.holds_left = lease->holds;
    if (lease->holds == 0) {
      OwnerToken lease_token = lease->token;
      m.remove_lease(*lock, lease);
      if (m.sink != nullptr) m.sink->lease_removed(lock->name, lease_token);
    } else {
      m.sink_put(*lock, *lease);
    }
  } else if (auto w = m.waiters.find(Key{std::string(name), token});
             w != m.waiters.end()) {
    auto [lock, it] = w->second;
    out.withdrew_waiter = true;
    if (it->group != nullptr) {
      m.remove_group(*it->group, std::nullopt);
    } else {
      m.remove_waiter(*lock, it);
    }
  }
  m.settle(now);
  return out;
}

Result<MultiOutcome> LockTable::acquire_multi(const MultiRequest& request) {
  return impl_->acquire_multi(request);
}

namespace {
LockInfo describe_lock(const LockTable::Impl& m, const LockE& lock,
                       Instant now) {
  LockInfo info;
  info.name = lock.name;
  info.capacity = lock.capacity;
  info.holders = m.holders_of(lock, now);
  info.waiters.reserve(lock.queue.size());
  for (const WaiterE& w : lock.queue) {
    info.waiters.push_back(
        {w.label, floor_ms(now - w.arrival), w.group != nullptr});
  }
  info.last_fencing_token = lock.last_fencing;
  return info;
}
}  // namespace

Result<LockInfo> LockTable::describe(std::string_view name) {
  impl_->advance();
  if (Status s = validate_name(name); !s.ok()) return std::move(s).error();
  const LockE* lock = impl_->find_lock(name);
  if (lock == nullptr) {
    LockInfo info;
    info.name = std::string(name);
    return info;
  }
  return describe_lock(*impl_, *lock, impl_->clock.now());
}

std::vector<LockInfo> LockTable::list(std::string_view prefix,
                                      std::size_t limit) {
  impl_->advance();
  const Instant now = impl_->clock.now();
  std::vector<LockInfo> out;
  for (auto it = impl_->names.lower_bound(prefix);
       it != impl_->names.end() && out.size() < limit &&
       it->substr(0, prefix.size()) == prefix;
       ++it) {
    out.push_back(describe_lock(*impl_, *impl_->find_lock(*it), now));
  }
  return out;
}

// ----------------------------------------------------------------- timers

void LockTable::advance() { impl_->advance(); }

std::optional<Instant> LockTable::next_deadline() const {
  if (impl_->timers.empty()) return std::nullopt;
  return impl_->timers.begin()->first;
}

std::vector<Event> LockTable::take_events() {
  std::vector<Event> out;
  out.swap(impl_->events);
  return out;
}

TableStats LockTable::stats() const {
  TableStats s = impl_->totals;
  s.locks = impl_->locks.size();
  s.waiters = impl_->waiters.size();
  s.counters = impl_->counters.size();
  return s;
}

}  // namespace baton::core
