// core/clock.h — the injected clock of the core state machine.
//
// Core never reads the time itself: every LockTable holds a Clock&. Time is
// a monotonic count of nanoseconds since the clock's own epoch (`Instant`).
//
// Thread safety: SteadyClock is safe everywhere; ManualClock is safe for
// concurrent now() and set/advance (atomic).
#ifndef BATON_CORE_CLOCK_H_
#define BATON_CORE_CLOCK_H_

#include <atomic>
#include <chrono>

namespace baton::core {

using Nanos = std::chrono::nanoseconds;
// An instant on a Clock: nanoseconds since that clock's epoch.
using Instant = std::chrono::nanoseconds;

class Clock {
 public:
  virtual ~Clock() = default;
  virtual Instant now() const = 0;
};

// std::chrono::steady_clock (never steps).
class SteadyClock final : public Clock {
 public:
  Instant now() const override {
    return std::chrono::duration_cast<Nanos>(
        std::chrono::steady_clock::now().time_since_epoch());
  }
};

// A clock tests move by hand.
class ManualClock final : public Clock {
 public:
  explicit ManualClock(Instant start = Instant{1'000'000'000})
      : now_(start.count()) {}
  Instant now() const override { return Instant{now_.load()}; }
  void set(Instant t) { now_.store(t.count()); }
  void advance(Nanos d) { now_.fetch_add(d.count()); }

 private:
  std::atomic<long long> now_;
};

}  // namespace baton::core

#endif  // BATON_CORE_CLOCK_H_
