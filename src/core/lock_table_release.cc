// core/lock_table_release.cc — LockTable: extend, release and undo_grant.
// Semantics: see lock_table.h.
#include "core/lock_table.h"
#include "core/lock_table_impl.h"
#include "core/validate.h"

namespace baton::core {

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
  (void)remember;  // not used yet
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
