// core/lock_table_multi.cc — LockTable::acquire_multi (acquire_some and
// acquire_all, CONTRACT rule 11). Semantics: see lock_table.h.
#include <algorithm>

#include "core/lock_table.h"
#include "core/lock_table_impl.h"
#include "core/validate.h"

namespace baton::core {

namespace {

Error invalid(std::string message) {
  return Error(Errc::invalid_argument, std::move(message));
}

enum class Plan { held, queued, grant, enqueue, none };

}  // namespace

Result<MultiOutcome> LockTable::Impl::acquire_multi(const MultiRequest& r) {
  advance();
  const Instant now = clock.now();
  if (Status s = validate_names(r.names); !s.ok()) return std::move(s).error();
  if (Status s = validate_ttl(r.ttl); !s.ok()) return std::move(s).error();
  if (Status s = validate_capacity(r.capacity); !s.ok()) {
    return std::move(s).error();
  }
  if (Status s = validate_label(r.label); !s.ok()) return std::move(s).error();
  if (r.reservation.is_zero()) return invalid("reservation token is zero");

  // Look everything up and decide before changing anything.
  const std::size_t n = r.names.size();
  std::vector<LockE*> lock(n, nullptr);
  std::vector<Plan> plan(n, Plan::none);
  std::vector<LeaseE*> held(n, nullptr);
  std::vector<WaiterIt> queued(n);
  std::size_t new_locks = 0;
  for (std::size_t i = 0; i < n; ++i) {
    lock[i] = find_lock(r.names[i]);
    if (lock[i] == nullptr) {
      ++new_locks;
      continue;
    }
    if (lock[i]->capacity != r.capacity) {
      return invalid("lock " + quote_name(r.names[i]) + " has capacity " +
                     std::to_string(lock[i]->capacity) +
                     "; request asked for " + std::to_string(r.capacity));
    }
    if (LeaseE* l = lock[i]->find_lease(r.reservation)) {
      plan[i] = Plan::held;
      held[i] = l;
    } else if (auto w = lock[i]->queue_empty()
                            ? waiters.end()
                            : waiters.find(
                                  Key{std::string(r.names[i]), r.reservation});
               w != waiters.end()) {
      plan[i] = Plan::queued;
      queued[i] = w->second.second;
      if (r.all_or_nothing && queued[i]->group == nullptr) {
        return invalid("reservation is already queued on lock " +
                       quote_name(r.names[i]) + " by acquire_some");
      }
      if (!r.all_or_nothing && queued[i]->group != nullptr) {
        return invalid("reservation is already queued on lock " +
                       quote_name(r.names[i]) + " by acquire_all");
      }
    }
  }
  if (new_locks > 0 && locks.size() + new_locks > limits.max_locks) {
    return invalid("the table holds " + std::to_string(locks.size()) +
                   " locks; the limit is " + std::to_string(limits.max_locks));
  }
  // A late duplicate: the reservation's lease on one of the names ended.
  for (std::size_t i = 0; i < n; ++i) {
    if (plan[i] != Plan::none) continue;
    if (Status s =
            check_not_ended(r.names[i], r.reservation, now, "reservation");
        !s.ok()) {
      return std::move(s).error();
    }
  }
  const std::optional<Instant> deadline =
      r.queue_deadline && *r.queue_deadline > now ? r.queue_deadline
                                                  : std::nullopt;
  auto can_grant_now = [&](std::size_t i) {
    return lock[i] == nullptr ||
           (lock[i]->queue_empty() && lock[i]->holders < lock[i]->capacity);
  };
  auto refresh = [&](std::size_t i) { set_deadline(queued[i], *deadline); };
  auto waiter_for = [&]() {
    WaiterE w;
    w.token = r.reservation;
    w.ttl = r.ttl;
    w.label = std::string(r.label);
    w.session = r.session;
    w.arrival = now;
    w.deadline = *deadline;
    return w;
  };
  auto too_many_waiters = [&](std::size_t i) -> std::optional<Error> {
    if (lock[i] != nullptr &&
        lock[i]->queue_size() >= limits.max_waiters_per_lock) {
      return queue_full(r.names[i], lock[i]->queue_size());
    }
    return std::nullopt;
  };

  MultiOutcome out;
  if (r.all_or_nothing) {
    bool any_queued = false, all_free = true;
    std::size_t first_blocked = n;
    for (std::size_t i = 0; i < n; ++i) {
      if (plan[i] == Plan::queued) any_queued = true;
      if (plan[i] == Plan::none && !can_grant_now(i)) {
        all_free = false;
        if (first_blocked == n) first_blocked = i;
      }
    }
    if (any_queued) {
      // A retry of a queued reservation: refresh its deadline, keep places.
      GroupE* group = nullptr;
      for (std::size_t i = 0; i < n; ++i) {
        if (plan[i] == Plan::queued) group = queued[i]->group;
      }
      if (r.queue_deadline && !deadline) {
        remove_group(*group, std::nullopt);
        settle(now);
        return Error(Errc::timeout, "wait deadline of the reservation passed");
      }
      if (deadline) {
        for (auto& member : group->members) {
          set_deadline(member.second, *deadline);
        }
      }
      for (std::size_t i = 0; i < n; ++i) {
        if (plan[i] == Plan::held) {
          out.granted.push_back(make_grant(*lock[i], *held[i], now));
        }
      }
      out.pending = group->members.size();
      return out;
    }
    if (all_free) {
      for (std::size_t i = 0; i < n; ++i) {
        if (plan[i] == Plan::held) {
          out.granted.push_back(make_grant(*lock[i], *held[i], now));
          continue;
        }
        LockE& l = get_or_create_lock(r.names[i], r.capacity);
        LeaseE* lease = add_lease(l, r.reservation, r.ttl, now, r.label, {}, 0);
        out.granted.push_back(make_grant(l, *lease, now));
      }
      return out;
    }
    if (!r.queue_deadline) {
      LockE& l = *lock[first_blocked];
      return Error(Errc::not_acquired,
                   "lock " + quote_name(r.names[first_blocked]) +
                       " is not free (" + std::to_string(l.holders) + " of " +
                       std::to_string(l.capacity) + " held, " +
                       std::to_string(l.queue_size()) + " waiting)")
          .with_holders(holders_of(l, now));
    }
    if (!deadline) {
      return Error(Errc::timeout,
                   "wait deadline passed before the locks were free");
    }
    if (groups.count(r.reservation) != 0) {
      // Adding names later would break the one atomic arrival (deadlock).
      return invalid("reservation is already queued on other locks");
    }
    for (std::size_t i = 0; i < n; ++i) {
      if (plan[i] != Plan::none) continue;
      if (auto e = too_many_waiters(i)) return *e;
    }
    GroupE& group = groups[r.reservation];
    group.token = r.reservation;

    for (std::size_t i = 0; i < n; ++i) {
      if (plan[i] == Plan::held) {
        out.granted.push_back(make_grant(*lock[i], *held[i], now));
        continue;
      }
      LockE& l = get_or_create_lock(r.names[i], r.capacity);
      WaiterE w = waiter_for();
      w.group = &group;
      group.members.emplace_back(&l, add_waiter(l, std::move(w)));
    }
    out.pending = group.members.size();
    return out;
  }

  // acquire_some: every name on its own.
  for (std::size_t i = 0; i < n; ++i) {
    if (plan[i] != Plan::none) continue;
    if (can_grant_now(i)) {
      plan[i] = Plan::grant;
    } else if (deadline) {
      if (auto e = too_many_waiters(i)) return *e;
      plan[i] = Plan::enqueue;
    }
  }
  for (std::size_t i = 0; i < n; ++i) {
    switch (plan[i]) {
      case Plan::held:
        out.granted.push_back(make_grant(*lock[i], *held[i], now));
        break;
      case Plan::queued:
        if (deadline) refresh(i);
        ++out.pending;
        break;
      case Plan::grant: {
        LockE& l = get_or_create_lock(r.names[i], r.capacity);
        LeaseE* lease = add_lease(l, r.reservation, r.ttl, now, r.label, {}, 0);
        out.granted.push_back(make_grant(l, *lease, now));
        break;
      }
      case Plan::enqueue: {
        LockE& l = get_or_create_lock(r.names[i], r.capacity);
        add_waiter(l, waiter_for());
        ++out.pending;
        break;
      }
      case Plan::none:
        break;
    }
  }
  return out;
}

}  // namespace baton::core
