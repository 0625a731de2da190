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
// The probe sees a stall of the whole process only. A call's own threads
// can wait for a CPU while the probe runs (Redlock's rounds hop between the
// calling thread and pooled threads; a 166 ms poll() of such a thread
// returned after 230 ms on a busy machine). RunQueueWait reads each
// thread's run-queue wait from the kernel (/proc/self/task/<tid>/schedstat,
// the time it was runnable but not running) before and after a call: the
// calling thread's own wait plus the largest wait of any other thread of
// the process is the CPU the call could not get. A thread blocked in I/O
// or sleeping past its deadline is not runnable, and a thread spinning is
// running: neither is counted, so a library that waits too long is still
// caught.
//
// Thread safety: every member function may be called from any thread.
#ifndef BATON_TESTS_TORTURE_STARVATION_H_
#define BATON_TESTS_TORTURE_STARVATION_H_

#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <string>
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

// Per-thread run-queue waits of this process at one instant (see above).
class RunQueueWait {
 public:
  static RunQueueWait now() {
    RunQueueWait w;
    w.self_ = static_cast<long>(::syscall(SYS_gettid));
    std::error_code ec;
    for (const auto& e :
         std::filesystem::directory_iterator("/proc/self/task", ec)) {
      std::ifstream in(e.path() / "schedstat");
      std::int64_t on_cpu = 0, waited_ns = 0;
      if (in >> on_cpu >> waited_ns) {
        w.ns_[std::stol(e.path().filename().string())] = waited_ns;
      }
    }
    return w;
  }
  // µs the calling thread (the one that took `before`) and, at most, one
  // other thread waited for a CPU between `before` and this snapshot.
  std::int64_t since(const RunQueueWait& before) const {
    std::int64_t own = 0, other = 0;
    for (const auto& [tid, ns] : ns_) {
      auto it = before.ns_.find(tid);
      const std::int64_t d = ns - (it == before.ns_.end() ? 0 : it->second);
      if (tid == before.self_) {
        own = d;
      } else {
        other = std::max(other, d);
      }
    }
    return (own + other) / 1000;
  }

 private:
  long self_ = 0;
  std::map<long, std::int64_t> ns_;
};

}  // namespace baton::torture

#endif  // BATON_TESTS_TORTURE_STARVATION_H_
