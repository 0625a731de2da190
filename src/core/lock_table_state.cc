// core/lock_table_state.cc — LockTable counters, sessions and persistence
// (restore_*, snapshot_*, fencing floor). Semantics: see lock_table.h.
#include <algorithm>
#include <limits>

#include "core/lock_table.h"
#include "core/lock_table_impl.h"
#include "core/validate.h"

namespace baton::core {

namespace {
Error invalid(std::string message) {
  return Error(Errc::invalid_argument, std::move(message));
}
}  // namespace

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
    auto [lock, lease] = s->second.front();
    OwnerToken token = lease->token;
    m.remove_lease(*lock, lease);
    if (m.sink != nullptr) m.sink->lease_removed(lock->name, token);
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
  // Keep the fencing floor even for records that already expired.
  m.fencing = std::max(m.fencing, record.fencing_token);
  if (record.expiry <= now) return {};
  LockE* lock = m.find_lock(record.name);
  LeaseIt existing{};
  bool replace = false;
  if (lock != nullptr) {
    if (lock->capacity != record.capacity) {
      return invalid("lock " + quote_name(record.name) + " has capacity " +
                     std::to_string(lock->capacity) + "; record has " +
                     std::to_string(record.capacity));
    }
    if (auto l = m.leases.find(Key{record.name, record.token});
        l != m.leases.end()) {
      if (l->second.second->token != record.token) {
        return invalid("lease record token is an alias of another lease");
      }
      existing = l->second.second;
      replace = true;
    }
    std::size_t held = lock->holders.size() - (replace ? 1 : 0);
    if (held >= lock->capacity) {
      return Error(Errc::internal, "restoring a lease of lock " +
                                       quote_name(record.name) +
                                       " would exceed its capacity " +
                                       std::to_string(lock->capacity));
    }
  }
  for (const OwnerToken& alias : record.aliases) {
    auto l = m.leases.find(Key{record.name, alias});
    if (l != m.leases.end() && !(replace && l->second.second == existing)) {
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
  LeaseIt lease = m.add_lease(l, record.token, record.ttl, now, record.label,
                              record.reentrancy_key, 0);
  m.sink = sink;
  m.fencing = saved;
  --m.totals.grants;
  lease->fencing = record.fencing_token;
  l.last_fencing = std::max(saved_last, record.fencing_token);
  lease->holds = record.holds;
  m.set_expiry(l, lease, record.expiry);
  for (const OwnerToken& alias : record.aliases) {
    if (alias == record.token) continue;
    lease->aliases.push_back(alias);
    m.leases.emplace(Key{record.name, alias}, std::make_pair(&l, lease));
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
  const Instant now = impl_->clock.now();
  for (const auto& [name, lock] : impl_->locks) {
    for (const LeaseE& lease : lock.holders) {
      if (lease.expiry <= now) continue;
      out.push_back(impl_->make_record(lock, lease));
    }
  }
  return out;
}

std::vector<std::pair<std::string, std::int64_t>> LockTable::snapshot_counters()
    const {
  std::vector<std::pair<std::string, std::int64_t>> out(impl_->counters.begin(),
                                                        impl_->counters.end());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace baton::core
