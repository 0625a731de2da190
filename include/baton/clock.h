// baton/clock.h — the clock the client library reads: local safe deadlines
// (rule 14), renewal schedules and lost-lease notices (rule 13).
//
//   baton::ClientOptions o;
//   auto clock = std::make_shared<baton::ManualClock>();
//   o.clock = clock;                       // tests: time moves only by hand
//   ...
//   clock->advance(10s);                   // wakes every wait due by then
//
// The default is the steady clock (CLOCK_MONOTONIC), which never steps. A
// ManualClock lets tests drive renewal and lost-notice timing without
// sleeping. Store time is never read here: expiry is decided by the store.
//
// Thread safety: every method may be called from any thread.
#ifndef BATON_CLOCK_H_
#define BATON_CLOCK_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <vector>

namespace baton {

class Clock {
 public:
  using time_point = std::chrono::steady_clock::time_point;

  virtual ~Clock() = default;
  // The current instant.
  virtual time_point now() const = 0;
  // With `lk` held on entry and on return: waits until `cv` is notified or
  // this clock reaches `t`. Spurious returns are allowed; callers re-check.
  virtual void wait_until(std::condition_variable& cv,
                          std::unique_lock<std::mutex>& lk,
                          time_point t) const = 0;
  // Blocks the calling thread until this clock reaches `t`.
  virtual void sleep_until(time_point t) const = 0;

  // The process-wide steady clock.
  static std::shared_ptr<const Clock> steady();
};

// A clock that moves only when set() or advance() is called. Waits due by
// the new instant are woken (a wait that raced with the move notices it
// within a few milliseconds of real time). Starts at an arbitrary instant.
class ManualClock final : public Clock {
 public:
  ManualClock();
  time_point now() const override;
  void wait_until(std::condition_variable& cv, std::unique_lock<std::mutex>& lk,
                  time_point t) const override;
  void sleep_until(time_point t) const override;

  void advance(std::chrono::nanoseconds d);
  // Never moves backwards: an earlier `t` is ignored.
  void set(time_point t);

 private:
  void wake_all();

  std::atomic<std::chrono::steady_clock::rep> now_;
  mutable std::mutex mu_;  // guards waiters_; never held with a waiter's
  mutable std::vector<std::condition_variable*> waiters_;
  mutable std::condition_variable tick_;  // sleep_until, with mu_
};

}  // namespace baton

#endif  // BATON_CLOCK_H_
