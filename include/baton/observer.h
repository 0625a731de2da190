// baton/observer.h — what a client's locks are doing, as events.
//
//   struct Log : baton::Observer {
//     void on_event(const baton::Event& e) override {
//       std::fprintf(stderr, "%s %.*s\n", baton::to_string(e.kind).data(),
//                    int(e.lock.size()), e.lock.data());
//     }
//   };
//   baton::ClientOptions o;
//   o.observer = std::make_shared<Log>();
//   auto client = baton::Client::open(url, o);
//
// One observer sees every call of a client (and of its copies, keepers,
// sessions and electors): the same events on every store. baton's own
// Prometheus adapter (baton/metrics.h) is one such observer.
//
// Threads and costs: on_event runs inline, on the thread that caused the
// event — the caller's thread for acquire, extend and release (and for an
// elector's resign()); the session's renewal thread for a keeper's renewed
// and renewal_failed; the session's notice thread for every `lost` of a
// kept lease (right before its on_lost) and an elector's stopped_leading
// when its term is lost (right before ElectorOptions::on_lost); the
// elector's thread for became_leader and new_leader (right before
// on_elected and on_new_leader). It must not block: a slow observer delays
// the call it runs in by as long as it takes (an acquire answers that much
// later, its `waited` does not include it), and on the notice thread it
// delays the lost notices of other leases (rule 13). Several threads may
// call it at once. An exception thrown by on_event is caught and dropped;
// the call's result does not change. Without an observer (the default) no
// event is built: each call pays one null-pointer check.
//
// Order and count: each occurrence fires once, in the order it happened on
// its thread. An acquire fires at most one wait_started and then exactly
// one outcome per name (granted, not_acquired, timed_out, cancelled or
// failed); acquire_some reports a name it did not get as not_acquired (its
// request may stay queued after the call). An elector's term is a lease of
// the client, so its acquire, renewals, loss and release are seen too.
//
// What is not an event: a call refused before it reached the store (bad
// input, invalid ClientOptions, shared mode on a store without it); a
// release() that answered false (nothing held: lost or released before)
// or failed; describe, list and counters; the session giving back a lease
// it already reported lost; a keeper's renewal that failed for good (that
// is its `lost`, reason store_said).
//
// wait_started: a store that answers a waiting request as queued shows the
// wait at once, with its place; baton:// holds a waiting request's reply
// until the grant, so with an observer a blocking acquire there first
// tries (one round trip, as a wait granted at once takes; the client
// learns from the first `queued` answer that its store needs no try) and a
// refusal is the wait's start, place unknown. acquire_some / acquire_all
// fire it (place unknown) when the store says they wait, at the latest
// when their wait ends without the grants.
#ifndef BATON_OBSERVER_H_
#define BATON_OBSERVER_H_

#include <chrono>
#include <cstdint>
#include <optional>
#include <string_view>

#include "baton/error.h"
#include "baton/lease.h"

namespace baton {

enum class EventKind {
  // A blocking acquire began to wait (the lock was not free at once).
  wait_started,
  // A lease was granted: `lease`, and `waited` since the call began.
  granted,
  // try_acquire (or acquire with wait 0) found the lock held; `error`.
  not_acquired,
  // A blocking acquire's wait ran out; `waited`, `error`.
  timed_out,
  // A blocking acquire was stopped by its stop_token; `waited`, `error`.
  cancelled,
  // An acquire failed otherwise (unavailable, permission_denied, ...).
  failed,
  // extend() or a keeper renewed `lease` (its new local deadline).
  renewed,
  // A renewal failed without the lease being lost (yet); `retryable` says
  // whether it will be tried again (unavailable) or not.
  renewal_failed,
  // The lease is gone: the store said so (reason store_said) or its local
  // safe deadline passed first (deadline_passed). `held` since the grant.
  lost,
  // release() gave one hold back (`held` since the grant).
  released,
  // Elector: this candidate became leader (`lease`, its term).
  became_leader,
  // Elector: this candidate stopped leading (`error` says why; none when
  // it resigned), `held` since it became leader.
  stopped_leading,
  // Elector: a leader other than the last one seen (`leader_label`).
  new_leader,
};

// Why a lease was lost.
enum class LostReason {
  store_said,       // the store answered lock_lost
  deadline_passed,  // the local safe deadline passed before a renewal
};

struct Event {
  EventKind kind = EventKind::granted;
  // The lock (or election) name. For acquire_some / acquire_all, one event
  // per name.
  std::string_view lock;
  // The lease, for granted, renewed, renewal_failed, lost, released and
  // became_leader; null otherwise. Valid during on_event only.
  const Lease* lease = nullptr;
  // Since the acquire call began: granted, not_acquired, timed_out,
  // cancelled, failed.
  std::chrono::microseconds waited{0};
  // Since the grant: released, lost, stopped_leading.
  std::chrono::microseconds held{0};
  // wait_started: 0-based place in the lock's queue (0 = next), when the
  // store says.
  std::optional<std::uint64_t> queue_position;
  // The error, for not_acquired, timed_out, cancelled, failed,
  // renewal_failed, lost and stopped_leading (null when it resigned).
  const Error* error = nullptr;
  LostReason lost_reason = LostReason::store_said;  // lost
  bool retryable = false;                           // renewal_failed
  bool shared = false;            // the request or lease is shared
  std::string_view leader_label;  // new_leader
};

// "wait_started", "granted", ... (the enumerator's name).
std::string_view to_string(EventKind kind) noexcept;
// "store_said" or "deadline_passed".
std::string_view to_string(LostReason reason) noexcept;

class Observer {
 public:
  virtual ~Observer() = default;
  // See the file comment for threads and costs. Must not block; an
  // exception it throws is caught and dropped by the caller.
  virtual void on_event(const Event& event) = 0;
};

}  // namespace baton

#endif  // BATON_OBSERVER_H_
