// baton/keeper.h — an RAII lease that renews itself and reports its loss.
//
//   auto held = baton::LeaseKeeper::acquire(client, "job", 30s, {.ttl = 10s});
//   if (!held) return;                        // not_acquired / timeout / ...
//   while (!held->lost()) { step(held->fencing_token()); }
//   // destructor: stops renewing and releases
//
// A keeper is one lease kept alive by a Session (<baton/session.h>; by
// default the client's own session, shared by all its keepers): extend-to
// (rule 4) every KeeperOptions::renew_interval (default: a third
// of the TTL, or of the shorter validity the store granted), and a lost
// notice (rule 13) — the cancellation flag, then on_lost once — when a
// renewal answers lock_lost or, at the latest, at the local safe deadline
// (rule 14) if no renewal succeeded by then, whatever the store is doing.
// The safe deadline is earlier than the store's expiry by the drift
// allowance, so the notice comes before the store could grant the lock to
// anyone else.
//
// Thread safety: all const methods may be called from any thread while the
// lease is renewed. release() and the destructor must not race each other.
// The destructor never throws; it releases a lease still held (bounded by
// ClientOptions::request_timeout) and does not ask the store about a lease
// already lost. The last keeper of the client's default session (or the
// last owner of a Session) also waits for the session's threads to end:
// a renewal in flight and the background give-back of leases already
// lost, each bounded by request_timeout. No session thread outlives its
// owners.
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

namespace client_internal {
class SessionCore;
}

class LeaseKeeper {
 public:
  // Acquires `name` (waiting up to `wait`; 0 = try) and starts renewing.
  static Result<LeaseKeeper> acquire(const Client& client,
                                     std::string_view name,
                                     std::chrono::milliseconds wait,
                                     const AcquireOptions& acquire_options = {},
                                     KeeperOptions keeper_options = {});
  // The same with a shared (read) lease: Client::acquire_shared (rule 18).
  static Result<LeaseKeeper> acquire_shared(
      const Client& client, std::string_view name,
      std::chrono::milliseconds wait,
      const AcquireOptions& acquire_options = {},
      KeeperOptions keeper_options = {});
  // Takes over renewal of a lease already held, in the client's default
  // session.
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
  // The current local safe deadline (rule 14), on ClientOptions::clock. It
  // moves forward with every successful renewal; past it the lease is lost.
  std::chrono::steady_clock::time_point safe_deadline() const;

  // Stops renewal and releases now. Returns Client::release()'s answer, or
  // false without asking the store if the lease was already lost.
  Result<bool> release();
  // Stops renewal without releasing: returns the lease as last renewed,
  // still held until its expiry (the caller may extend or release it with
  // the Client), or lock_lost if it was lost or released before. Afterwards
  // the keeper neither renews nor releases (release() answers false). On
  // return, on_lost and on_renewed are not running and never will, and a
  // renewal that was in flight has been answered: none of the keeper's
  // extends reaches the store after the caller's own.
  Result<Lease> detach();

  struct State;

 private:
  friend class Session;
  LeaseKeeper(std::shared_ptr<client_internal::SessionCore> core, Lease lease,
              KeeperOptions options);
  std::unique_ptr<State> state_;
};

}  // namespace baton

#endif  // BATON_KEEPER_H_
