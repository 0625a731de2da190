// client/events.h — building and delivering observer events (internal;
// baton/observer.h is the interface).
//
// Every event of a client goes through emit(): without an observer it is
// one null-pointer check and nothing is built; with one, the Event is
// filled in on the caller's stack and handed over inline, and whatever the
// observer throws is caught and dropped, so that no call's result changes.
//
// Thread safety: stateless; the observer itself must allow calls from
// several threads at once (baton/observer.h).
#ifndef BATON_CLIENT_EVENTS_H_
#define BATON_CLIENT_EVENTS_H_

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "baton/clock.h"
#include "baton/error.h"
#include "baton/lease.h"
#include "baton/observer.h"
#include "engine/engine.h"

namespace baton::client_internal {

// Hands `e` to `observer`, dropping any exception it throws.
void deliver(Observer& observer, const Event& e) noexcept;

// Fires the event `fill` builds, only when `observer` is set.
template <typename Fill>
inline void emit(const std::shared_ptr<Observer>& observer, Fill&& fill) {
  if (!observer) [[likely]] {
    return;
  }
  Event e;
  fill(e);
  deliver(*observer, e);
}

// Whole microseconds from `from` to `clock`'s now; zero if `from` is unset
// (a Lease built by hand has no granted_at) or not yet reached.
std::chrono::microseconds since(const Clock& clock, Clock::time_point from);

// The event an acquire's error is: not_acquired, timed_out, cancelled or
// failed.
EventKind acquire_failure(const Error& error);

// The wait hook of one acquire of `lock`: wait_started, with its place in
// the queue. Empty without an observer (the engine then does nothing more).
engine::WaitHook wait_hook(const std::shared_ptr<Observer>& observer,
                           std::string_view lock, bool shared);

// An acquire of `name` that failed with `error`, `waited` since the call
// began.
inline void acquire_failed(const std::shared_ptr<Observer>& observer,
                           std::string_view name, bool shared,
                           const Error& error,
                           std::chrono::microseconds waited) {
  emit(observer, [&](Event& e) {
    e.kind = acquire_failure(error);
    e.lock = name;
    e.error = &error;
    e.waited = waited;
    e.shared = shared;
  });
}

// A lease granted, `waited` since the call began.
inline void granted(const std::shared_ptr<Observer>& observer,
                    const Lease& lease, std::chrono::microseconds waited) {
  emit(observer, [&](Event& e) {
    e.kind = EventKind::granted;
    e.lock = lease.name;
    e.lease = &lease;
    e.waited = waited;
    e.shared = lease.shared;
  });
}

// `lease` is lost: the store said so, or its local safe deadline passed
// first; `held` since the grant.
inline void lost(const std::shared_ptr<Observer>& observer, const Lease& lease,
                 const Error& why, LostReason reason,
                 std::chrono::microseconds held) {
  emit(observer, [&](Event& e) {
    e.kind = EventKind::lost;
    e.lock = lease.name;
    e.lease = &lease;
    e.error = &why;
    e.lost_reason = reason;
    e.held = held;
    e.shared = lease.shared;
  });
}

// A renewal (extend() or a keeper's) renewed `lease` (the renewed one).
inline void renewed(const std::shared_ptr<Observer>& observer,
                    const Lease& lease) {
  emit(observer, [&](Event& e) {
    e.kind = EventKind::renewed;
    e.lock = lease.name;
    e.lease = &lease;
    e.shared = lease.shared;
  });
}

// A renewal of `lease` failed with `error` without the lease being lost.
inline void renewal_failed(const std::shared_ptr<Observer>& observer,
                           const Lease& lease, const Error& error,
                           bool retryable) {
  emit(observer, [&](Event& e) {
    e.kind = EventKind::renewal_failed;
    e.lock = lease.name;
    e.lease = &lease;
    e.error = &error;
    e.retryable = retryable;
    e.shared = lease.shared;
  });
}

// release() gave back one hold of `lease`, `held` since the grant.
inline void released(const std::shared_ptr<Observer>& observer,
                     const Lease& lease, std::chrono::microseconds held) {
  emit(observer, [&](Event& e) {
    e.kind = EventKind::released;
    e.lock = lease.name;
    e.lease = &lease;
    e.held = held;
    e.shared = lease.shared;
  });
}

}  // namespace baton::client_internal

#endif  // BATON_CLIENT_EVENTS_H_
