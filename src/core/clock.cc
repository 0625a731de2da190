// core/clock.cc — baton::Clock (include/baton/clock.h): the steady clock
// and the tests' manual clock. In core because stores (memory:) read it too.
#include "baton/clock.h"

#include <algorithm>
#include <thread>

namespace baton {

namespace {

using std::chrono::steady_clock;

// A wait on a ManualClock also wakes after this much real time, in case
// the clock moved between its check and the start of its wait.
constexpr std::chrono::milliseconds kManualBackstop{5};

class SteadyClock final : public Clock {
 public:
  time_point now() const override { return steady_clock::now(); }
  void wait_until(std::condition_variable& cv, std::unique_lock<std::mutex>& lk,
                  time_point t) const override {
    cv.wait_until(lk, t);
  }
  void sleep_until(time_point t) const override {
    std::this_thread::sleep_until(t);
  }
};

}  // namespace

std::shared_ptr<const Clock> Clock::steady() {
  // Never destroyed: a thread still running at exit (a withdraw handed to
  // the background, a detached notice thread) may ask for the clock after
  // static destructors ran, and a destroyed shared_ptr would be read after
  // free (seen under AddressSanitizer in engine_test).
  static const auto* const clock =
      new std::shared_ptr<const Clock>(std::make_shared<const SteadyClock>());
  return *clock;
}

ManualClock::ManualClock()
    : now_(std::chrono::duration_cast<steady_clock::duration>(
               std::chrono::hours(24 * 365))
               .count()) {}

Clock::time_point ManualClock::now() const {
  return time_point(steady_clock::duration(now_.load()));
}

// The caller holds lk (its own mutex); this takes mu_ only briefly and
// never the other way round, and advance() notifies under mu_ alone, so a
// registered condition variable is alive while it is notified.
void ManualClock::wait_until(std::condition_variable& cv,
                             std::unique_lock<std::mutex>& lk,
                             time_point t) const {
  if (now() >= t) return;
  {
    std::lock_guard<std::mutex> g(mu_);
    waiters_.push_back(&cv);
  }
  if (now() < t) cv.wait_for(lk, kManualBackstop);
  std::lock_guard<std::mutex> g(mu_);
  waiters_.erase(std::find(waiters_.begin(), waiters_.end(), &cv));
}

void ManualClock::sleep_until(time_point t) const {
  std::unique_lock<std::mutex> g(mu_);
  while (now() < t) tick_.wait_for(g, kManualBackstop);
}

void ManualClock::advance(std::chrono::nanoseconds d) {
  now_.fetch_add(std::chrono::duration_cast<steady_clock::duration>(d).count());
  wake_all();
}

void ManualClock::set(time_point t) {
  auto want = t.time_since_epoch().count();
  auto cur = now_.load();
  while (cur < want && !now_.compare_exchange_weak(cur, want)) {
  }
  wake_all();
}

void ManualClock::wake_all() {
  std::lock_guard<std::mutex> g(mu_);
  for (std::condition_variable* cv : waiters_) cv->notify_all();
  tick_.notify_all();
}

}  // namespace baton
