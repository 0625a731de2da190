// metrics_events.h — hand-made observer events for the PrometheusMetrics
// tests: each call builds one Event (with a Lease where the event has one)
// and passes it to on_event, as the client would.
#ifndef BATON_TESTS_CLIENT_METRICS_EVENTS_H_
#define BATON_TESTS_CLIENT_METRICS_EVENTS_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "baton/clock.h"
#include "baton/error.h"
#include "baton/observer.h"

namespace baton::testing {

class Feeder {
 public:
  explicit Feeder(Observer& observer,
                  std::shared_ptr<const Clock> clock = Clock::steady())
      : observer_(observer), clock_(std::move(clock)) {}

  void event(EventKind kind, const std::string& lock) {
    Event e;
    e.kind = kind;
    e.lock = lock;
    observer_.on_event(e);
  }
  void wait_started(const std::string& lock) {
    event(EventKind::wait_started, lock);
  }
  // A lease on `lock` valid for `valid` from now.
  void granted(const std::string& lock, std::uint64_t fencing,
               std::chrono::milliseconds valid,
               std::chrono::milliseconds waited = {}) {
    with_lease(EventKind::granted, lock, fencing, valid,
               [&](Event& e) { e.waited = waited; });
  }
  void renewed(const std::string& lock, std::uint64_t fencing,
               std::chrono::milliseconds valid) {
    with_lease(EventKind::renewed, lock, fencing, valid, [](Event&) {});
  }
  void released(const std::string& lock, std::uint64_t fencing,
                std::chrono::milliseconds held) {
    with_lease(EventKind::released, lock, fencing, {},
               [&](Event& e) { e.held = held; });
  }
  void lost(const std::string& lock, std::uint64_t fencing,
            std::chrono::milliseconds held, LostReason reason) {
    const Error error(Errc::lock_lost, "lost");
    with_lease(EventKind::lost, lock, fencing, {}, [&](Event& e) {
      e.held = held;
      e.lost_reason = reason;
      e.error = &error;
    });
  }
  void renewal_failed(const std::string& lock, std::uint64_t fencing,
                      bool retryable) {
    const Error error(Errc::unavailable, "no answer");
    with_lease(EventKind::renewal_failed, lock, fencing, {}, [&](Event& e) {
      e.retryable = retryable;
      e.error = &error;
    });
  }
  void became_leader(const std::string& lock, std::uint64_t fencing) {
    with_lease(EventKind::became_leader, lock, fencing,
               std::chrono::seconds(10), [](Event&) {});
  }
  void not_acquired(const std::string& lock,
                    std::chrono::milliseconds waited = {}) {
    ended(EventKind::not_acquired, lock, waited, Errc::not_acquired);
  }
  void timed_out(const std::string& lock, std::chrono::milliseconds waited) {
    ended(EventKind::timed_out, lock, waited, Errc::timeout);
  }
  void cancelled(const std::string& lock, std::chrono::milliseconds waited) {
    ended(EventKind::cancelled, lock, waited, Errc::cancelled);
  }
  void failed(const std::string& lock, Errc code,
              std::chrono::milliseconds waited = {}) {
    ended(EventKind::failed, lock, waited, code);
  }

 private:
  template <typename Fill>
  void with_lease(EventKind kind, const std::string& lock,
                  std::uint64_t fencing, std::chrono::milliseconds valid,
                  Fill fill) {
    Lease lease;
    lease.name = lock;
    lease.token = OwnerToken{1, fencing};
    lease.fencing_token = fencing;
    lease.ttl = valid;
    lease.local_deadline = clock_->now() + valid;
    Event e;
    e.kind = kind;
    e.lock = lock;
    e.lease = &lease;
    fill(e);
    observer_.on_event(e);
  }
  void ended(EventKind kind, const std::string& lock,
             std::chrono::milliseconds waited, Errc code) {
    const Error error(code, "ended");
    Event e;
    e.kind = kind;
    e.lock = lock;
    e.waited = waited;
    e.error = &error;
    observer_.on_event(e);
  }

  Observer& observer_;
  std::shared_ptr<const Clock> clock_;
};

}  // namespace baton::testing

#endif  // BATON_TESTS_CLIENT_METRICS_EVENTS_H_
