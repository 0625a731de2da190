// tests/torture/starvation.h — how long this process could not run.
//
// Checker 7 (rule 7) judges a blocking acquire late when it returns more
// than 100 ms after its wait. On a loaded 2-core machine the calling thread
// itself may wait that long for a CPU (dozens of processes; a store being
// restarted), which is not the library's doing. A probe thread sleeps
// kPeriod in a loop and records how much later than asked each sleep ended;
// an operation's *stall* is the sum of those oversleeps (of at least
// kStallUs) among the sleeps that overlapped it. A blocking call that hangs in
// the library leaves the probe on time, so the checker still catches it.
//
// Thread safety: every member function may be called from any thread.
#ifndef BATON_TESTS_TORTURE_STARVATION_H_
#define BATON_TESTS_TORTURE_STARVATION_H_

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <mutex>
#include <thread>

namespace baton::torture {

std::int64_t real_us();

class StarvationProbe {
 public:
  StarvationProbe() : thread_([this] { loop(); }) {}
  ~StarvationProbe() {
    stop_ = true;
    thread_.join();
  }
  StarvationProbe(const StarvationProbe&) = delete;
  StarvationProbe& operator=(const StarvationProbe&) = delete;

  // The time (µs) this process was stalled during [from, to] (real_us()
  // stamps): the sum of the probe's oversleeps of at least kStall among
  // the sleeps overlapping it. Smaller ones are the scheduler's routine
  // jitter, which a calling thread blocked on I/O would not feel; several
  // separate stalls add up (one call saw two of ~80 ms).
  std::int64_t stalled(std::int64_t from, std::int64_t to) {
    std::lock_guard<std::mutex> lk(mu_);
    std::int64_t sum = 0;
    for (const Sample& s : samples_) {
      if (s.end_us >= from && s.start_us <= to && s.late_us >= kStallUs) {
        sum += s.late_us;
      }
    }
    return sum;
  }

 private:
  static constexpr std::chrono::milliseconds kPeriod{5};
  static constexpr std::int64_t kKeepUs = 30'000'000;  // > longest op
  static constexpr std::int64_t kStallUs = 5'000;

  struct Sample {
    std::int64_t start_us, end_us, late_us;
  };

  void loop() {
    using Steady = std::chrono::steady_clock;
    while (!stop_) {
      const std::int64_t start = real_us();
      const auto t0 = Steady::now();
      std::this_thread::sleep_for(kPeriod);
      const auto slept = std::chrono::duration_cast<std::chrono::microseconds>(
          Steady::now() - t0);
      const std::int64_t late =
          std::max<std::int64_t>(0, (slept - kPeriod).count());
      std::lock_guard<std::mutex> lk(mu_);
      samples_.push_back({start, real_us(), late});
      while (!samples_.empty() &&
             samples_.front().end_us < samples_.back().end_us - kKeepUs) {
        samples_.pop_front();
      }
    }
  }

  std::mutex mu_;
  std::deque<Sample> samples_;
  std::atomic<bool> stop_{false};
  std::thread thread_;  // last: starts after the members it uses
};

}  // namespace baton::torture

#endif  // BATON_TESTS_TORTURE_STARVATION_H_
