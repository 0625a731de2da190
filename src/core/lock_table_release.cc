// core/lock_table_release.cc — LockTable: extend, release and undo_grant,
// and the memory of ended leases that refuses their late duplicates
// (docs/design.md, "A late duplicate of an ended lease is refused").
// Semantics: see lock_table.h.
#include "core/lock_table.h"
#include "core/lock_table_impl.h"
#include "core/validate.h"

namespace baton::core {

void LockTable::Impl::remember_ended(const LockE& lock, const LeaseE& lease,
                                     Instant now) {
  ended.add(lock.name(), lease.token, now);
  if (lease.extra) {
    for (const OwnerToken& alias : lease.extra->aliases) {
      ended.add(lock.name(), alias, now);
    }
  }
}

Status LockTable::Impl::check_not_ended(std::string_view name,
                                        const OwnerToken& token, Instant now,
                                        std::string_view what) const {
  if (!ended.contains(name, token, now)) return {};
  return Error(Errc::lock_lost,
               "lock " + quote_name(name) + ": this " + std::string(what) +
                   "'s lease already ended (released or expired); a late "
                   "duplicate is not granted again, acquire with a new owner "
                   "token");
}

Result<CoreGrant> LockTable::extend(std::string_view name,
                                    const OwnerToken& token, Nanos ttl) {
  Impl& m = *impl_;
  m.advance();
  const Instant now = m.clock.now();
  if (Status s = validate_name(name); !s.ok()) return std::move(s).error();
  if (Status s = validate_ttl(ttl); !s.ok()) return std::move(s).error();
  LockE* lock = m.find_lock(name);
  LeaseE* lease = lock == nullptr ? nullptr : lock->find_lease(token);
  if (lease == nullptr) {
    return Error(Errc::lock_lost, "lock " + quote_name(name) +
                                      " is not held with this owner token "
                                      "(expired, released or never granted)");
  }
  lease->ttl = ttl;
  m.set_expiry(lease, now + ttl);
  m.sink_put(*lock, *lease);
  return m.make_grant(*lock, *lease, now);
}

Result<ReleaseOutcome> LockTable::release(std::string_view name,
                                          const OwnerToken& token) {
  return impl_->release(name, token, /*remember=*/true);
}

Result<ReleaseOutcome> LockTable::undo_grant(std::string_view name,
                                             const OwnerToken& token) {
  return impl_->release(name, token, /*remember=*/false);
}

Result<ReleaseOutcome> LockTable::Impl::release(std::string_view name,
                                                const OwnerToken& token,
                                                bool remember) {
  Impl& m = *this;
  m.advance();
  const Instant now = m.clock.now();
  if (Status s = validate_name(name); !s.ok()) return std::move(s).error();
  ReleaseOutcome out;
  LockE* lock = m.find_lock(name);
  LeaseE* lease = lock == nullptr ? nullptr : lock->find_lease(token);
  if (lease != nullptr) {
    out.was_held = true;
    lease->holds -= 1;
    out.holds_left = lease->holds;
    if (lease->holds == 0) {
      OwnerToken lease_token = lease->token;
      if (remember) m.remember_ended(*lock, *lease, now);
      m.remove_lease(*lock, lease);
      if (m.sink != nullptr) m.sink->lease_removed(lock->name(), lease_token);
    } else {
      m.sink_put(*lock, *lease);
    }
  } else if (auto w = lock == nullptr || lock->queue_empty()
                          ? m.waiters.end()
                          : m.waiters.find(Key{std::string(name), token});
             w != m.waiters.end()) {
    WaiterIt it = w->second.second;
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

}  // namespace baton::core
