// client/session_core.h — the machinery behind baton::Session (internal):
// one renewal thread and one notice thread for many kept leases.
//
// Two threads, so that a store that does not answer can never delay a
// lost-lease notice (rule 13):
// - the *renewal* thread does all store I/O: extend-to every interval, each
//   attempt bounded by the lease's local safe deadline; and, after a loss,
//   a best-effort release that frees the lock early if the store still has
//   it;
// - the *notice* thread does no store I/O: it sleeps until the earliest
//   local safe deadline (rule 14) and declares every lease whose deadline
//   passed lost — cancellation flag, then on_lost — at that instant,
//   whatever the renewal thread is doing. A lock_lost answer to a renewal
//   is handed to it too, so on_lost always runs on one thread.
// Observer events (baton/observer.h): `renewed` and `renewal_failed` on the
// renewal thread (renewed right before on_renewed); `lost` on the notice
// thread, right before on_lost.
// Both threads start with the first kept lease and end when none is left
// (and every lost lease was given back).
//
// Owners (Session, LeaseKeeper, Elector, the client's default-session
// pointer) hold what make() returns; the threads hold the core itself.
// When the last owner goes, it waits for both threads to end and joins
// them (drain()), so no session thread outlives its owners: a detached
// give-back could otherwise still run while the process exits, on objects
// already destroyed. The wait is bounded: a renewal in flight and each
// give-back last at most the client's request_timeout. An owner dropped
// on a session thread itself (in on_lost) does not wait for its own
// thread; that thread ends by itself moments later.
//
// Thread safety: every member function may be called from any thread.
#ifndef BATON_CLIENT_SESSION_CORE_H_
#define BATON_CLIENT_SESSION_CORE_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "baton/client.h"
#include "baton/clock.h"
#include "baton/error.h"
#include "baton/lease.h"
#include "baton/observer.h"

namespace baton::client_internal {

using Steady = std::chrono::steady_clock;

// One lease kept alive by a session.
struct KeptEntry {
  // Fixed at creation.
  std::uint64_t id = 0;
  bool auto_interval = false;        // interval follows the lease
  std::chrono::milliseconds ttl{0};  // extend-to this TTL
  std::function<void(const Error&)> on_lost;
  std::function<void(const Lease&)> on_renewed;

  // Guarded by SessionCore::mu_.
  Lease lease;
  // Renew this often: the caller's renew_interval, or (auto_interval) a
  // third of the lease's window: the TTL, or less when the store grants a
  // shorter validity (zookeeper:// caps it by its session timeout).
  std::chrono::milliseconds interval{0};
  Clock::time_point next_renew{};
  bool in_flight = false;        // a renewal is running
  bool notifying = false;        // on_lost is running
  bool renewed_running = false;  // on_renewed is running
  std::optional<Error> loss;     // reported by the renewal thread
  LostReason loss_reason = LostReason::store_said;  // of `loss`
  std::string last_renewal_error;  // for the lost notice's message

  // Readable without a lock.
  std::atomic<bool> active{true};        // false once lost or no longer kept
  std::atomic<bool> cancelled{false};    // true once lost or released
  std::atomic<Steady::rep> deadline{0};  // lease.local_deadline

  Clock::time_point safe_deadline() const {
    return Clock::time_point(Steady::duration(deadline.load()));
  }
};

class SessionCore : public std::enable_shared_from_this<SessionCore> {
 public:
  // What owners hold (see above). Use it, not the constructor.
  static std::shared_ptr<SessionCore> make(Client client);
  explicit SessionCore(Client client);
  ~SessionCore();
  SessionCore(const SessionCore&) = delete;
  SessionCore& operator=(const SessionCore&) = delete;

  // Starts keeping `lease`; renew_interval 0 = a third of the lease's
  // window (its TTL, or its shorter validity), after every renewal.
  // on_renewed (may be empty) runs on the renewal thread after each
  // successful renewal.
  std::shared_ptr<KeptEntry> keep(
      Lease lease, std::chrono::milliseconds renew_interval,
      std::function<void(const Error&)> on_lost,
      std::function<void(const Lease&)> on_renewed = {});
  // Stops keeping `e`. True if it was still held (not lost). When it
  // returns, neither e's on_lost nor its on_renewed is running and neither
  // ever will (unless forget is called from one of them). With
  // `await_renewal`, also a renewal in flight has been answered (or given
  // up), so none reaches the store after this one's calls.
  bool forget(const std::shared_ptr<KeptEntry>& e, bool await_renewal = false);
  // The lease as last renewed.
  Lease lease(const KeptEntry& e) const;
  // Forgets every kept lease and returns those still held.
  std::vector<Lease> forget_all();
  std::size_t size() const;
  const Client& client() const { return client_; }
  const Clock& client_clock() const { return *clock_; }

 private:
  // Waits for both threads to end and joins them (not on one of them).
  void drain();
  void start_threads_locked();
  void start_renewal_locked();
  void notice_loop();
  void renewal_loop();
  // Renews `e` once (mu_ not held on entry or exit).
  void renew(const std::shared_ptr<KeptEntry>& e);
  bool idle_locked() const { return entries_.empty() && releases_.empty(); }

  const Client client_;
  const std::shared_ptr<const Clock> clock_;
  mutable std::mutex mu_;
  std::condition_variable notice_cv_;
  std::condition_variable renew_cv_;
  // An on_lost or on_renewed call returned, a renewal was answered, or a
  // thread ended.
  std::condition_variable notified_cv_;
  std::map<std::uint64_t, std::shared_ptr<KeptEntry>> entries_;  // mu_
  std::deque<Lease> releases_;   // mu_: lost leases to give back
  std::uint64_t next_id_ = 1;    // mu_
  bool notice_running_ = false;  // mu_
  bool renew_running_ = false;   // mu_
  std::thread notice_thread_;
  std::thread renew_thread_;
};

}  // namespace baton::client_internal

#endif  // BATON_CLIENT_SESSION_CORE_H_
