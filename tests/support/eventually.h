// tests/support/eventually.h — waits (real time, bounded) until a condition
// holds: for reactions of background threads (a session's renewal and
// notice threads, a withdrawal) to something the test did. Never a timing
// assertion: it only bounds how long a test may hang.
#ifndef BATON_TESTS_SUPPORT_EVENTUALLY_H_
#define BATON_TESTS_SUPPORT_EVENTUALLY_H_

#include <chrono>
#include <functional>
#include <thread>

namespace baton::testing {

inline bool eventually(
    const std::function<bool()>& pred,
    std::chrono::milliseconds within = std::chrono::milliseconds(10'000)) {
  const auto end = std::chrono::steady_clock::now() + within;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

}  // namespace baton::testing

#endif  // BATON_TESTS_SUPPORT_EVENTUALLY_H_
