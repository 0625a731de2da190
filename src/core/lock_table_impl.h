// core/lock_table_impl.h — private data structures of LockTable (see
// lock_table.h for the semantics). Only lock_table*.cc include this.
//
// Storage is laid out for the common case (one holder, no waiters, no
// reentrancy; see docs/design.md, "Core storage"):
// - a lock is one allocation: LockE followed by its name bytes (the name is
//   stored once; the index and every lookup use string_views into it);
// - the first holder lives inline in LockE; more holders, the wait queue,
//   aliases and reentrancy keys live in a LockExtra allocated only when
//   needed; a lease's reentrancy key, aliases and session likewise;
// - labels are interned (one copy per distinct label, reference-counted);
// - LockIndex is an open-addressing table of LockE pointers;
// - timers are a 4-ary min-heap of (instant, node) pairs; every lease and
//   waiter embeds its TimerNode, which records its heap position.
#ifndef BATON_CORE_LOCK_TABLE_IMPL_H_
#define BATON_CORE_LOCK_TABLE_IMPL_H_

#include <functional>
#include <list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "core/ended_tokens.h"
#include "core/lock_table.h"

namespace baton::core {

struct LockE;
struct GroupE;
struct MultiLookup;  // acquire_multi's look-up (lock_table_multi.cc)

inline constexpr std::uint32_t kNoTimer = 0xFFFFFFFFu;

// What the timer heap points at: a lease (expiry) or a waiter (deadline).
struct TimerNode {
  LockE* lock = nullptr;
  std::uint32_t heap_pos = kNoTimer;
  bool is_lease = false;
};

// 4-ary min-heap; each node's heap_pos is kept up to date.
class TimerHeap {
 public:
  bool empty() const { return v_.empty(); }
  std::size_t size() const { return v_.size(); }
  Instant top_when() const { return v_.front().when; }
  TimerNode* top() const { return v_.front().node; }
  void set(TimerNode* node, Instant when);  // insert, or move if present
  void erase(TimerNode* node);              // no-op if absent

 private:
  struct Entry {
    Instant when;
    TimerNode* node;
  };
  void place(std::size_t i, const Entry& e) {
    v_[i] = e;
    e.node->heap_pos = static_cast<std::uint32_t>(i);
  }
  void sift_up(std::size_t i);
  void sift_down(std::size_t i);
  std::vector<Entry> v_;
};

// Rarely needed parts of a lease.
struct LeaseExtra {
  std::string reentrancy_key;
  std::vector<OwnerToken> aliases;  // reentrant request tokens
  SessionId session = 0;            // non-zero: ephemeral, bound to it
};

struct LeaseE : TimerNode {
  OwnerToken token;
  std::uint64_t fencing = 0;
  Nanos ttl{0};
  Instant expiry{};
  std::uint32_t holds = 0;             // 0: this (inline) slot is unused
  bool shared = false;                 // a shared (read) lease
  const std::string* label = nullptr;  // interned; nullptr = ""
  std::unique_ptr<LeaseExtra> extra;   // nullptr = none of it

  std::string_view label_view() const {
    return label == nullptr ? std::string_view() : std::string_view(*label);
  }
  std::string_view reentrancy_key() const {
    return extra ? std::string_view(extra->reentrancy_key) : std::string_view();
  }
  SessionId session() const { return extra ? extra->session : 0; }
};

struct WaiterE;
using WaiterIt = std::list<WaiterE>::iterator;
using WaiterLinks = std::list<std::pair<LockE*, WaiterIt>>;

struct WaiterE : TimerNode {
  OwnerToken token;
  Nanos ttl{0};
  std::string label;
  std::string reentrancy_key;
  SessionId session = 0;
  bool ephemeral = false;
  bool shared = false;
  Instant arrival{};
  Instant deadline{};
  GroupE* group = nullptr;  // all-or-nothing reservation, if any
  WaiterLinks::iterator session_link;
};

// Holders beyond the inline one, the queue and the reentrancy indexes.
struct LockExtra {
  std::unordered_map<OwnerToken, LeaseE, OwnerTokenHash> more;
  std::unordered_map<OwnerToken, LeaseE*, OwnerTokenHash> aliases;
  std::unordered_map<std::string, LeaseE*> by_reentrancy_key;
  std::list<WaiterE> queue;  // arrival order
};

struct LockE {
  LeaseE first;  // inline holder slot
  std::unique_ptr<LockExtra> ext;
  std::uint64_t last_fencing = 0;
  std::uint32_t capacity = 1;
  std::uint32_t holders = 0;
  std::uint32_t shared_holders = 0;  // of `holders`, shared leases
  std::uint32_t name_len = 0;
  std::uint32_t hash = 0;
  bool dirty = false;

  std::string_view name() const {
    return {reinterpret_cast<const char*>(this + 1), name_len};
  }
  // One allocation: the struct, then the name bytes.
  static LockE* create(std::string_view name, std::uint32_t hash,
                       std::uint32_t capacity);
  static void destroy(LockE* lock);

  LockExtra& extra() {
    if (!ext) ext = std::make_unique<LockExtra>();
    return *ext;
  }
  bool queue_empty() const { return !ext || ext->queue.empty(); }
  // Rule 18: a request of this kind is compatible with the holders.
  bool fits(bool shared) const {
    if (shared) return holders == shared_holders;
    return holders < capacity && shared_holders == 0;
  }
  std::size_t queue_size() const { return ext ? ext->queue.size() : 0; }
  // The lease held with `token` (own token or reentrant alias), if any.
  LeaseE* find_lease(const OwnerToken& token);
  template <typename F>
  void for_each_holder(F&& f) {
    if (first.holds > 0) f(first);
    if (ext) {
      for (auto& [t, l] : ext->more) f(l);
    }
  }
  template <typename F>
  void for_each_holder(F&& f) const {
    if (first.holds > 0) f(first);
    if (ext) {
      for (const auto& [t, l] : ext->more) f(l);
    }
  }
};

std::uint32_t name_hash(std::string_view name);

// Open addressing (linear probing, backward-shift deletion) of LockE*.
class LockIndex {
 public:
  ~LockIndex();
  std::size_t size() const { return size_; }
  LockE* find(std::string_view name, std::uint32_t hash) const;
  void prefetch_slot(std::uint32_t hash) const;
  void prefetch_lock(std::uint32_t hash) const;  // the first probe's lock
  void insert(LockE* lock);                      // name not present
  void erase(LockE* lock);                       // present
  template <typename F>
  void for_each(F&& f) const {
    for (LockE* l : slots_) {
      if (l != nullptr) f(*l);
    }
  }
  void clear();

 private:
  void grow();
  std::vector<LockE*> slots_;
  std::size_t size_ = 0;
};

// Interned strings with reference counts (lease labels).
class Interner {
 public:
  const std::string* acquire(std::string_view s);
  void release(const std::string* s);

 private:
  struct Hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const noexcept {
      return std::hash<std::string_view>{}(s);
    }
  };
  std::unordered_map<std::string, std::uint32_t, Hash, std::equal_to<>> refs_;
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
  Impl(const Clock& c, Limits l)
      : clock(c), limits(l), ended(l.max_ended_tokens, l.ended_token_window) {}
  ~Impl();

  const Clock& clock;
  Limits limits;
  ChangeSink* sink = nullptr;

  LockIndex locks;
  Interner labels;
  std::unordered_map<Key, std::pair<LockE*, WaiterIt>, KeyHash> waiters;
  std::unordered_map<OwnerToken, GroupE, OwnerTokenHash> groups;
  std::unordered_map<SessionId, std::unordered_set<LeaseE*>> session_leases;
  std::unordered_map<SessionId, WaiterLinks> session_waiters;
  std::unordered_map<std::string, std::int64_t> counters;
  TimerHeap timers;
  std::vector<LockE*> dirty;
  std::vector<Event> events;
  std::uint64_t fencing = 0;
  // Bumped by every change a reader of describe()/list()/counters can see
  // (lease added, changed or removed; waiter queued or gone; counter
  // written): change_count().
  std::uint64_t changes = 0;
  TableStats totals;  // grants, expirations, wait_timeouts, leases
  EndedTokens ended;  // leases that ended recently (late duplicates)

  // --- helpers (lock_table.cc) ---
  LockE* find_lock(std::string_view name) const {
    return locks.find(name, name_hash(name));
  }
  LockE& get_or_create_lock(std::string_view name, std::uint32_t capacity);
  void mark_dirty(LockE& lock);
  // Grants every queued request that can be granted on dirty locks, then
  // erases locks with neither holders nor waiters.
  void settle(Instant now);
  void pump(LockE& lock, Instant now);
  bool group_ready(const GroupE& group) const;

  LeaseE* add_lease(LockE& lock, const OwnerToken& token, Nanos ttl,
                    Instant now, std::string_view label,
                    std::string_view reentrancy_key, SessionId session,
                    bool shared = false);
  void remove_lease(LockE& lock, LeaseE* lease);
  void join_lease(LockE& lock, LeaseE* lease, const OwnerToken& alias,
                  Nanos ttl, Instant now);
  void add_alias(LockE& lock, LeaseE* lease, const OwnerToken& alias);
  void set_expiry(LeaseE* lease, Instant expiry);
  WaiterIt add_waiter(LockE& lock, WaiterE waiter);
  void set_deadline(WaiterIt it, Instant deadline);
  void remove_waiter(LockE& lock, WaiterIt it);
  // Removes every queued request of an all-or-nothing reservation; one event
  // of `kind` per name unless `kind` is nullopt.
  void remove_group(GroupE& group, std::optional<Event::Kind> kind);
  void grant_waiter(LockE& lock, WaiterIt it, Instant now);
  void grant_group(GroupE& group, Instant now);

  CoreGrant make_grant(const LockE& lock, const LeaseE& lease,
                       Instant arrival) const;
  LeaseRecord make_record(const LockE& lock, const LeaseE& lease) const;
  // The holders in grant order (lock_table_state.cc).
  std::vector<HolderInfo> holders_of(const LockE& lock, Instant now) const;
  void sink_put(const LockE& lock, const LeaseE& lease);
  void push_event(Event::Kind kind, const LockE& lock, const OwnerToken& token,
                  CoreGrant grant = {});
  std::size_t position_of(const LockE& lock, WaiterIt it) const;
  // `unavailable` (retry later) when the queue of `lock` (named `name`) is
  // at max_waiters_per_lock; nullopt when it has room or `lock` is nullptr
  // (a lock not created yet has an empty queue).
  std::optional<Error> queue_full(std::string_view name,
                                  const LockE* lock) const;
  // invalid_argument: `lock` exists with another capacity than `asked`.
  Error capacity_mismatch(std::string_view name, const LockE& lock,
                          std::uint32_t asked) const;
  // invalid_argument: the table is at max_locks.
  Error table_full() const;
  // The queued request of `token` on `lock`, if any (no key is built when
  // the queue is empty).
  std::optional<WaiterIt> queued_waiter(const LockE& lock,
                                        const OwnerToken& token) const;
  // Notes that `lease` (its token and aliases) ended (lock_table_release.cc).
  void remember_ended(const LockE& lock, const LeaseE& lease, Instant now);
  // lock_lost if (name, token) is a lease that ended recently.
  Status check_not_ended(std::string_view name, const OwnerToken& token,
                         Instant now, std::string_view what) const;

  void advance();

  // --- requests (lock_table.cc / lock_table_multi.cc) ---
  Result<AcquireOutcome> acquire(const AcquireRequest& r);
  // acquire's steps once `r` is valid and looked up (lock_table.cc).
  Result<AcquireOutcome> retry_queued(LockE& lock, WaiterIt it,
                                      const AcquireRequest& r, Instant now);
  Result<AcquireOutcome> join_reentrant(LockE& lock, LeaseE& lease,
                                        const AcquireRequest& r, Instant now);
  Result<AcquireOutcome> grant_request(const AcquireRequest& r, Instant now);
  Result<AcquireOutcome> queue_request(LockE& lock, const AcquireRequest& r,
                                       Instant now);
  // release() and undo_grant(); `remember`: note the token as ended.
  Result<ReleaseOutcome> release(std::string_view name, const OwnerToken& token,
                                 bool remember);
  Result<MultiOutcome> acquire_multi(const MultiRequest& r);
  // acquire_multi's steps (lock_table_multi.cc); `m` is the look-up of
  // every name of `r`, made before anything changes.
  Status look_up_multi(const MultiRequest& r, Instant now, MultiLookup& m);
  Result<MultiOutcome> acquire_all(const MultiRequest& r, const MultiLookup& m,
                                   Instant now);
  Result<MultiOutcome> retry_group(const MultiRequest& r, const MultiLookup& m,
                                   Instant now);
  Result<MultiOutcome> grant_all(const MultiRequest& r, const MultiLookup& m,
                                 Instant now);
  Result<MultiOutcome> queue_all(const MultiRequest& r, const MultiLookup& m,
                                 std::size_t first_blocked, Instant now);
  Result<MultiOutcome> acquire_some(const MultiRequest& r, MultiLookup& m,
                                    Instant now);
  // A new lease of `r.reservation` on `r.names[i]` (creating the lock).
  CoreGrant grant_new(const MultiRequest& r, std::size_t i, Instant now);
};

}  // namespace baton::core

#endif  // BATON_CORE_LOCK_TABLE_IMPL_H_
