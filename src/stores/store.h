// stores/store.h — the narrow interface every store implements.
//
// One method = one atomic operation on the store, normally one round trip
// (one Lua script, one SQL statement or function, one lock-server command).
// Stores receive already-validated input from baton::Client but must still
// refuse bad input themselves (docs/contract.md#rule-16): they can be reached
// through other paths (the CLI, the server, fuzzers).
//
// Time: every expiry is decided by *store time*. A store reports, with each
// grant, `valid_for` = (lease expiry) − (store time when the store received
// this request). The client adds that to its local send time, which is
// earlier than the store's receipt, to get a safe local deadline (rule 14).
//
// Thread safety: every Store implementation is safe for concurrent use by
// many threads; blocking calls (acquire with wait > 0) must not block other
// threads' calls.
#ifndef BATON_STORES_STORE_H_
#define BATON_STORES_STORE_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "baton/error.h"
#include "baton/lease.h"
#include "core/request.h"

namespace baton::store {

using std::chrono::milliseconds;

// The request/grant vocabulary is core's (core/request.h), shared with the
// client, the wire protocol and batond.
using core::AcquireSpec;
using core::Grant;
using core::MultiSpec;
using core::ReleaseResult;

class Store {
 public:
  virtual ~Store() = default;

  // Rule 6/7: wait == 0 answers at once (not_acquired with holders);
  // otherwise waits in FIFO order (rule 8) at most `wait`, then timeout,
  // leaving no trace in the queue. Same token again = same lease (rule 17).
  virtual Result<Grant> acquire(const AcquireSpec& spec, milliseconds wait) = 0;

  // Rule 4: expiry = store now + ttl, only for the live lease with `token`;
  // otherwise lock_lost and nothing changes.
  virtual Result<Grant> extend(std::string_view name, const OwnerToken& token,
                               milliseconds ttl) = 0;

  // Rule 5: removes only the lease with `token` (one hold of a reentrant
  // lease); a queued request with `token` on `name` is withdrawn.
  // Idempotent: releasing what is not held reports was_held = false.
  virtual Result<ReleaseResult> release(std::string_view name,
                                        const OwnerToken& token) = 0;

  // Rule 15. A free, unknown lock is described with no holders.
  virtual Result<LockInfo> describe(std::string_view name) = 0;
  // Locks that have holders or waiters and whose name starts with `prefix`,
  // sorted by name, at most `limit`.
  virtual Result<std::vector<LockInfo>> list(std::string_view prefix,
                                             std::size_t limit) = 0;

  // Rule 11. acquire_some: enqueue (or refresh) one request per name under
  // spec.reservation, wait up to `wait` until at least one is granted, and
  // return every lease the reservation holds among spec.names (possibly
  // none). acquire_all: grant all names at once or none; on timeout nothing
  // stays queued.
  virtual Result<std::vector<Grant>> acquire_multi(const MultiSpec& spec,
                                                   milliseconds wait) = 0;

  // Counters. take(n) decrements only while the result stays >= 0, else
  // not_acquired; returns the new value. n >= 1.
  virtual Result<std::int64_t> counter_get(std::string_view name) = 0;
  virtual Result<std::int64_t> counter_add(std::string_view name,
                                           std::int64_t delta) = 0;
  virtual Result<std::int64_t> counter_take(std::string_view name,
                                            std::int64_t n) = 0;

  // Rule 18: whether acquire() honors AcquireSpec::shared. A store without
  // shared mode leaves this false; the client then refuses shared requests
  // with `unsupported` naming the store, and nothing is sent.
  virtual bool supports_shared() const { return false; }

  // Whether a lease lives on after its client is gone, until its expiry
  // (a row, a key with a TTL). False where the store ends it with the
  // client's session or process: zookeeper:// (ephemeral nodes), memory:.
  virtual bool leases_outlive_client() const { return true; }

  // The store's URL with any password masked (for logs and errors).
  virtual std::string safe_url() const = 0;
};

}  // namespace baton::store

#endif  // BATON_STORES_STORE_H_
