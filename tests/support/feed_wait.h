// tests/support/feed_wait.h — one wait on a change feed (Store::watch),
// timed: what the feed tests of every store measure.
#ifndef BATON_TESTS_SUPPORT_FEED_WAIT_H_
#define BATON_TESTS_SUPPORT_FEED_WAIT_H_

#include <chrono>

#include "baton/clock.h"
#include "baton/store.h"

namespace baton::testing {

// One wait_change() of `feed`, at most `limit` (its call deadline 5 s
// later); how long it took.
inline std::chrono::steady_clock::duration wait_once(
    Waitable& feed, std::chrono::steady_clock::duration limit) {
  const auto start = std::chrono::steady_clock::now();
  const auto now = ::baton::Clock::steady()->now();
  const auto until = now + limit;
  (void)feed.wait_change(
      until, ::baton::CallContext(until + std::chrono::seconds(5), {},
                                  ::baton::Clock::steady()));
  return std::chrono::steady_clock::now() - start;
}

}  // namespace baton::testing

#endif  // BATON_TESTS_SUPPORT_FEED_WAIT_H_
