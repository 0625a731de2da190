// stores/sqlite/state.h — the rows of some lock names as one transaction
// read them (under their serialization rows), and the scheduling step
// (seed 000: expire what is due, grant the oldest requests while capacity
// allows) computed in C++ and written back as SQL statements that run in
// the same transaction before its COMMIT.
//
// Thread safety: a Tx belongs to one store call.
#ifndef BATON_STORES_SQLITE_STATE_H_
#define BATON_STORES_SQLITE_STATE_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "baton/error.h"
#include "stores/sqlite/db.h"
#include "stores/store.h"

namespace baton::store::sq {

struct Holder {
  std::string name;
  int slot = 0;
  std::string token;  // 32 hex digits
  std::int64_t fencing = 0, ttl_ms = 0, granted_us = 0, expires_us = 0;
  int holds = 1;
  std::string label, rkey, aliases;  // aliases: comma-separated tokens
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
};

// Reads the rows of `names` (locks, holders, queue) in the transaction
// open on `conn`.
Result<std::map<std::string, NameState>> load_state(
    Conn& conn, const std::string& prefix,
    const std::vector<std::string>& names);

class Tx {
 public:
  Tx(std::string prefix, std::map<std::string, NameState> s, std::int64_t now)
      : p_(std::move(prefix)), state_(std::move(s)), now_(now) {}

  std::int64_t now() const { return now_; }
  NameState& at(const std::string& name) { return state_[name]; }
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
                const std::string& rkey);
  // One more hold on `h` for `token` with `ttl_ms`.
  void join(Holder& h, const std::string& token, std::int64_t ttl_ms);
  void extend(Holder& h, std::int64_t ttl_ms);
  // Removes one hold; returns holds left.
  int release_hold(const std::string& name, const std::string& token);
  void remove_request(const std::string& name, std::int64_t id);
  void enqueue(const std::string& name, const std::string& token, int kind,
               std::int64_t ttl_ms, int capacity, const std::string& label,
               const std::string& rkey, std::int64_t deadline_us,
               std::optional<std::int64_t> heartbeat_us);
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
  std::map<std::string, NameState> state_;
  std::int64_t now_;
  std::string w_;
};

std::string sql_int(std::int64_t v);

// acquire_some / acquire_all (rule 11) on names the transaction holds.
enum class MultiMode { try_, wait, withdraw };
struct MultiOutcome {
  std::vector<Grant> grants;  // leases the reservation holds, names' order
  int pending = 0;            // requests still queued
};
Result<MultiOutcome> multi_step(Tx& tx, const MultiSpec& spec, MultiMode mode,
                                long long wait_ms,
                                std::int64_t waiter_timeout_us,
                                std::int64_t arrival_us);

}  // namespace baton::store::sq

#endif  // BATON_STORES_SQLITE_STATE_H_
