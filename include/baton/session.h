// baton/session.h — one keep-alive for many leases, one lost-notice path.
//
//   baton::Session session(client);
//   auto a = session.keep(*client.acquire("a", 5s));   // a LeaseKeeper
//   auto b = session.keep(*client.acquire("b", 5s));
//   while (!a.lost() && !b.lost()) work(a.fencing_token(), b.fencing_token());
//   // ~LeaseKeeper releases; ~Session releases whatever is still kept
//
// A session renews every lease it keeps by extend-to (rule 4) every renew
// interval (default a third of the TTL, or of the shorter validity the
// store granted) on one renewal thread, and declares a lease lost
// (rule 13) on one notice thread, which does no store I/O:
// - when a renewal answers lock_lost (or another error that retrying cannot
//   mend), or
// - at the lease's local safe deadline (rule 14) if no renewal succeeded by
//   then — at that instant, even while a renewal is still waiting for a
//   store that does not answer. Each renewal attempt is itself bounded by
//   the safe deadline.
// Declaring a lease lost sets its cancellation flag, then calls on_lost
// once. The safe deadline is earlier than the store's expiry by the drift
// allowance, so the notice comes before the store could grant the lock to
// anyone else. A lost lease is then given back to the store in the
// background (it frees the lock early if the store still has it).
//
// Threads: both start with the first kept lease and end when none is left.
// When the process may (root, CAP_SYS_NICE or RLIMIT_RTPRIO >= 1), the
// notice thread runs at the lowest real-time priority (SCHED_FIFO), so a
// busy machine cannot delay a notice past the drift allowance; on_lost runs
// on it, so keep on_lost short (set a flag, signal a child, cancel a task).
// Time is read from ClientOptions::clock (tests inject a ManualClock).
//
// LeaseKeeper(client, lease) and Elector use the client's default session,
// shared by every keeper of that client; a Session object gives a group of
// leases its own threads and a single point of release.
//
// Thread safety: every method may be called from any thread. The
// destructor must not race keep(); it never throws and releases the leases
// still kept (each bounded by ClientOptions::request_timeout). When the
// last owner of a session goes (a Session and the keepers it made; for the
// default session, the client's last LeaseKeeper or Elector), it waits for
// both threads to end — a renewal in flight and the give-backs of leases
// already lost, each bounded by request_timeout — and joins them: no
// session thread outlives its owners, nor the process's exit. (An owner
// destroyed inside on_lost does not wait for its own thread.)
#ifndef BATON_SESSION_H_
#define BATON_SESSION_H_

#include <cstddef>
#include <memory>

#include "baton/client.h"
#include "baton/keeper.h"
#include "baton/lease.h"
#include "baton/options.h"

namespace baton {

namespace client_internal {
class SessionCore;
}

class Session {
 public:
  explicit Session(Client client);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Starts keeping `lease` (already acquired) alive in this session.
  LeaseKeeper keep(Lease lease, KeeperOptions options = {});
  // Leases kept now (lost and released ones are no longer counted).
  std::size_t size() const;
  const Client& client() const;

 private:
  std::shared_ptr<client_internal::SessionCore> core_;
};

}  // namespace baton

#endif  // BATON_SESSION_H_
