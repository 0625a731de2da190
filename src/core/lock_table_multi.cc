// core/lock_table_multi.cc — LockTable::acquire_multi (acquire_some and
// acquire_all, CONTRACT rule 11). Semantics: see lock_table.h.
#include <algorithm>

#include "core/lock_table.h"
#include "core/lock_table_impl.h"
#include "core/validate.h"

namespace baton::core {

// What acquire_multi found for each name of the request (same indexes as
// MultiRequest::names), looked up before anything changes.
struct MultiLookup {
  // held / queued: the reservation is on the lock already; grant / enqueue:
  // acquire_some's decision for a name it is not on; none: not decided.
  enum class Plan { held, queued, grant, enqueue, none };

  explicit MultiLookup(std::size_t n)
      : lock(n, nullptr), plan(n, Plan::none), held(n, nullptr), queued(n) {}

  // Granting name i now jumps no queue and leaves no holder over capacity
  // (a name without a lock is free).
  bool free(std::size_t i) const {
    return lock[i] == nullptr ||
           (lock[i]->queue_empty() && lock[i]->holders < lock[i]->capacity);
  }

  std::vector<LockE*> lock;      // nullptr: no lock of that name yet
  std::vector<Plan> plan;        // see Plan
  std::vector<LeaseE*> held;     // plan held: the reservation's lease
  std::vector<WaiterIt> queued;  // plan queued: the reservation's waiter
  std::size_t new_locks = 0;     // names without a lock
  // The request's queue deadline while it is ahead; nullopt when there is
  // none (a try) or it has passed.
  std::optional<Instant> deadline;
};

namespace {

using Plan = MultiLookup::Plan;

Status validate_multi(const MultiRequest& r) {
  if (Status s = validate_names(r.names); !s.ok()) return s;
  if (Status s = validate_ttl(r.ttl); !s.ok()) return s;
  if (Status s = validate_capacity(r.capacity); !s.ok()) return s;
  if (Status s = validate_label(r.label); !s.ok()) return s;
  if (r.reservation.is_zero()) return invalid("reservation token is zero");
  return {};
}

// The queued request of `r` on one name, waiting until `deadline`.
WaiterE multi_waiter(const MultiRequest& r, Instant deadline, Instant now) {
  WaiterE w;
  w.token = r.reservation;
  w.ttl = r.ttl;
  w.label = std::string(r.label);
  w.session = r.session;
  w.arrival = now;
  w.deadline = deadline;
  return w;
}

}  // namespace

// Validate, look every name up, then decide: every refusal leaves the
// table as it was, except a retry of a queued acquire_all whose deadline
// has passed, which ends that wait.
Result<MultiOutcome> LockTable::Impl::acquire_multi(const MultiRequest& r) {
  advance();
  const Instant now = clock.now();
  if (Status s = validate_multi(r); !s.ok()) return std::move(s).error();
  MultiLookup m(r.names.size());
  if (Status s = look_up_multi(r, now, m); !s.ok()) {
    return std::move(s).error();
  }
  if (r.all_or_nothing) return acquire_all(r, m, now);
  return acquire_some(r, m, now);
}

// Fills `m` (changing nothing) and refuses: a capacity other than the
// lock's, a reservation queued on a name by the other kind of request, more
// locks than max_locks, or a late duplicate (the reservation's lease on a
// name it is not on ended recently).
Status LockTable::Impl::look_up_multi(const MultiRequest& r, Instant now,
                                      MultiLookup& m) {
  const std::size_t n = r.names.size();
  for (std::size_t i = 0; i < n; ++i) {
    LockE* lock = m.lock[i] = find_lock(r.names[i]);
    if (lock == nullptr) {
      ++m.new_locks;
      continue;
    }
    if (lock->capacity != r.capacity) {
      return capacity_mismatch(r.names[i], *lock, r.capacity);
    }
    if (LeaseE* l = lock->find_lease(r.reservation)) {
      m.plan[i] = Plan::held;
      m.held[i] = l;
    } else if (std::optional<WaiterIt> w =
                   queued_waiter(*lock, r.reservation)) {
      m.plan[i] = Plan::queued;
      m.queued[i] = *w;
      // acquire_all's waiters belong to a group, acquire_some's do not.
      if (r.all_or_nothing != ((*w)->group != nullptr)) {
        return invalid("reservation is already queued on lock " +
                       quote_name(r.names[i]) + " by " +
                       (r.all_or_nothing ? "acquire_some" : "acquire_all"));
      }
    }
  }
  if (m.new_locks > 0 && locks.size() + m.new_locks > limits.max_locks) {
    return table_full();
  }
  for (std::size_t i = 0; i < n; ++i) {
    if (m.plan[i] != Plan::none) continue;
    if (Status s =
            check_not_ended(r.names[i], r.reservation, now, "reservation");
        !s.ok()) {
      return s;
    }
  }
  if (r.queue_deadline && *r.queue_deadline > now)
    m.deadline = r.queue_deadline;
  return {};
}

// acquire_all: every name at once or none. A reservation that waits is
// queued on every name it does not hold in one atomic arrival (one group),
// which is granted only when it heads every one of those queues with room.
Result<MultiOutcome> LockTable::Impl::acquire_all(const MultiRequest& r,
                                                  const MultiLookup& m,
                                                  Instant now) {
  const std::size_t n = r.names.size();
  bool any_queued = false;
  std::size_t first_blocked = n;
  for (std::size_t i = 0; i < n; ++i) {
    if (m.plan[i] == Plan::queued) any_queued = true;
    if (m.plan[i] == Plan::none && !m.free(i) && first_blocked == n) {
      first_blocked = i;
    }
  }
  if (any_queued) return retry_group(r, m, now);
  if (first_blocked == n) return grant_all(r, m, now);
  return queue_all(r, m, first_blocked, now);
}

// A retry of a queued acquire_all: it keeps its places. A deadline still
// ahead replaces the old one on every name; one that has passed ends the
// wait on every name.
Result<MultiOutcome> LockTable::Impl::retry_group(const MultiRequest& r,
                                                  const MultiLookup& m,
                                                  Instant now) {
  // A reservation has at most one group (groups is keyed by its token), so
  // every queued name points at the same one.
  GroupE* group = nullptr;
  for (std::size_t i = 0; i < r.names.size(); ++i) {
    if (m.plan[i] == Plan::queued) group = m.queued[i]->group;
  }
  if (r.queue_deadline && !m.deadline) {
    remove_group(*group, std::nullopt);
    settle(now);
    return Error(Errc::timeout, "wait deadline of the reservation passed");
  }
  if (m.deadline) {
    for (auto& member : group->members) {
      set_deadline(member.second, *m.deadline);
    }
  }
  MultiOutcome out;
  for (std::size_t i = 0; i < r.names.size(); ++i) {
    if (m.plan[i] == Plan::held) {
      out.granted.push_back(make_grant(*m.lock[i], *m.held[i], now));
    }
  }
  out.pending = group->members.size();
  return out;
}

// Every name is held by the reservation or free: take the free ones.
Result<MultiOutcome> LockTable::Impl::grant_all(const MultiRequest& r,
                                                const MultiLookup& m,
                                                Instant now) {
  MultiOutcome out;
  for (std::size_t i = 0; i < r.names.size(); ++i) {
    if (m.plan[i] == Plan::held) {
      out.granted.push_back(make_grant(*m.lock[i], *m.held[i], now));
    } else {
      out.granted.push_back(grant_new(r, i, now));
    }
  }
  return out;
}

// Name `first_blocked` (an existing lock) is not free: a try is refused
// with its holders, a deadline that has passed times out, else the
// reservation is queued as one group on every name it does not hold.
Result<MultiOutcome> LockTable::Impl::queue_all(const MultiRequest& r,
                                                const MultiLookup& m,
                                                std::size_t first_blocked,
                                                Instant now) {
  if (!r.queue_deadline) {
    const LockE& l = *m.lock[first_blocked];
    return Error(Errc::not_acquired,
                 "lock " + quote_name(r.names[first_blocked]) +
                     " is not free (" + std::to_string(l.holders) + " of " +
                     std::to_string(l.capacity) + " held, " +
                     std::to_string(l.queue_size()) + " waiting)")
        .with_holders(holders_of(l, now));
  }
  if (!m.deadline) {
    return Error(Errc::timeout,
                 "wait deadline passed before the locks were free");
  }
  if (groups.count(r.reservation) != 0) {
    // Adding names later would break the one atomic arrival (deadlock).
    return invalid("reservation is already queued on other locks");
  }
  for (std::size_t i = 0; i < r.names.size(); ++i) {
    if (m.plan[i] != Plan::none) continue;
    if (std::optional<Error> e = queue_full(r.names[i], m.lock[i])) {
      return std::move(*e);
    }
  }
  GroupE& group = groups[r.reservation];
  group.token = r.reservation;
  MultiOutcome out;
  for (std::size_t i = 0; i < r.names.size(); ++i) {
    if (m.plan[i] == Plan::held) {
      out.granted.push_back(make_grant(*m.lock[i], *m.held[i], now));
      continue;
    }
    LockE& l = get_or_create_lock(r.names[i], r.capacity);
    WaiterE w = multi_waiter(r, *m.deadline, now);
    w.group = &group;
    group.members.emplace_back(&l, add_waiter(l, std::move(w)));
  }
  out.pending = group.members.size();
  return out;
}

// acquire_some: every name on its own. A name the reservation is not on is
// granted when free, else queued when the deadline is ahead, else left
// out; all of that is decided first, so a full queue refuses the request
// before anything changes. A queued name's deadline is refreshed.
Result<MultiOutcome> LockTable::Impl::acquire_some(const MultiRequest& r,
                                                   MultiLookup& m,
                                                   Instant now) {
  const std::size_t n = r.names.size();
  for (std::size_t i = 0; i < n; ++i) {
    if (m.plan[i] != Plan::none) continue;
    if (m.free(i)) {
      m.plan[i] = Plan::grant;
    } else if (m.deadline) {
      if (std::optional<Error> e = queue_full(r.names[i], m.lock[i])) {
        return std::move(*e);
      }
      m.plan[i] = Plan::enqueue;
    }
  }
  MultiOutcome out;
  for (std::size_t i = 0; i < n; ++i) {
    switch (m.plan[i]) {
      case Plan::held:
        out.granted.push_back(make_grant(*m.lock[i], *m.held[i], now));
        break;
      case Plan::queued:
        if (m.deadline) set_deadline(m.queued[i], *m.deadline);
        ++out.pending;
        break;
      case Plan::grant:
        out.granted.push_back(grant_new(r, i, now));
        break;
      case Plan::enqueue: {
        LockE& l = get_or_create_lock(r.names[i], r.capacity);
        add_waiter(l, multi_waiter(r, *m.deadline, now));
        ++out.pending;
        break;
      }
      case Plan::none:
        break;
    }
  }
  return out;
}

CoreGrant LockTable::Impl::grant_new(const MultiRequest& r, std::size_t i,
                                     Instant now) {
  LockE& l = get_or_create_lock(r.names[i], r.capacity);
  LeaseE* lease = add_lease(l, r.reservation, r.ttl, now, r.label, {}, 0);
  return make_grant(l, *lease, now);
}

}  // namespace baton::core
