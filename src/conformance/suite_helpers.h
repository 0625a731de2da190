// conformance/suite_helpers.h — small helpers shared by the suite.
#ifndef BATON_CONFORMANCE_SUITE_HELPERS_H_
#define BATON_CONFORMANCE_SUITE_HELPERS_H_

#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "baton/client.h"
#include "baton/options.h"

namespace baton::conformance {

using namespace std::chrono_literals;
using std::chrono::milliseconds;
using std::chrono::steady_clock;

// Sanitizer builds look for memory, undefined-behaviour and threading errors,
// not for a rare interleaving, and run 3-10x slower: they run the heaviest
// loops at a quarter of the count. scripts/test runs the normal build's suite
// in full first, on every store.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr int kSanitizerDivisor = 4;
#else
inline constexpr int kSanitizerDivisor = 1;
#endif

inline AcquireOptions opts(milliseconds ttl, std::uint32_t capacity = 1,
                           std::string label = {}) {
  AcquireOptions o;
  o.ttl = ttl;
  o.capacity = capacity;
  o.label = std::move(label);
  return o;
}

// Polls `cond` every 5 ms until it holds or `limit` passes.
inline bool eventually(const std::function<bool()>& cond,
                       milliseconds limit = 10s) {
  const auto end = steady_clock::now() + limit;
  while (steady_clock::now() < end) {
    if (cond()) return true;
    std::this_thread::sleep_for(5ms);
  }
  return cond();
}

// Number of waiters describe() reports (-1 on error).
inline int waiters_of(const Client& c, const std::string& name) {
  auto info = c.describe(name);
  return info.ok() ? static_cast<int>(info->waiters.size()) : -1;
}

// Whether none of `names` has a waiter (false on a describe error).
inline bool no_waiters_on(const Client& c,
                          const std::vector<std::string>& names) {
  for (const auto& n : names) {
    if (waiters_of(c, n) != 0) return false;
  }
  return true;
}

// The grace after the end of a wait by which a call must return: its call
// deadline (rule 7, docs/contract.md).
inline constexpr milliseconds kCallDeadlineGrace{50};

// Rule 7 for a wait of `wait` that gave up after `took` (measured around the
// call): one that returned by its call deadline has left every queue at once;
// one that returned later gave up on a slow store (a loaded machine under
// ASan) and withdrew in the background, so its request is gone a moment
// later, never after a heartbeat or a TTL.
inline bool queues_clear_after_wait(const Client& c,
                                    const std::vector<std::string>& names,
                                    steady_clock::duration took,
                                    milliseconds wait) {
  if (took <= wait + kCallDeadlineGrace) return no_waiters_on(c, names);
  return eventually([&] { return no_waiters_on(c, names); }, 1s);
}

}  // namespace baton::conformance

#endif  // BATON_CONFORMANCE_SUITE_HELPERS_H_
