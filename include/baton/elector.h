// baton/elector.h — leader election on top of a lock (docs/contract.md,
// "Leader election"): active-standby, one leader per group at a time.
//
//   baton::Elector e(client, "billing-leader", {.ttl = 15s});
//   if (e.campaign().ok()) run_as_leader(e.cancelled());   // blocks until won
//   // destructor resigns
//
// The election is the lock named `group` (capacity 1). campaign() waits in
// the lock's FIFO queue; once elected, the term's lease is kept by the
// client's default Session (<baton/session.h>): renewed every
// retry_interval (default TTL/3), with cancelled() set and on_lost called
// when renewal answers lock_lost or, at the latest, at the local safe
// deadline if no renewal succeeded by then — whatever the store is doing.
// observe() returns the current leader's label and fencing token; while a
// campaign waits, the elector describes the lock every retry_interval and
// on_new_leader fires when the leader it sees changes.
//
// Thread safety: all methods may be called from any thread. on_elected and
// on_new_leader run on the elector's background thread, on_lost on the
// session's notice thread; callbacks must not call campaign/resign.
// The destructor resigns, never throws.
#ifndef BATON_ELECTOR_H_
#define BATON_ELECTOR_H_

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>

#include "baton/client.h"
#include "baton/error.h"
#include "baton/lease.h"
#include "baton/options.h"

namespace baton {

struct LeaderInfo {
  std::string label;                // the leader's owner label
  std::uint64_t fencing_token = 0;  // its term: strictly increasing
  std::chrono::milliseconds time_left{0};
};

class Elector {
 public:
  Elector(Client client, std::string group, ElectorOptions options = {});
  Elector(const Elector&) = delete;
  Elector& operator=(const Elector&) = delete;
  ~Elector();

  // Blocks until this candidate is leader or `wait` passes (timeout).
  // While it waits, on_new_leader reports leader changes it observes. A stop
  // requested on `stop` ends the wait: the candidacy is withdrawn and the
  // call answers `cancelled` (as AcquireOptions::stop).
  Status campaign(
      std::chrono::milliseconds wait = std::chrono::milliseconds::max(),
      std::stop_token stop = {});
  // Gives up leadership (or stops campaigning). Idempotent.
  Status resign();
  // The current leader, or not_acquired if there is none.
  Result<LeaderInfo> observe() const;

  bool is_leader() const noexcept;
  // Set when leadership is lost or resigned; cleared by a new campaign.
  const std::atomic<bool>& cancelled() const noexcept;
  // The lease of the current term, if leader.
  std::optional<Lease> lease() const;
  // The current term's local safe deadline (rule 14), on
  // ClientOptions::clock; moves forward with every renewal. The epoch
  // (time_point{}) when not leader.
  std::chrono::steady_clock::time_point safe_deadline() const;

  struct State;

 private:
  std::unique_ptr<State> state_;
};

}  // namespace baton

#endif  // BATON_ELECTOR_H_
