// engine/wait.h — what the engine's single and multi-lock waits share
// (internal): the span of a wait, the stop hook, and the withdraw with
// retries.
//
// Thread safety: a Span is a value; an Interrupter belongs to one call.
#ifndef BATON_ENGINE_WAIT_H_
#define BATON_ENGINE_WAIT_H_

#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <stop_token>

#include "baton/clock.h"
#include "baton/options.h"
#include "baton/store.h"
#include "core/request.h"
#include "engine/engine.h"

namespace baton::engine {

// When a wait ends, and by when its caller needs the answer.
struct Span {
  Span(const Clock& clock, milliseconds wait, milliseconds request_timeout)
      : start(clock.now()),
        is_try(wait <= milliseconds::zero()),
        end(core::is_forever(wait) ? time_point::max() : start + wait),
        deadline(is_try                     ? start + request_timeout
                 : end == time_point::max() ? time_point::max()
                                            : end + kReplyGrace) {}

  bool over(const Clock& clock) const {
    return end != time_point::max() && clock.now() >= end;
  }
  // What is left of the wait, as one store request may wait it: at most
  // 7 days (longer waits ask again with the same owner token).
  milliseconds left(const Clock& clock) const {
    const auto now = clock.now();
    if (now >= end) return milliseconds::zero();
    if (end - now >= kMaxTtl) return kMaxTtl;
    return std::chrono::ceil<milliseconds>(end - now);
  }
  // Retries after `unavailable` stop here.
  time_point retry_until() const { return is_try ? deadline : end; }

  time_point start;
  bool is_try;
  time_point end;
  time_point deadline;
};

// Interrupts `w`'s waits (and a blocking ask) once a stop is requested.
// (On the heap, not in a std::optional: g++ 12 at -O3 warns that the
// optional's callback may be used uninitialized, which -Werror refuses.)
class Interrupter {
 public:
  Interrupter(const std::stop_token& stop, Waitable& w) {
    if (stop.stop_possible()) {
      cb_ = std::make_unique<std::stop_callback<std::function<void()>>>(
          stop, [&w] { w.interrupt(); });
    }
  }

 private:
  std::unique_ptr<std::stop_callback<std::function<void()>>> cb_;
};

// The wait is over: withdraw, retrying `unavailable` a few times with
// growing pauses, never past the call's deadline.
template <typename R>
auto withdraw_with_retries(R& req, const CallContext& ctx)
    -> decltype(req.withdraw(ctx)) {
  constexpr int kAttempts = 4;
  auto last = req.withdraw(ctx);
  for (int attempt = 1; attempt < kAttempts; ++attempt) {
    if (last.ok() || last.error().code() != Errc::unavailable) break;
    const auto until = ctx.cap(ctx.now() + milliseconds{50 << attempt});
    if (ctx.now() >= until) break;
    ctx.clock().sleep_until(until);
    last = req.withdraw(ctx);
  }
  return last;
}

}  // namespace baton::engine

#endif  // BATON_ENGINE_WAIT_H_
