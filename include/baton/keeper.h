// baton/keeper.h — an RAII lease that renews itself and reports its loss.
//
//   auto held = baton::LeaseKeeper::acquire(client, "job", 30s, {.ttl = 10s});
//   if (!held) return;                        // not_acquired / timeout / ...
//   while (!held->lost()) { step(held->fencing_token()); }
//   // destructor: stops renewing and releases
//
// Renewal runs on one background thread per keeper, every
// KeeperOptions::renew_interval (default TTL/3), as extend-to (rule 4).
// Rule 13: the keeper declares the lease lost — sets the cancellation flag
// and calls on_lost once — when a renewal answers lock_lost, or when the
// local safe deadline (rule 14) passes without a successful renewal. The
// safe deadline is earlier than the store's expiry by the drift allowance,
// so the notice comes before the store could grant the lock to anyone else.
//
// Thread safety: all const methods may be called from any thread while the
// keeper renews. release() and the destructor must not race each other.
// The destructor never throws and does not wait for the store longer than
// one request timeout.
#ifndef BATON_KEEPER_H_
#define BATON_KEEPER_H_

#include <atomic>
#include <chrono>
#include <memory>
#include <string_view>

#include "baton/client.h"
#include "baton/error.h"
#include "baton/lease.h"
#include "baton/options.h"

namespace baton {

class LeaseKeeper {
 public:
  // Acquires `name` (waiting up to `wait`; 0 = try) and starts renewing.
  static Result<LeaseKeeper> acquire(const Client& client,
                                     std::string_view name,
                                     std::chrono::milliseconds wait,
                                     const AcquireOptions& acquire_options = {},
                                     KeeperOptions keeper_options = {});
  // Takes over renewal of a lease already held.
  LeaseKeeper(Client client, Lease lease, KeeperOptions options = {});

  LeaseKeeper(LeaseKeeper&&) noexcept;
  LeaseKeeper& operator=(LeaseKeeper&&) noexcept;
  LeaseKeeper(const LeaseKeeper&) = delete;
  LeaseKeeper& operator=(const LeaseKeeper&) = delete;
  // Stops renewal and releases the lease (errors are swallowed).
  ~LeaseKeeper();

  // A snapshot of the current lease (local_deadline moves on each renewal).
  Lease lease() const;
  std::uint64_t fencing_token() const;
  // The cancellation flag: true once the lease is lost (rule 13) or
  // released. Poll it, or read cancelled() from hot loops.
  bool lost() const noexcept;
  const std::atomic<bool>& cancelled() const noexcept;
  // The current local safe deadline (rule 14).
  std::chrono::steady_clock::time_point safe_deadline() const;

  // Stops renewal and releases now. Returns release()'s answer.
  Result<bool> release();

  struct State;

 private:
  explicit LeaseKeeper(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace baton

#endif  // BATON_KEEPER_H_
