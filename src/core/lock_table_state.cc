// core/lock_table_state.cc — LockTable counters, sessions, persistence
// (restore_*, snapshot_*, fencing floor) and introspection (describe, list,
// timers, stats). Semantics: see lock_table.h.
#include <algorithm>
#include <limits>

#include "core/lock_table.h"
#include "core/lock_table_impl.h"
#include "core/validate.h"

namespace baton::core {

// ------------------------------------------------------------- counters

Result<std::int64_t> LockTable::counter_get(std::string_view name) {
  impl_->advance();
  if (Status s = validate_name(name, "counter name"); !s.ok()) {
    return std::move(s).error();
  }
  auto it = impl_->counters.find(std::string(name));
  return it == impl_->counters.end() ? std::int64_t{0} : it->second;
}

Result<std::int64_t> LockTable::counter_add(std::string_view name,
                                            std::int64_t delta) {
  impl_->advance();
  if (Status s = validate_name(name, "counter name"); !s.ok()) {
    return std::move(s).error();
  }
  auto it = impl_->counters.find(std::string(name));
  std::int64_t current = it == impl_->counters.end() ? 0 : it->second;
  std::int64_t next = 0;
  if (__builtin_add_overflow(current, delta, &next)) {
    return invalid("counter " + quote_name(name) + " is " +
                   std::to_string(current) + "; adding " +
                   std::to_string(delta) + " would overflow");
  }
  impl_->counters[std::string(name)] = next;
  ++impl_->changes;
  if (impl_->sink != nullptr) impl_->sink->counter_put(name, next);
  return next;
}

Result<std::int64_t> LockTable::counter_take(std::string_view name,
                                             std::int64_t n) {
  impl_->advance();
  if (Status s = validate_name(name, "counter name"); !s.ok()) {
    return std::move(s).error();
  }
  if (n < 1) {
    return invalid("counter take of " + std::to_string(n) +
                   " is invalid; it must be at least 1");
  }
  auto it = impl_->counters.find(std::string(name));
  std::int64_t current = it == impl_->counters.end() ? 0 : it->second;
  if (current < n) {
    return Error(Errc::not_acquired, "counter " + quote_name(name) + " is " +
                                         std::to_string(current) +
                                         "; cannot take " + std::to_string(n));
  }
  std::int64_t next = current - n;
  impl_->counters[std::string(name)] = next;
  ++impl_->changes;
  if (impl_->sink != nullptr) impl_->sink->counter_put(name, next);
  return next;
}

// ------------------------------------------------------------- sessions

void LockTable::end_session(SessionId session) {
  Impl& m = *impl_;
  m.advance();
  if (session == 0) return;
  while (true) {
    auto s = m.session_waiters.find(session);
    if (s == m.session_waiters.end()) break;
    auto [lock, it] = s->second.front();
    if (it->group != nullptr) {
      m.remove_group(*it->group, Event::Kind::session_ended);
    } else {
      OwnerToken token = it->token;
      m.remove_waiter(*lock, it);
      m.push_event(Event::Kind::session_ended, *lock, token);
    }
  }
  m.settle(m.clock.now());
}

std::size_t LockTable::release_session_leases(SessionId session) {
  Impl& m = *impl_;
  m.advance();
  if (session == 0) return 0;
  std::size_t count = 0;
  while (true) {
    auto s = m.session_leases.find(session);
    if (s == m.session_leases.end()) break;
    LeaseE* lease = *s->second.begin();
    LockE* lock = lease->lock;
    OwnerToken token = lease->token;
    m.remember_ended(*lock, *lease, m.clock.now());
    m.remove_lease(*lock, lease);
    if (m.sink != nullptr) m.sink->lease_removed(lock->name(), token);
    ++count;
  }
  m.settle(m.clock.now());
  return count;
}

// ------------------------------------------------------------ persistence

std::uint64_t LockTable::fencing_high_water() const { return impl_->fencing; }

void LockTable::raise_fencing_floor(std::uint64_t floor) {
  impl_->fencing = std::max(impl_->fencing, floor);
}

Status LockTable::restore_lease(const LeaseRecord& record) {
  Impl& m = *impl_;
  m.advance();
  const Instant now = m.clock.now();
  if (Status s = validate_name(record.name); !s.ok()) return s;
  if (Status s = validate_ttl(record.ttl); !s.ok()) return s;
  if (Status s = validate_capacity(record.capacity); !s.ok()) return s;
  if (Status s = validate_label(record.label); !s.ok()) return s;
  if (Status s = validate_reentrancy_key(record.reentrancy_key); !s.ok()) {
    return s;
  }
  if (record.token.is_zero()) return invalid("owner token is zero");
  if (record.holds == 0) return invalid("lease record has 0 holds");
  if (Status s = validate_shared(record.shared, record.capacity,
                                 record.reentrancy_key);
      !s.ok()) {
    return s;
  }
  // Keep the fencing floor even for records that already expired.
  m.fencing = std::max(m.fencing, record.fencing_token);
  if (record.expiry <= now) return {};
  LockE* lock = m.find_lock(record.name);
  LeaseE* existing = nullptr;
  bool replace = false;
  if (lock != nullptr) {
    if (lock->capacity != record.capacity) {
      return invalid("lock " + quote_name(record.name) + " has capacity " +
                     std::to_string(lock->capacity) + "; record has " +
                     std::to_string(record.capacity));
    }
    if (LeaseE* l = lock->find_lease(record.token)) {
      if (l->token != record.token) {
        return invalid("lease record token is an alias of another lease");
      }
      existing = l;
      replace = true;
    }
    std::size_t held = lock->holders - (replace ? 1 : 0);
    std::size_t held_shared =
        lock->shared_holders - (replace && existing->shared ? 1 : 0);
    const bool fits = record.shared ? held_shared == held
                                    : held < lock->capacity && held_shared == 0;
    if (!fits) {
      return Error(Errc::internal, "restoring a lease of lock " +
                                       quote_name(record.name) +
                                       " would exceed its capacity " +
                                       std::to_string(lock->capacity));
    }
  }
  for (const OwnerToken& alias : record.aliases) {
    LeaseE* l = lock == nullptr ? nullptr : lock->find_lease(alias);
    if (l != nullptr && !(replace && l == existing)) {
      return invalid("lease record alias is already in use");
    }
  }
  if (m.locks.size() >= m.limits.max_locks && lock == nullptr) {
    return invalid("the table holds too many locks");
  }
  if (replace) m.remove_lease(*lock, existing);
  ChangeSink* sink = m.sink;
  m.sink = nullptr;
  const std::uint64_t saved = m.fencing;
  LockE& l = m.get_or_create_lock(record.name, record.capacity);
  const std::uint64_t saved_last = l.last_fencing;
  LeaseE* lease = m.add_lease(l, record.token, record.ttl, now, record.label,
                              record.reentrancy_key, 0, record.shared);
  m.sink = sink;
  m.fencing = saved;
  --m.totals.grants;
  lease->fencing = record.fencing_token;
  // A semaphore's holders that ended before the snapshot may have had
  // larger tokens than the ones restored: report at least the floor then
  // (`saved`, >= the restore floor when raise_fencing_floor came first).
  l.last_fencing = std::max(
      saved_last, record.capacity > 1 ? std::max(saved, record.fencing_token)
                                      : record.fencing_token);
  lease->holds = record.holds;
  m.set_expiry(lease, record.expiry);
  for (const OwnerToken& alias : record.aliases) {
    if (alias == record.token) continue;
    m.add_alias(l, lease, alias);
  }
  m.settle(now);
  return {};
}

void LockTable::restore_counter(std::string_view name, std::int64_t value) {
  if (!validate_name(name, "counter name").ok()) return;
  impl_->counters[std::string(name)] = value;
}

std::vector<LeaseRecord> LockTable::snapshot_leases() const {
  std::vector<LeaseRecord> out;
  for_each_lease([&](const LeaseRecord& r) { out.push_back(r); });
  return out;
}

void LockTable::for_each_lease(
    const std::function<void(const LeaseRecord&)>& fn) const {
  const Instant now = impl_->clock.now();
  std::vector<const LeaseE*> held;
  impl_->locks.for_each([&](const LockE& lock) {
    // Per lock in grant (fencing) order.
    held.clear();
    lock.for_each_holder([&](const LeaseE& lease) {
      if (lease.expiry > now) held.push_back(&lease);
    });
    std::sort(held.begin(), held.end(), [](const LeaseE* a, const LeaseE* b) {
      return a->fencing < b->fencing;
    });
    for (const LeaseE* lease : held) fn(impl_->make_record(lock, *lease));
  });
}

std::vector<std::pair<std::string, std::int64_t>> LockTable::snapshot_counters()
    const {
  std::vector<std::pair<std::string, std::int64_t>> out(impl_->counters.begin(),
                                                        impl_->counters.end());
  std::sort(out.begin(), out.end());
  return out;
}

// ---------------------------------------------------------- introspection

namespace {

std::chrono::milliseconds floor_ms(Nanos d) {
  if (d <= Nanos::zero()) return std::chrono::milliseconds{0};
  return std::chrono::duration_cast<std::chrono::milliseconds>(d);
}

LockInfo describe_lock(const LockTable::Impl& m, const LockE& lock,
                       Instant now) {
  LockInfo info;
  info.name = std::string(lock.name());
  info.capacity = lock.capacity;
  info.holders = m.holders_of(lock, now);
  info.waiters.reserve(lock.queue_size());
  if (lock.ext) {
    for (const WaiterE& w : lock.ext->queue) {
      info.waiters.push_back(
          {w.label, floor_ms(now - w.arrival), w.group != nullptr, w.shared});
    }
  }
  // >= every token ever granted on the name: what this lock granted since
  // it was last free, else (waiters only) the table's high water.
  info.last_fencing_token =
      lock.last_fencing != 0 ? lock.last_fencing : m.fencing;
  return info;
}
}  // namespace

std::vector<HolderInfo> LockTable::Impl::holders_of(const LockE& lock,
                                                    Instant now) const {
  std::vector<const LeaseE*> held;
  held.reserve(lock.holders);
  lock.for_each_holder([&](const LeaseE& l) { held.push_back(&l); });
  // Grant order (fencing tokens are handed out in grant order).
  std::sort(held.begin(), held.end(), [](const LeaseE* a, const LeaseE* b) {
    return a->fencing < b->fencing;
  });
  std::vector<HolderInfo> out;
  out.reserve(held.size());
  for (const LeaseE* l : held) {
    out.push_back({std::string(l->label_view()), l->fencing,
                   floor_ms(l->expiry - now), l->holds, l->shared});
  }
  return out;
}

Result<LockInfo> LockTable::describe(std::string_view name) {
  impl_->advance();
  if (Status s = validate_name(name); !s.ok()) return std::move(s).error();
  const LockE* lock = impl_->find_lock(name);
  if (lock == nullptr) {
    // Free: its past grants are not kept, but none was above the table's
    // high water (one counter for all names).
    LockInfo info;
    info.name = std::string(name);
    info.last_fencing_token = impl_->fencing;
    return info;
  }
  return describe_lock(*impl_, *lock, impl_->clock.now());
}

std::vector<LockInfo> LockTable::list(std::string_view prefix,
                                      std::size_t limit) {
  impl_->advance();
  const Instant now = impl_->clock.now();
  // No sorted name index is kept (it would cost ~50 bytes per lock): list
  // scans the locks, an administrative call, O(locks + k log k).
  std::vector<const LockE*> match;
  impl_->locks.for_each([&](const LockE& l) {
    if (l.name().substr(0, prefix.size()) == prefix) match.push_back(&l);
  });
  auto by_name = [](const LockE* a, const LockE* b) {
    return a->name() < b->name();
  };
  if (match.size() > limit) {
    std::partial_sort(match.begin(),
                      match.begin() + static_cast<std::ptrdiff_t>(limit),
                      match.end(), by_name);
    match.resize(limit);
  } else {
    std::sort(match.begin(), match.end(), by_name);
  }
  std::vector<LockInfo> out;
  out.reserve(match.size());
  for (const LockE* l : match) out.push_back(describe_lock(*impl_, *l, now));
  return out;
}

// ----------------------------------------------------------------- timers

void LockTable::advance() { impl_->advance(); }

std::optional<Instant> LockTable::next_deadline() const {
  if (impl_->timers.empty()) return std::nullopt;
  return impl_->timers.top_when();
}

std::vector<Event> LockTable::take_events() {
  std::vector<Event> out;
  out.swap(impl_->events);
  return out;
}

std::uint64_t LockTable::change_count() const { return impl_->changes; }

void LockTable::prefetch_slot(std::string_view name) const {
  impl_->locks.prefetch_slot(name_hash(name));
}

void LockTable::prefetch_lock(std::string_view name) const {
  impl_->locks.prefetch_lock(name_hash(name));
}

TableStats LockTable::stats() const {
  TableStats s = impl_->totals;
  s.locks = impl_->locks.size();
  s.waiters = impl_->waiters.size();
  s.counters = impl_->counters.size();
  return s;
}

}  // namespace baton::core
