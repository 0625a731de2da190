// stores/sqlstep/sql_state.h — the scheduling step of the table-backed SQL
// stores (mysql://, sqlite://): the rows of some lock names as one
// transaction read them (locks, holders, queue), and the step (expire what
// is due, grant the oldest requests while they fit: capacity, and rule 18's
// shared and exclusive modes) computed in C++ and written back as SQL
// statements that run in the same transaction before its COMMIT. The stores
// differ only in how they read the rows, in one upsert's syntax (Dialect)
// and in how their store clock maps to the Unix epoch; this file is their
// one copy of the rest.
//
// No I/O. Thread safety: a Tx belongs to one store call.
#ifndef BATON_STORES_SQLSTEP_SQL_STATE_H_
#define BATON_STORES_SQLSTEP_SQL_STATE_H_

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "baton/error.h"
#include "baton/lease.h"
#include "baton/store.h"

namespace baton::store::sqlstep {

// SQL syntax the step writes that differs between the engines.
enum class Dialect {
  mysql,   // INSERT … ON DUPLICATE KEY UPDATE
  sqlite,  // INSERT … ON CONFLICT (…) DO UPDATE
};

// X'…': a binary-safe literal both engines read.
std::string hex_literal(std::string_view bytes);

struct Holder {
  std::string name;
  int slot = 0;
  std::string token;  // 32 hex digits
  std::int64_t fencing = 0, ttl_ms = 0, granted_us = 0, expires_us = 0;
  int holds = 1;
  std::string label, rkey, aliases;  // aliases: comma-separated tokens
  bool shared = false;               // a shared (read) lease (rule 18)
  bool has(const std::string& t) const;
};

struct Request {
  std::int64_t id = 0;
  std::string name, token;
  int kind = 0;  // 0 acquire, 1 acquire_some, 2 acquire_all
  std::int64_t ttl_ms = 0;
  std::string label, rkey;
  std::int64_t arrived_us = 0, deadline_us = 0;
  std::optional<std::int64_t> heartbeat_us;
  bool withdrawn = false;
  bool shared = false;  // waits for a shared (read) lease (rule 18)
  bool live(std::int64_t now) const {
    return deadline_us > now && (!heartbeat_us || *heartbeat_us > now);
  }
};

struct NameState {
  bool lock_row = false;
  int capacity = 1;
  std::int64_t last_fencing = 0;
  std::vector<Holder> holders;  // grant order
  std::vector<Request> queue;   // arrival order
  bool active(std::int64_t now) const;
  int live_holders(std::int64_t now) const;
  const Holder* holder_of(const std::string& token) const;
  Request* request_of(const std::string& token);
  // Live, not withdrawn requests.
  int waiting(std::int64_t now) const;
  // Rule 18: whether a request of this kind fits beside the live holders
  // (shared: no exclusive holder; exclusive: capacity left, no shared
  // holder). Queue order is the caller's part.
  bool fits(bool shared, std::int64_t now) const;
};

// The columns the step reads, in the order the add_* functions parse them.
inline constexpr const char* kLockColumns = "name, capacity, last_fencing";
inline constexpr const char* kHolderColumns =
    "name, slot, token, fencing, ttl_ms, granted_us, expires_us, holds, "
    "label, rkey, aliases, shared";
inline constexpr const char* kQueueColumns =
    "id, name, token, kind, ttl_ms, label, rkey, arrived_us, deadline_us, "
    "heartbeat_us, withdrawn, shared";
// "(X'…',X'…')" for WHERE name IN.
std::string in_list(const std::vector<std::string>& names);

// Parse one store's result rows (kLockColumns, kHolderColumns and
// kQueueColumns, holders by fencing, queue by id) into `out`. `Rows` has
// `rows` (each cell an optional string), `at(r, c)` and `num(r, c)`.
template <class Rows>
void add_locks(const Rows& rs, std::map<std::string, NameState>* out) {
  for (std::size_t r = 0; r < rs.rows.size(); ++r) {
    NameState& s = (*out)[rs.at(r, 0)];
    s.lock_row = true;
    s.capacity = static_cast<int>(rs.num(r, 1));
    s.last_fencing = rs.num(r, 2);
  }
}
template <class Rows>
void add_holders(const Rows& rs, std::map<std::string, NameState>* out) {
  for (std::size_t r = 0; r < rs.rows.size(); ++r) {
    Holder h;
    h.name = rs.at(r, 0);
    h.slot = static_cast<int>(rs.num(r, 1));
    h.token = rs.at(r, 2);
    h.fencing = rs.num(r, 3);
    h.ttl_ms = rs.num(r, 4);
    h.granted_us = rs.num(r, 5);
    h.expires_us = rs.num(r, 6);
    h.holds = static_cast<int>(rs.num(r, 7));
    h.label = rs.at(r, 8);
    h.rkey = rs.at(r, 9);
    h.aliases = rs.at(r, 10);
    h.shared = rs.num(r, 11) != 0;
    (*out)[h.name].holders.push_back(std::move(h));
  }
}
template <class Rows>
void add_requests(const Rows& rs, std::map<std::string, NameState>* out) {
  for (std::size_t r = 0; r < rs.rows.size(); ++r) {
    Request q;
    q.id = rs.num(r, 0);
    q.name = rs.at(r, 1);
    q.token = rs.at(r, 2);
    q.kind = static_cast<int>(rs.num(r, 3));
    q.ttl_ms = rs.num(r, 4);
    q.label = rs.at(r, 5);
    q.rkey = rs.at(r, 6);
    q.arrived_us = rs.num(r, 7);
    q.deadline_us = rs.num(r, 8);
    if (rs.rows[r][9]) q.heartbeat_us = rs.num(r, 9);
    q.withdrawn = rs.num(r, 10) != 0;
    q.shared = rs.num(r, 11) != 0;
    (*out)[q.name].queue.push_back(std::move(q));
  }
  // Arrival order (rule 8) is the id's; the rows may come in another order
  // (mysql:// reads them through the (name, token) index, unsorted).
  for (auto& [name, s] : *out) {
    std::stable_sort(
        s.queue.begin(), s.queue.end(),
        [](const Request& a, const Request& b) { return a.id < b.id; });
  }
}

class Tx {
 public:
  // `now`: the store clock (µs) the rows were read at; `epoch_offset_us`:
  // store clock + offset = Unix epoch µs (0 when the store clock is the
  // epoch, as UTC_TIMESTAMP is).
  Tx(std::string prefix, Dialect dialect, std::map<std::string, NameState> s,
     std::int64_t now, std::int64_t epoch_offset_us = 0)
      : p_(std::move(prefix)),
        dialect_(dialect),
        state_(std::move(s)),
        now_(now),
        epoch_offset_us_(epoch_offset_us) {}

  std::int64_t now() const { return now_; }
  // The locks table's fencing column (mysql:// renamed it in its schema
  // version 3; sqlite:// keeps last_fencing).
  void set_fencing_column(std::string c) { fencing_col_ = std::move(c); }
  NameState& at(const std::string& name) { return state_[name]; }
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& [n, s] : state_) out.push_back(n);
    return out;
  }
  const std::string& writes() const { return w_; }

  // Deletes expired leases and requests past their deadline or heartbeat.
  void expire(const std::string& name);
  // Grants the oldest live requests while capacity allows (an acquire_all
  // at the head waits for its owner's pass, which locks all its names).
  void pump(const std::string& name);
  // expire + pump.
  void schedule(const std::string& name) {
    expire(name);
    pump(name);
  }
  // A new lease (next fencing token); sets the capacity when idle.
  Holder& grant(const std::string& name, const std::string& token,
                std::int64_t ttl_ms, int capacity, const std::string& label,
                const std::string& rkey, bool shared = false);
  // One more hold on `h` for `token` with `ttl_ms`.
  void join(Holder& h, const std::string& token, std::int64_t ttl_ms);
  void extend(Holder& h, std::int64_t ttl_ms);
  // Removes one hold; returns holds left.
  int release_hold(const std::string& name, const std::string& token);
  void remove_request(const std::string& name, std::int64_t id);
  void enqueue(const std::string& name, const std::string& token, int kind,
               std::int64_t ttl_ms, int capacity, const std::string& label,
               const std::string& rkey, std::int64_t deadline_us,
               std::optional<std::int64_t> heartbeat_us, bool shared = false);
  void refresh(Request& q, std::int64_t deadline_us,
               std::optional<std::int64_t> heartbeat_us);
  // Marks every queued request with `token` (on `name`, or every name for
  // an acquire_all) withdrawn: its waiting caller reports it.
  void withdraw(const std::string& name, Request& q);
  // Grant value of a lease for the caller.
  Grant to_grant(const Holder& h, int capacity, std::int64_t arrival_us) const;
  std::vector<HolderInfo> holder_infos(const std::string& name);
  void raw(const std::string& sql) { w_ += sql + ";"; }

 private:
  void set_lock_row(const std::string& name, NameState& s, int capacity);
  std::string p_;
  Dialect dialect_;
  std::map<std::string, NameState> state_;
  std::int64_t now_;
  std::int64_t epoch_offset_us_;
  std::string fencing_col_ = "last_fencing";
  std::string w_;
};

std::string sql_int(std::int64_t v);

// The lock's capacity is fixed while it is in use: invalid_argument naming
// `name` when `s` is active with another capacity than `cap`.
std::optional<Error> capacity_conflict(const std::string& name,
                                       const NameState& s, int cap,
                                       std::int64_t now);

// extend (rule 4) of `token`'s lease on `name`, which the transaction
// holds: the lease with its new expiry, or lock_lost naming the lock.
Result<Grant> extend_step(Tx& tx, const std::string& name,
                          const std::string& token, std::int64_t ttl_ms);
// release of one hold of `token` on `name` (or the withdrawal of its queued
// request), then the grants that frees.
ReleaseResult release_step(Tx& tx, const std::string& name,
                           const std::string& token);

// How a call asks: answer now, wait (queue or refresh the queued
// request), or end the wait (return the lease if granted, else leave).
enum class MultiMode { try_, wait, withdraw };

// One acquire pass (rules 6-8, 12, 17, 18) on `spec.name`, which the
// transaction holds: the lease (new, joined, or granted earlier to this
// token), or position > 0 with `mine` the caller's queued request, or
// `ended` (a wait past its deadline, or a withdrawal: nothing granted and
// nothing left queued). Refusals are errors: not_acquired for a try that
// finds the lock busy (with its holders) and for a request its owner token
// withdrew while it waited. `hb_us`: the waiter heartbeat
// (waiter_timeout); `*arrival` is set on the first pass.
struct AcquireOutcome {
  std::optional<Grant> grant;
  int position = 0;
  const Request* mine = nullptr;  // into the Tx's state
  bool ended = false;
};
Result<AcquireOutcome> acquire_step(Tx& tx, const AcquireSpec& spec,
                                    const std::string& token, MultiMode mode,
                                    long long wait_ms, std::int64_t hb_us,
                                    std::int64_t* arrival);

// A waiter's non-locking look at rows `tx` holds, read without the lock:
// the lease `token` holds (valid_for from `arrival`), else the caller's
// place in line when a locking pass could change nothing now (its plain
// request is queued, its heartbeat fresher than `hb_us` / 2, nothing on the
// name is due and the first request in line does not fit), else position
// 0 (a pass is needed).
AcquireOutcome quiet_look(const Tx& tx, const NameState& s,
                          const std::string& token, std::int64_t hb_us,
                          std::int64_t arrival);

// describe() of one name from its rows (holders and waiters with their
// mode, rule 18).
LockInfo lock_info(const std::string& name, const NameState& s,
                   std::int64_t now);

// acquire_some / acquire_all (rule 11) on names the transaction holds.
// In withdraw mode an acquire_all whose turn came on every name is granted;
// otherwise every queued request of the reservation leaves.
struct MultiOutcome {
  std::vector<Grant> grants;  // leases the reservation holds, names' order
  int pending = 0;            // requests still queued
  bool ended = false;         // nothing of the reservation is queued any more
                              // (its wait ended, or it withdrew)
};
Result<MultiOutcome> multi_step(Tx& tx, const MultiSpec& spec, MultiMode mode,
                                long long wait_ms,
                                std::int64_t waiter_timeout_us,
                                std::int64_t arrival_us);

}  // namespace baton::store::sqlstep

#endif  // BATON_STORES_SQLSTEP_SQL_STATE_H_
