// core/lock_table.cc — LockTable: helpers and acquire. Extend and release
// live in lock_table_release.cc, multi-lock requests in lock_table_multi.cc,
// sessions, counters, persistence and introspection in lock_table_state.cc.
// Semantics: see lock_table.h.
#include "core/lock_table.h"

#include <algorithm>
#include <limits>

#include "core/lock_table_impl.h"
#include "core/validate.h"

namespace baton::core {

namespace {

Status validate_acquire(const AcquireRequest& r) {
  if (Status s = validate_acquire_fields(r.name, r.ttl, r.capacity, r.label,
                                         r.reentrancy_key);
      !s.ok()) {
    return s;
  }
  if (Status s = validate_shared(r.shared, r.capacity, r.reentrancy_key);
      !s.ok()) {
    return s;
  }
  if (r.token.is_zero()) return invalid("owner token is zero");
  return {};
}

// The lease of `lock` that holds reentrancy key `key`, if any (nullptr for
// an empty key).
LeaseE* reentrant_lease(LockE& lock, std::string_view key) {
  if (key.empty() || !lock.ext) return nullptr;
  auto& keys = lock.ext->by_reentrancy_key;
  auto k = keys.find(std::string(key));
  return k == keys.end() ? nullptr : k->second;
}

// Why a request that may not wait is refused, checked in this order: shared
// holders against an exclusive request, an exclusive holder against a
// shared one (rule 18), no capacity left, else waiters ahead of it.
std::string busy_message(const LockE& lock, const AcquireRequest& r) {
  std::string msg = "lock " + quote_name(r.name);
  if (lock.shared_holders > 0 && !r.shared) {
    msg += " is held shared by " + std::to_string(lock.shared_holders) +
           (lock.shared_holders == 1 ? " holder" : " holders");
  } else if (lock.shared_holders < lock.holders && r.shared) {
    msg += " is held exclusively";
  } else if (lock.holders >= lock.capacity) {
    msg += " is held (" + std::to_string(lock.holders) + " of " +
           std::to_string(lock.capacity) + ")";
  } else {
    msg += " has " + std::to_string(lock.queue_size()) +
           " waiters ahead of this request";
  }
  return msg;
}

}  // namespace

// ---------------------------------------------------------------- helpers

LockTable::Impl::~Impl() {
  // Waiters and leases die with their locks; nothing else points at them.
  locks.clear();
}

LockE& LockTable::Impl::get_or_create_lock(std::string_view name,
                                           std::uint32_t capacity) {
  const std::uint32_t h = name_hash(name);
  if (LockE* l = locks.find(name, h)) return *l;
  LockE* l = LockE::create(name, h, capacity);
  locks.insert(l);
  return *l;
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
    if (lock->holders == 0 && lock->queue_empty()) {
      locks.erase(lock);
      LockE::destroy(lock);
    } else if (lock->ext && lock->ext->queue.empty() &&
               lock->ext->more.empty() && lock->ext->aliases.empty() &&
               lock->ext->by_reentrancy_key.empty()) {
      lock->ext.reset();  // back to the compact form
    }
  }
}

bool LockTable::Impl::group_ready(const GroupE& group) const {
  for (const auto& [lock, it] : group.members) {
    if (lock->ext->queue.begin() != it) return false;
    if (lock->holders >= lock->capacity) return false;
  }
  return true;
}

void LockTable::Impl::pump(LockE& lock, Instant now) {
  while (!lock.queue_empty()) {
    WaiterIt head = lock.ext->queue.begin();
    if (head->group != nullptr) {
      if (!group_ready(*head->group)) return;
      grant_group(*head->group, now);
      continue;
    }
    if (!head->reentrancy_key.empty()) {
      auto& keys = lock.ext->by_reentrancy_key;
      auto joined = keys.find(head->reentrancy_key);
      if (joined != keys.end() &&
          joined->second->holds < std::numeric_limits<std::uint32_t>::max()) {
        LeaseE* lease = joined->second;
        Instant arrival = head->arrival;
        OwnerToken token = head->token;
        join_lease(lock, lease, token, head->ttl, now);
        remove_waiter(lock, head);
        push_event(Event::Kind::granted, lock, token,
                   make_grant(lock, *lease, arrival));
        continue;
      }
    }
    if (!lock.fits(head->shared)) return;
    grant_waiter(lock, head, now);
  }
}

LeaseE* LockTable::Impl::add_lease(LockE& lock, const OwnerToken& token,
                                   Nanos ttl, Instant now,
                                   std::string_view label,
                                   std::string_view reentrancy_key,
                                   SessionId session, bool shared) {
  LeaseE* lease = &lock.first;
  if (lock.first.holds > 0) {
    lease = &lock.extra().more.try_emplace(token).first->second;
  }
  lease->lock = &lock;
  lease->is_lease = true;
  lease->token = token;
  lease->fencing = ++fencing;
  lease->ttl = ttl;
  lease->expiry = now + ttl;
  lease->holds = 1;
  lease->shared = shared;
  lease->label = labels.acquire(label);
  if (!reentrancy_key.empty() || session != 0) {
    lease->extra = std::make_unique<LeaseExtra>();
    lease->extra->reentrancy_key = std::string(reentrancy_key);
    lease->extra->session = session;
  }
  ++lock.holders;
  if (shared) ++lock.shared_holders;
  lock.last_fencing = std::max(lock.last_fencing, lease->fencing);
  timers.set(lease, lease->expiry);
  if (!reentrancy_key.empty()) {
    lock.extra().by_reentrancy_key.emplace(std::string(reentrancy_key), lease);
  }
  if (session != 0) session_leases[session].insert(lease);
  ++totals.grants;
  ++totals.leases;
  sink_put(lock, *lease);  // bumps changes
  return lease;
}

void LockTable::Impl::remove_lease(LockE& lock, LeaseE* lease) {
  timers.erase(lease);
  if (lease->extra) {
    LeaseExtra& x = *lease->extra;
    for (const OwnerToken& alias : x.aliases) lock.ext->aliases.erase(alias);
    if (!x.reentrancy_key.empty()) {
      auto& keys = lock.ext->by_reentrancy_key;
      auto k = keys.find(x.reentrancy_key);
      if (k != keys.end() && k->second == lease) keys.erase(k);
    }
    if (x.session != 0) {
      auto s = session_leases.find(x.session);
      s->second.erase(lease);
      if (s->second.empty()) session_leases.erase(s);
    }
  }
  labels.release(lease->label);
  ++changes;
  --totals.leases;
  --lock.holders;
  if (lease->shared) --lock.shared_holders;
  if (lease == &lock.first) {
    lease->holds = 0;
    lease->shared = false;
    lease->label = nullptr;
    lease->extra.reset();
  } else {
    lock.ext->more.erase(lease->token);
  }
  mark_dirty(lock);
}

void LockTable::Impl::set_expiry(LeaseE* lease, Instant expiry) {
  if (lease->expiry == expiry) return;
  lease->expiry = expiry;
  timers.set(lease, expiry);
}

void LockTable::Impl::add_alias(LockE& lock, LeaseE* lease,
                                const OwnerToken& alias) {
  if (!lease->extra) lease->extra = std::make_unique<LeaseExtra>();
  lease->extra->aliases.push_back(alias);
  lock.extra().aliases.emplace(alias, lease);
}

void LockTable::Impl::join_lease(LockE& lock, LeaseE* lease,
                                 const OwnerToken& alias, Nanos ttl,
                                 Instant now) {
  lease->holds += 1;
  if (now + ttl > lease->expiry) {
    lease->ttl = ttl;
    set_expiry(lease, now + ttl);
  }
  if (alias != lease->token) add_alias(lock, lease, alias);
  sink_put(lock, *lease);
}

WaiterIt LockTable::Impl::add_waiter(LockE& lock, WaiterE waiter) {
  auto& queue = lock.extra().queue;
  ++changes;
  queue.push_back(std::move(waiter));
  WaiterIt it = std::prev(queue.end());
  it->lock = &lock;
  it->is_lease = false;
  it->heap_pos = kNoTimer;
  timers.set(&*it, it->deadline);
  waiters.emplace(Key{std::string(lock.name()), it->token},
                  std::make_pair(&lock, it));
  if (it->session != 0) {
    WaiterLinks& links = session_waiters[it->session];
    it->session_link = links.insert(links.end(), {&lock, it});
  }
  return it;
}

void LockTable::Impl::set_deadline(WaiterIt it, Instant deadline) {
  it->deadline = deadline;
  timers.set(&*it, deadline);
}

void LockTable::Impl::remove_waiter(LockE& lock, WaiterIt it) {
  timers.erase(&*it);
  waiters.erase(Key{std::string(lock.name()), it->token});
  if (it->session != 0) {
    auto s = session_waiters.find(it->session);
    s->second.erase(it->session_link);
    if (s->second.empty()) session_waiters.erase(s);
  }
  ++changes;
  if (sink != nullptr) {
    sink->waiter_left(lock.name(), it->label, it->shared, it->arrival);
  }
  lock.ext->queue.erase(it);
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
  LeaseE* lease =
      add_lease(lock, it->token, it->ttl, now, it->label, it->reentrancy_key,
                it->ephemeral ? it->session : 0, it->shared);
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
    LeaseE* lease = add_lease(*lock, token, it->ttl, now, it->label, {}, 0);
    Instant arrival = it->arrival;
    remove_waiter(*lock, it);
    push_event(Event::Kind::granted, *lock, token,
               make_grant(*lock, *lease, arrival));
  }
}

CoreGrant LockTable::Impl::make_grant(const LockE& lock, const LeaseE& lease,
                                      Instant arrival) const {
  CoreGrant g;
  g.name = std::string(lock.name());
  g.token = lease.token;
  g.fencing_token = lease.fencing;
  g.ttl = lease.ttl;
  g.holds = lease.holds;
  g.capacity = lock.capacity;
  g.shared = lease.shared;
  g.expiry = lease.expiry;
  g.valid_for = lease.expiry - arrival;
  return g;
}

LeaseRecord LockTable::Impl::make_record(const LockE& lock,
                                         const LeaseE& lease) const {
  LeaseRecord r;
  r.name = std::string(lock.name());
  r.token = lease.token;
  r.fencing_token = lease.fencing;
  r.ttl = lease.ttl;
  r.expiry = lease.expiry;
  r.holds = lease.holds;
  r.capacity = lock.capacity;
  r.shared = lease.shared;
  r.label = std::string(lease.label_view());
  if (lease.extra) {
    r.reentrancy_key = lease.extra->reentrancy_key;
    r.aliases = lease.extra->aliases;
  }
  return r;
}

void LockTable::Impl::sink_put(const LockE& lock, const LeaseE& lease) {
  ++changes;  // every lease change a reader sees goes through here
  if (sink != nullptr) sink->lease_put(make_record(lock, lease));
}

void LockTable::Impl::push_event(Event::Kind kind, const LockE& lock,
                                 const OwnerToken& token, CoreGrant grant) {
  events.push_back(
      Event{kind, std::string(lock.name()), token, std::move(grant)});
}

std::size_t LockTable::Impl::position_of(const LockE& lock, WaiterIt it) const {
  std::size_t pos = 1;
  for (auto i = lock.ext->queue.begin(); i != lock.ext->queue.end() && i != it;
       ++i) {
    ++pos;
  }
  return pos;
}

std::optional<Error> LockTable::Impl::queue_full(std::string_view name,
                                                 const LockE* lock) const {
  if (lock == nullptr || lock->queue_size() < limits.max_waiters_per_lock) {
    return std::nullopt;
  }
  return Error(Errc::unavailable,
               "lock " + quote_name(name) + " has " +
                   std::to_string(lock->queue_size()) +
                   " waiters, the limit (max_waiters_per_lock " +
                   std::to_string(limits.max_waiters_per_lock) +
                   "); the queue is full, retry later");
}

Error LockTable::Impl::capacity_mismatch(std::string_view name,
                                         const LockE& lock,
                                         std::uint32_t asked) const {
  return invalid("lock " + quote_name(name) + " has capacity " +
                 std::to_string(lock.capacity) + "; request asked for " +
                 std::to_string(asked));
}

Error LockTable::Impl::table_full() const {
  return invalid("the table holds " + std::to_string(locks.size()) +
                 " locks; the limit is " + std::to_string(limits.max_locks));
}

std::optional<WaiterIt> LockTable::Impl::queued_waiter(
    const LockE& lock, const OwnerToken& token) const {
  if (lock.queue_empty()) return std::nullopt;
  auto w = waiters.find(Key{std::string(lock.name()), token});
  if (w == waiters.end()) return std::nullopt;
  return w->second.second;
}

void LockTable::Impl::advance() {
  const Instant now = clock.now();
  while (!timers.empty() && timers.top_when() <= now) {
    const Instant t = timers.top_when();
    // Everything due at instant t: wait deadlines first (a waiter whose
    // deadline is t is not granted by a lease that also dies at t), then
    // expiries (in grant order), then hand out the freed capacity.
    std::vector<Key> due_waiters;
    std::vector<LeaseE*> due_leases;
    while (!timers.empty() && timers.top_when() == t) {
      TimerNode* node = timers.top();
      timers.erase(node);
      if (node->is_lease) {
        due_leases.push_back(static_cast<LeaseE*>(node));
      } else {
        const auto* w = static_cast<WaiterE*>(node);
        due_waiters.push_back(Key{std::string(w->lock->name()), w->token});
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
    std::sort(due_leases.begin(), due_leases.end(),
              [](const LeaseE* a, const LeaseE* b) {
                return a->fencing < b->fencing;
              });
    for (LeaseE* lease : due_leases) {
      LockE& lock = *lease->lock;
      ++totals.expirations;
      CoreGrant dead = make_grant(lock, *lease, lease->expiry);
      OwnerToken token = lease->token;
      remember_ended(lock, *lease, now);
      remove_lease(lock, lease);
      if (sink != nullptr) sink->lease_removed(lock.name(), token);
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

// acquire is a sequence of decisions, each final: a refusal changes
// nothing (except a queued request whose wait ended, which leaves), and the
// first step that applies answers. Retries of a granted or queued request
// answer before the late-duplicate check: the table still knows them.
Result<AcquireOutcome> LockTable::Impl::acquire(const AcquireRequest& r) {
  advance();
  const Instant now = clock.now();
  if (Status s = validate_acquire(r); !s.ok()) return std::move(s).error();

  LockE* lock = find_lock(r.name);
  if (lock != nullptr) {
    // A lock's capacity is fixed while the lock exists.
    if (lock->capacity != r.capacity) {
      return capacity_mismatch(r.name, *lock, r.capacity);
    }
    // Idempotent retry of a granted request (or a reentrant alias).
    if (LeaseE* l = lock->find_lease(r.token)) {
      AcquireOutcome out;
      out.granted = true;
      out.grant = make_grant(*lock, *l, now);
      return out;
    }
    // Retry of a queued request: it keeps its place.
    if (std::optional<WaiterIt> it = queued_waiter(*lock, r.token)) {
      return retry_queued(*lock, *it, r, now);
    }
  }
  // A late duplicate of a request whose lease already ended.
  if (Status s = check_not_ended(r.name, r.token, now, "request"); !s.ok()) {
    return std::move(s).error();
  }
  // A reentrant request joins the lease of its key (it jumps the queue).
  if (lock != nullptr) {
    if (LeaseE* lease = reentrant_lease(*lock, r.reentrancy_key)) {
      return join_reentrant(*lock, *lease, r, now);
    }
  }
  if (lock == nullptr && locks.size() >= limits.max_locks) return table_full();
  // Free: no queue to jump, and the request fits beside the holders.
  if (lock == nullptr || (lock->queue_empty() && lock->fits(r.shared))) {
    return grant_request(r, now);
  }
  if (!r.wait_deadline) {
    return Error(Errc::not_acquired, busy_message(*lock, r))
        .with_holders(holders_of(*lock, now));
  }
  return queue_request(*lock, r, now);
}

// A retry of the queued request `it`: a deadline that has passed ends the
// wait (with every name of its acquire_all group); one still ahead
// replaces the old one. The request keeps its place either way.
Result<AcquireOutcome> LockTable::Impl::retry_queued(LockE& lock, WaiterIt it,
                                                     const AcquireRequest& r,
                                                     Instant now) {
  if (r.wait_deadline) {
    if (*r.wait_deadline <= now) {
      if (it->group != nullptr) {
        remove_group(*it->group, std::nullopt);
      } else {
        remove_waiter(lock, it);
      }
      settle(now);
      return Error(Errc::timeout,
                   "wait deadline for lock " + quote_name(r.name) + " passed");
    }
    set_deadline(it, *r.wait_deadline);
  }
  AcquireOutcome out;
  out.position = position_of(lock, it);
  return out;
}

// One more hold on `lease`, which holds the request's reentrancy key; the
// hold count never wraps.
Result<AcquireOutcome> LockTable::Impl::join_reentrant(LockE& lock,
                                                       LeaseE& lease,
                                                       const AcquireRequest& r,
                                                       Instant now) {
  if (lease.holds == std::numeric_limits<std::uint32_t>::max()) {
    return invalid("lock " + quote_name(r.name) +
                   " has reached the maximum hold count");
  }
  join_lease(lock, &lease, r.token, r.ttl, now);
  AcquireOutcome out;
  out.granted = true;
  out.grant = make_grant(lock, lease, now);
  return out;
}

// A new lease on a free lock (created if need be; the caller checked
// max_locks).
Result<AcquireOutcome> LockTable::Impl::grant_request(const AcquireRequest& r,
                                                      Instant now) {
  LockE& l = get_or_create_lock(r.name, r.capacity);
  LeaseE* lease = add_lease(l, r.token, r.ttl, now, r.label, r.reentrancy_key,
                            r.ephemeral ? r.session : 0, r.shared);
  AcquireOutcome out;
  out.granted = true;
  out.created = true;
  out.grant = make_grant(l, *lease, now);
  return out;
}

// Queues a request that may wait on `lock`, which is not free: refused
// when its deadline has passed or the queue is full.
Result<AcquireOutcome> LockTable::Impl::queue_request(LockE& lock,
                                                      const AcquireRequest& r,
                                                      Instant now) {
  if (*r.wait_deadline <= now) {
    return Error(Errc::timeout, "wait deadline for lock " + quote_name(r.name) +
                                    " passed before it was free");
  }
  if (std::optional<Error> e = queue_full(r.name, &lock)) return std::move(*e);
  WaiterE w;
  w.token = r.token;
  w.ttl = r.ttl;
  w.label = std::string(r.label);
  w.reentrancy_key = std::string(r.reentrancy_key);
  w.session = r.session;
  w.ephemeral = r.ephemeral;
  w.shared = r.shared;
  w.arrival = now;
  w.deadline = *r.wait_deadline;
  add_waiter(lock, std::move(w));
  AcquireOutcome out;
  out.position = lock.queue_size();
  return out;
}

Result<MultiOutcome> LockTable::acquire_multi(const MultiRequest& request) {
  return impl_->acquire_multi(request);
}

}  // namespace baton::core
