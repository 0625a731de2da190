// stores/call_deadline.h — the instant by which the caller of the store call
// running on this thread needs its answer.
//
// Rule 7: a blocking acquire waits at most `wait`, also when the store or
// the network misbehaves. The client sets a call deadline around each
// blocking store call (the end of the wait plus a short grace for the reply
// to travel); a store caps every I/O timeout, connect back-off and re-check
// sleep with it. When the deadline passes with no answer, the store gives
// up with Errc::timeout and never reuses that connection (a late reply
// must not be read as the answer to a later call). The outcome of such a
// call is unknown — the request may have been queued or even granted — so
// the client withdraws it by owner token (rule 17) in the background.
#ifndef BATON_STORES_CALL_DEADLINE_H_
#define BATON_STORES_CALL_DEADLINE_H_

#include <algorithm>
#include <chrono>

namespace baton::store {

using SteadyTime = std::chrono::steady_clock::time_point;

namespace detail {
inline thread_local SteadyTime call_deadline = SteadyTime::max();
}  // namespace detail

// The deadline of the store call running on this thread (max() = none).
inline SteadyTime call_deadline() { return detail::call_deadline; }

// `t` capped at the call deadline.
inline SteadyTime cap_to_call_deadline(SteadyTime t) {
  return std::min(t, detail::call_deadline);
}

// True once the call deadline (if any) has passed.
inline bool call_deadline_passed() {
  return detail::call_deadline != SteadyTime::max() &&
         std::chrono::steady_clock::now() >= detail::call_deadline;
}

// Sets the call deadline for this scope (never later than an enclosing one)
// and restores the previous one on exit.
class CallDeadlineScope {
 public:
  explicit CallDeadlineScope(SteadyTime deadline)
      : saved_(detail::call_deadline) {
    detail::call_deadline = std::min(deadline, saved_);
  }
  ~CallDeadlineScope() { detail::call_deadline = saved_; }
  CallDeadlineScope(const CallDeadlineScope&) = delete;
  CallDeadlineScope& operator=(const CallDeadlineScope&) = delete;

 private:
  SteadyTime saved_;
};

}  // namespace baton::store

#endif  // BATON_STORES_CALL_DEADLINE_H_
