// core/lock_table.h — the reference state machine of the lock contract.
//
// LockTable holds locks (capacity), leases (owner token, fencing token,
// expiry), per-lock FIFO wait queues, reservations (acquire_some /
// acquire_all), reentrant hold counts, sessions and counters. It does no I/O
// and reads time only from the baton::Clock it is given (core/clock.h).
// batond and the memory: store drive it; every other store implements the
// same rules in its engine and is checked against this one by the
// conformance suite.
//
// Semantics (CONTRACT.md rule numbers in brackets):
// - A lease is alive while clock.now() < expiry. Every public call first
//   processes what is due (advance()): expired leases are removed [3],
//   waiters whose deadline passed are removed [7, 9], and freed capacity is
//   handed to the oldest waiters [8]. Expiry is driven by an ordered timer
//   index: O(log n) per lease, never a scan of all locks.
// - Fencing [2]: one table-wide counter; each grant takes the next value.
//   Tokens therefore strictly increase per name (and across names). The one
//   number to persist is fencing_high_water(); restore it with
//   raise_fencing_floor() so tokens never repeat after a restart.
// - A lock exists while it has holders or waiters; its capacity is fixed by
//   its first request. A request with another capacity while it exists is
//   invalid_argument ("lock X has capacity 1; request asked for 3").
// - Requests are keyed by (name, owner token). acquire with a (name, token)
//   that already holds returns the same lease unchanged [17]; one that is
//   queued stays at its place (its deadline is updated) and reports queued.
// - A (name, token) whose lease ended (release, expiry, session release)
//   is remembered for Limits::ended_token_window (at most
//   Limits::max_ended_tokens of them): an acquire (or acquire_multi
//   reservation) with it is lock_lost ("this request's lease already
//   ended") and changes nothing, so a late duplicate of a request cannot
//   resurrect a lease. undo_grant() and waiters that leave do not count.
// - describe()'s last_fencing_token is >= every fencing token ever granted
//   on the name: the highest granted since the lock last became free
//   (restored semaphores: at least the restore floor), and for a name
//   without holders or grants since then the table-wide high water.
// - Reentrancy [12]: a request with a non-empty reentrancy key, on a lock
//   where a live lease has the same key, joins that lease: holds += 1,
//   expiry = max(expiry, now + ttl), the request's token becomes an alias
//   (a retry with it is idempotent, holds unchanged), and the grant returned
//   carries the *lease's* token. release() with the lease token decrements
//   holds; the lease is removed when holds reaches 0.
// - Shared mode [18]: on a capacity-1 lock, shared leases may be held
//   together; an exclusive lease only alone. The head of the queue is
//   granted when it is compatible with the holders (shared: no exclusive
//   holder; exclusive: no holder), repeatedly, so consecutive shared heads
//   are granted together and nobody overtakes a waiting request.
// - FIFO [8]: a lock with free capacity grants its queue head, repeatedly.
//   A head that is part of an all-or-nothing reservation is granted only
//   when it can be granted on every one of its names at once (it is then
//   the head of each of those queues, since reservations are enqueued
//   atomically in one global arrival order); until then nobody behind it is
//   granted on that lock (no overtaking, no hold-and-wait, no deadlock).
//   A try (no wait deadline) on a lock with waiters is not granted even if
//   capacity is free: waiters come first.
// - acquire_some [11]: one request per name under one reservation token;
//   each name is granted on its own as it reaches the head. Calls with the
//   same reservation refresh the deadline of its queued requests and return
//   every lease the reservation holds among the names.
// - Sessions: a request may carry a non-zero SessionId (a connection).
//   end_session() removes that session's waiters at once [9];
//   release_session_leases() frees its leases (ephemeral leases, called by
//   the server after a session timeout).
//
// Thread safety: none. One LockTable is used by one thread at a time (the
// server's strand or the memory store's mutex).
#ifndef BATON_CORE_LOCK_TABLE_H_
#define BATON_CORE_LOCK_TABLE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "baton/error.h"
#include "baton/lease.h"
#include "core/clock.h"
#include "core/request.h"

namespace baton::core {

using SessionId = std::uint64_t;  // 0 = no session

struct Limits {
  std::size_t max_waiters_per_lock = 100'000;
  std::size_t max_locks = 50'000'000;
  // Ended leases are remembered so that a late duplicate of the acquire
  // that created one is refused (lock_lost): at most this many owner
  // tokens (~40 bytes each, 10 MiB at the default), each for at most
  // `ended_token_window`. 0 = remember none.
  std::size_t max_ended_tokens = std::size_t{1} << 18;
  Nanos ended_token_window = std::chrono::minutes(10);
};

struct AcquireRequest {
  std::string_view name;
  OwnerToken token;
  Nanos ttl{0};
  std::uint32_t capacity = 1;
  std::string_view label;
  std::string_view reentrancy_key;  // empty = not reentrant
  SessionId session = 0;            // the waiter leaves when the session ends
  // Also bind the lease to the session: release_session_leases() frees it.
  bool ephemeral = false;
  // Rule 18: a shared (read) request (capacity 1, no reentrancy key).
  bool shared = false;
  // nullopt: try (answer now, not_acquired with holders if not free).
  // Otherwise queue until this instant (clock time), then time out.
  std::optional<Instant> wait_deadline;
};

// A lease as the table reports it.
struct CoreGrant {
  std::string name;
  OwnerToken token;
  std::uint64_t fencing_token = 0;
  Nanos ttl{0};
  std::uint32_t holds = 1;
  std::uint32_t capacity = 1;
  bool shared = false;
  Instant expiry{};
  // expiry − (clock time when the request being answered arrived). For a
  // waiter granted later, the arrival is the request's original arrival.
  Nanos valid_for{0};
};

// The one conversion of a table grant into the Grant every layer reports
// (batond's replies, the memory: store): `table_now` is the table clock's
// now, `wall_now_ms` the wall clock's (for the readable expiry).
inline Grant to_grant(const CoreGrant& g, Instant table_now,
                      std::int64_t wall_now_ms) {
  Grant out =
      make_grant(g.name, g.token, g.fencing_token, g.ttl, g.holds, g.capacity,
                 g.valid_for, g.expiry, table_now, wall_now_ms);
  out.shared = g.shared;
  return out;
}

struct AcquireOutcome {
  bool granted = false;
  // Granted by this call: a new lease (not a retry returning a live lease,
  // not a reentrant join).
  bool created = false;
  CoreGrant grant;           // when granted
  std::size_t position = 0;  // when queued: 1-based place in the queue
};

struct MultiRequest {
  std::vector<std::string_view> names;  // distinct
  OwnerToken reservation;
  Nanos ttl{0};
  std::uint32_t capacity = 1;
  std::string_view label;
  SessionId session = 0;
  bool all_or_nothing = false;
  // Queued requests are removed at this instant unless granted before (for
  // acquire_some: the caller's next call refreshes it). nullopt = try: an
  // all-or-nothing request that cannot be granted now leaves no trace;
  // acquire_some with nullopt queues nothing and returns what it holds or
  // can take now.
  std::optional<Instant> queue_deadline;
};

struct MultiOutcome {
  std::vector<CoreGrant> granted;  // leases the reservation holds among names
  std::size_t pending = 0;         // requests still queued
};

struct ReleaseOutcome {
  bool was_held = false;
  std::uint32_t holds_left = 0;
  bool withdrew_waiter = false;  // a queued request with this token was removed
};

// Something that happened to a request other than the one being answered:
// queued requests granted or timed out, leases expired. Drained by the
// driver with take_events() after each call, to wake parked waiters.
struct Event {
  enum class Kind : std::uint8_t {
    granted,         // a queued request was granted: `grant` is the lease
    wait_timed_out,  // a queued request's deadline passed; it was removed
    lease_expired,   // a lease reached its expiry and was removed
    session_ended,   // a waiter removed by end_session()
  };
  Kind kind;
  std::string name;
  OwnerToken token;  // the request's token (reservation for multi)
  CoreGrant grant;   // for granted (and the dead lease for lease_expired)
};

// The durable facts, for a server that persists them.
struct LeaseRecord {
  std::string name;
  OwnerToken token;
  std::uint64_t fencing_token = 0;
  Nanos ttl{0};
  Instant expiry{};
  std::uint32_t holds = 1;
  std::uint32_t capacity = 1;
  bool shared = false;  // rule 18
  std::string label;
  std::string reentrancy_key;
  std::vector<OwnerToken> aliases;  // reentrant request tokens
};

// Receives every durable change as it is made (optional).
class ChangeSink {
 public:
  virtual ~ChangeSink() = default;
  // A lease was created or changed (grant, extend, reentrant join/leave).
  virtual void lease_put(const LeaseRecord& lease) = 0;
  // A lease is gone (release, expiry, session end).
  virtual void lease_removed(std::string_view name,
                             const OwnerToken& token) = 0;
  virtual void counter_put(std::string_view name, std::int64_t value) = 0;
  // A queued request left the queue of `name` (granted, withdrawn, timed
  // out, its session ended); it had queued at `arrival` (table clock). Not
  // a durable fact: the journal ignores it; batond's history records the
  // wait. Called on wait paths only, never by an acquire granted at once.
  virtual void waiter_left(std::string_view name, std::string_view label,
                           bool shared, Instant arrival) {
    (void)name;
    (void)label;
    (void)shared;
    (void)arrival;
  }
};

struct TableStats {
  std::size_t locks = 0, leases = 0, waiters = 0, counters = 0;
  std::uint64_t grants = 0, expirations = 0, wait_timeouts = 0;
};

class LockTable {
 public:
  explicit LockTable(const Clock& clock, Limits limits = {});
  ~LockTable();
  LockTable(const LockTable&) = delete;
  LockTable& operator=(const LockTable&) = delete;

  void set_change_sink(ChangeSink* sink);  // nullptr = none

  // Rules 1, 6, 7, 8, 12, 17. Errors: invalid_argument (bad input, capacity
  // mismatch), not_acquired (try, not free; holders set), unavailable (the
  // queue is at max_waiters_per_lock: retry later), lock_lost (the lease
  // of this token already ended: a late duplicate).
  Result<AcquireOutcome> acquire(const AcquireRequest& request);

  // Rule 4: expiry = now + ttl. lock_lost if (name, token) holds no live
  // lease (including when it is only queued).
  Result<CoreGrant> extend(std::string_view name, const OwnerToken& token,
                           Nanos ttl);

  // Rule 5. Also withdraws a queued request with that token (for an
  // all-or-nothing reservation: the whole reservation).
  Result<ReleaseOutcome> release(std::string_view name,
                                 const OwnerToken& token);

  // Removes a lease like release(), for a grant whose reply never reached
  // its client (the connection closed first, or persisting it failed).
  // Unlike release(), the token is not remembered as ended, so a retry
  // with it (rule 17) is granted anew.
  Result<ReleaseOutcome> undo_grant(std::string_view name,
                                    const OwnerToken& token);

  // Rule 11.
  Result<MultiOutcome> acquire_multi(const MultiRequest& request);

  // Rule 15 (a lock with no holders and no waiters: capacity 1, empty,
  // last_fencing_token the table's high water).
  Result<LockInfo> describe(std::string_view name);
  // Existing locks whose names start with `prefix`, sorted, at most `limit`.
  std::vector<LockInfo> list(std::string_view prefix, std::size_t limit);

  // Counters: get (0 if never written), add (overflow: invalid_argument),
  // take n >= 1 (not_acquired if the result would go below 0).
  Result<std::int64_t> counter_get(std::string_view name);
  Result<std::int64_t> counter_add(std::string_view name, std::int64_t delta);
  Result<std::int64_t> counter_take(std::string_view name, std::int64_t n);

  // Removes the session's queued requests now (events: session_ended).
  void end_session(SessionId session);
  // Frees every lease bound to the session; returns how many.
  std::size_t release_session_leases(SessionId session);

  // Processes everything due at clock.now(). Called by every method too.
  void advance();
  // The earliest instant at which advance() has work (a lease expiry or a
  // wait deadline), if any.
  std::optional<Instant> next_deadline() const;
  // Events since the last call, in the order they happened.
  std::vector<Event> take_events();

  // Persistence support.
  std::uint64_t fencing_high_water() const;  // last fencing token handed out
  void raise_fencing_floor(std::uint64_t floor);  // next token > floor
  // Re-creates a lease from a record (expiry in this table's clock time;
  // already-expired records are ignored). No events, no sink calls.
  Status restore_lease(const LeaseRecord& record);
  void restore_counter(std::string_view name, std::int64_t value);
  // Every live lease and counter (for journal compaction).
  std::vector<LeaseRecord> snapshot_leases() const;
  // The same, one record at a time (no copy of the whole table).
  void for_each_lease(const std::function<void(const LeaseRecord&)>& fn) const;
  std::vector<std::pair<std::string, std::int64_t>> snapshot_counters() const;

  TableStats stats() const;
  // Moves (increases) whenever what describe(), list() or the counters
  // report changes other than by time passing: a lease granted, extended,
  // joined, released or expired, a request queued or leaving its queue, a
  // counter written. Unchanged means nothing to redraw (batond's status
  // page sends a snapshot only when it moved).
  std::uint64_t change_count() const;

  // Hints for a batch of requests (no effect on the table): start loading
  // from memory where the lock `name` is found (its index slot), or the
  // lock itself (its slot must be loaded already: hint the slot one
  // request earlier). batond hints the next requests of a pipelined batch
  // while it runs the current one.
  void prefetch_slot(std::string_view name) const;
  void prefetch_lock(std::string_view name) const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace baton::core

#endif  // BATON_CORE_LOCK_TABLE_H_
