// core/lock_table_impl.h — private data structures of LockTable (see
// lock_table.h for the semantics). Only lock_table*.cc include this.
#ifndef BATON_CORE_LOCK_TABLE_IMPL_H_
#define BATON_CORE_LOCK_TABLE_IMPL_H_

#include <list>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/lock_table.h"

namespace baton::core {

struct LockE;
struct LeaseE;
struct WaiterE;
struct GroupE;

using LeaseIt = std::list<LeaseE>::iterator;
using WaiterIt = std::list<WaiterE>::iterator;

// One entry of the ordered timer index: a lease expiry or a wait deadline.
struct TimerRef {
  LockE* lock = nullptr;
  bool is_lease = false;
  LeaseIt lease{};
  WaiterIt waiter{};
};
using Timers = std::multimap<Instant, TimerRef>;
using TimerIt = Timers::iterator;

using LeaseLinks = std::list<std::pair<LockE*, LeaseIt>>;
using WaiterLinks = std::list<std::pair<LockE*, WaiterIt>>;

struct LeaseE {
  OwnerToken token;
  std::uint64_t fencing = 0;
  Nanos ttl{0};
  Instant expiry{0};
  std::uint32_t holds = 1;
  std::string label;
  std::string reentrancy_key;
  std::vector<OwnerToken> aliases;
  SessionId session = 0;  // non-zero: ephemeral, bound to this session
  TimerIt timer;
  LeaseLinks::iterator session_link;
};

struct WaiterE {
  OwnerToken token;
  Nanos ttl{0};
  std::string label;
  std::string reentrancy_key;
  SessionId session = 0;
  bool ephemeral = false;
  Instant arrival{0};
  Instant deadline{0};
  GroupE* group = nullptr;  // all-or-nothing reservation, if any
  TimerIt timer;
  WaiterLinks::iterator session_link;
};

struct LockE {
  std::string name;
  std::uint32_t capacity = 1;
  std::list<LeaseE> holders;  // grant order
  std::list<WaiterE> queue;   // arrival order
  std::uint64_t last_fencing = 0;
  std::unordered_map<std::string, LeaseIt> by_reentrancy_key;
  bool dirty = false;
};

// An all-or-nothing reservation queued on several locks at once.
struct GroupE {
  OwnerToken token;
  std::vector<std::pair<LockE*, WaiterIt>> members;
};

struct Key {
  std::string name;
  OwnerToken token;
  bool operator==(const Key&) const = default;
};
struct KeyHash {
  std::size_t operator()(const Key& k) const noexcept {
    return std::hash<std::string>{}(k.name) * 31 ^ OwnerTokenHash {}(k.token);
  }
};

struct LockTable::Impl {
  Impl(const Clock& c, Limits l) : clock(c), limits(l) {}

  const Clock& clock;
  Limits limits;
  ChangeSink* sink = nullptr;

  std::unordered_map<std::string, LockE> locks;
  std::set<std::string_view> names;  // sorted view of locks' keys, for list()
  std::unordered_map<Key, std::pair<LockE*, LeaseIt>, KeyHash> leases;
  std::unordered_map<Key, std::pair<LockE*, WaiterIt>, KeyHash> waiters;
  std::unordered_map<OwnerToken, GroupE, OwnerTokenHash> groups;
  std::unordered_map<SessionId, LeaseLinks> session_leases;
  std::unordered_map<SessionId, WaiterLinks> session_waiters;
  std::unordered_map<std::string, std::int64_t> counters;
  Timers timers;
  std::vector<LockE*> dirty;
  std::vector<Event> events;
  std::uint64_t fencing = 0;
  TableStats totals;  // grants, expirations, wait_timeouts

  // --- helpers (lock_table.cc) ---
  LockE* find_lock(std::string_view name);
  LockE& get_or_create_lock(std::string_view name, std::uint32_t capacity);
  void mark_dirty(LockE& lock);
  // Grants every queued request that can be granted on dirty locks, then
  // erases locks with neither holders nor waiters.
  void settle(Instant now);
  void pump(LockE& lock, Instant now);
  bool group_ready(const GroupE& group) const;

  LeaseIt add_lease(LockE& lock, const OwnerToken& token, Nanos ttl,
                    Instant now, std::string_view label,
                    std::string_view reentrancy_key, SessionId session);
  void remove_lease(LockE& lock, LeaseIt it);
  void join_lease(LockE& lock, LeaseIt lease, const OwnerToken& alias,
                  Nanos ttl, Instant now);
  void set_expiry(LockE& lock, LeaseIt it, Instant expiry);
  WaiterIt add_waiter(LockE& lock, WaiterE waiter);
  void remove_waiter(LockE& lock, WaiterIt it);
  // Removes every queued request of an all-or-nothing reservation; one event
  // of `kind` per name unless `kind` is nullopt.
  void remove_group(GroupE& group, std::optional<Event::Kind> kind);
  void grant_waiter(LockE& lock, WaiterIt it, Instant now);
  void grant_group(GroupE& group, Instant now);

  CoreGrant make_grant(const LockE& lock, const LeaseE& lease,
                       Instant arrival) const;
  LeaseRecord make_record(const LockE& lock, const LeaseE& lease) const;
  std::vector<HolderInfo> holders_of(const LockE& lock, Instant now) const;
  void sink_put(const LockE& lock, const LeaseE& lease);
  void push_event(Event::Kind kind, const LockE& lock, const OwnerToken& token,
                  CoreGrant grant = {});
  std::size_t position_of(const LockE& lock, WaiterIt it) const;

  void advance();

  // --- requests (lock_table.cc / lock_table_multi.cc) ---
  Result<AcquireOutcome> acquire(const AcquireRequest& r);
  Result<MultiOutcome> acquire_multi(const MultiRequest& r);
};

}  // namespace baton::core

#endif  // BATON_CORE_LOCK_TABLE_IMPL_H_
