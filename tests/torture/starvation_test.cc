// tests/torture/starvation_test.cc — RunQueueWait (starvation.h) counts the
// time a call's threads were runnable but had no CPU, and nothing else: a
// thread that sleeps or blocks is not excused by it.
#include "tests/torture/starvation.h"

#include <gtest/gtest.h>
#include <sched.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace baton::torture {
namespace {

using Steady = std::chrono::steady_clock;

void spin_for(std::chrono::milliseconds d) {
  const auto end = Steady::now() + d;
  while (Steady::now() < end) {
  }
}

bool pin_to_first_cpu() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return false;
  int first = -1;
  for (int c = 0; c < CPU_SETSIZE && first < 0; ++c) {
    if (CPU_ISSET(c, &set)) first = c;
  }
  CPU_ZERO(&set);
  CPU_SET(first, &set);
  return sched_setaffinity(0, sizeof set, &set) == 0;
}

TEST(RunQueueWait, ASleepingThreadWaitsForNoCpu) {
  const auto before = RunQueueWait::now();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  // Counted, a 200 ms sleep would show as at least 200 ms; the wake-up
  // itself may wait for a CPU on a busy machine.
  EXPECT_LT(RunQueueWait::now().since(before), 100'000);
}

TEST(RunQueueWait, ThreadsSharingOneCpuAreCounted) {
  // Three spinning threads on one CPU for 300 ms: each is runnable about
  // 2/3 of that time without running.
  std::thread pinned([] {
    ASSERT_TRUE(pin_to_first_cpu());
    const auto before = RunQueueWait::now();
    std::atomic<bool> go{false};
    std::vector<std::thread> others;
    for (int i = 0; i < 2; ++i) {
      others.emplace_back([&] {
        ASSERT_TRUE(pin_to_first_cpu());
        while (!go) std::this_thread::yield();
        spin_for(std::chrono::milliseconds(300));
      });
    }
    go = true;
    spin_for(std::chrono::milliseconds(300));
    for (auto& t : others) t.join();
    // Own wait plus the largest other thread's wait, in µs.
    EXPECT_GT(RunQueueWait::now().since(before), 100'000);
  });
  pinned.join();
}

}  // namespace
}  // namespace baton::torture
