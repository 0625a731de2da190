// engine/engine.h — the one waiting engine above every store.
//
// A Store (baton/store.h) offers primitives: ask, look, withdraw, a wake-up
// source, and single calls (extend, release, describe, ...). The engine
// owns everything else about a call:
//   - waiting until the wait's end, and no longer (rule 7): the call
//     context's deadline is the end of the wait plus kReplyGrace for a
//     blocking acquire, request_timeout for a try or a single call;
//   - re-check pacing: a waiter nobody wakes looks again after a jittered
//     1x..3x of the store's recheck_interval(), or at the answer's look_at;
//   - cancellation: a stop requested on the caller's stop token interrupts
//     the wait; the request is withdrawn and a lease granted meanwhile is
//     given back; the answer is `cancelled`;
//   - withdrawing when the wait ends (retried; a withdraw that cannot
//     finish, or a call cut short at its deadline, is handed to the
//     background Settler, which withdraws by owner token for a few seconds
//     more);
//   - retrying after `unavailable` with the same owner token (rule 17),
//     with jittered exponential backoff, up to max_retries;
//   - a grant that arrives after its own safe deadline is given back (by
//     the call's deadline; a release that has not answered by then goes
//     to the Settler) and the wait goes on with a fresh owner token (rule
//     14);
//   - acquire_some / acquire_all waits;
//   - every error message a wait can produce.
//
// Time is read only from the policy's clock (tests inject a ManualClock),
// so the engine's tests are deterministic and never sleep.
//
// Thread safety: an Engine is immutable after construction (but for one
// atomic flag it learns about its store); all methods
// may be called from any thread at once (the Store is thread-safe by
// contract).
#ifndef BATON_ENGINE_ENGINE_H_
#define BATON_ENGINE_ENGINE_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "baton/clock.h"
#include "baton/error.h"
#include "baton/store.h"
#include "engine/settle.h"

namespace baton::engine {

using time_point = Clock::time_point;

// A blocking acquire answers at most this long after its wait ends: the
// store is asked to wait until the end, and the grace covers the reply's
// trip back.
inline constexpr milliseconds kReplyGrace{50};

struct Policy {
  std::shared_ptr<const Clock> clock;  // null = the steady clock
  // The longest any single call waits for the store, retries included;
  // a try's whole budget.
  milliseconds request_timeout{5'000};
  // First pause before a retry after `unavailable`; x2 each time up to
  // 2 s, jittered.
  milliseconds retry_interval{100};
  int max_retries = 3;
  // Whether a grant answered to an ask sent at `sent` may still be handed
  // out (its local safe deadline is ahead). Null = always.
  std::function<bool(const Grant& g, time_point sent)> fresh;
};

// Called once by a blocking acquire when it learns that its request waits
// (the lock was not free at once), with the request's 0-based place in the
// lock's queue when the store reports it. Runs on the caller's thread,
// before the call answers. Empty = not wanted (no extra work is done).
//
// A store whose blocking ask answers `queued` shows the wait at once
// (baton:// does with a batond that takes LOCK.ACQUIRE … QUEUED). A
// store that holds a waiting ask's reply until the grant cannot:
// until this engine has seen its store answer `queued`, a single-lock
// blocking acquire with a hook first asks with try_only — one round trip,
// as a wait granted at once would take — and a refusal is the start of the
// wait (place unknown). At the latest the hook fires when a wait that sent
// a request ends without a grant.
using WaitHook = std::function<void(std::optional<std::uint64_t> position)>;

// A grant and the local time just before the ask its valid_for counts
// from.
struct Timed {
  Grant grant;
  time_point sent;
};

class Engine {
 public:
  Engine(std::shared_ptr<Store> store, Policy policy);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // try (wait 0) / acquire / acquire_shared of a validated spec. `stop`
  // may end a blocking wait early (`cancelled`).
  Result<Timed> acquire(AcquireSpec spec, milliseconds wait,
                        std::stop_token stop, WaitHook on_wait = {}) const;
  // acquire_some / acquire_all of a validated spec. `on_wait` fires once
  // (place unknown) when the store reports the call must wait, or at the
  // latest when a wait ends without every name granted.
  Result<std::vector<Timed>> acquire_multi(const MultiSpec& spec,
                                           milliseconds wait,
                                           std::stop_token stop,
                                           WaitHook on_wait = {}) const;

  // A single call `f(ctx)` (extend, release, describe, counters, ...):
  // its context's deadline is request_timeout from now (or `deadline` if
  // earlier); `unavailable` answers are retried with the same inputs while
  // retries and time remain. An answer cut short by the deadline is
  // `unavailable` naming the store and the timeout. `retry` = false: one
  // attempt (a counter add has no request id).
  template <typename F>
  auto call(F&& f, bool retry = true,
            time_point deadline = time_point::max()) const
      -> decltype(f(std::declval<const CallContext&>()));

  Store& store() const { return *store_; }
  const std::shared_ptr<Store>& store_ptr() const { return store_; }
  const Policy& policy() const { return policy_; }
  const Clock& clock() const { return *policy_.clock; }
  // Background withdrawals not yet finished (tests).
  std::size_t pending_withdrawals() const { return settler_->pending(); }

  // "no answer from <url> within <request_timeout>: <cause>".
  Error no_answer(const Error& cause) const;
  // The pause before retry number `attempt` (1-based) after `unavailable`.
  milliseconds backoff(int attempt) const;
  // The pause before the next try after the error `e`, or nullopt when the
  // call answers `e` now: not `unavailable`, retries used up, or the pause
  // would end at or past `until`. The pause is the store's
  // Error::retry_after if it gave one, else backoff(*attempt); it counts
  // as a retry (*attempt grows by one) except within a blocking acquire's
  // wait (`waiting`): a caller that waits for the lock waits as well for a
  // store that said when it can answer.
  std::optional<milliseconds> retry_pause(const Error& e, int* attempt,
                                          time_point until,
                                          bool waiting = false) const;
  // Sleeps until `t` on the policy's clock, waking early on `stop`.
  void sleep_until(time_point t, const std::stop_token& stop) const;

 private:
  friend class AcquireCall;
  friend class MultiCall;

  std::shared_ptr<Store> store_;
  Policy policy_;
  std::shared_ptr<Settler> settler_;
  // Set once a blocking ask or look of this store answered `queued`: its
  // waits show themselves, so a hooked acquire needs no try first (the one
  // member that changes after construction).
  mutable std::atomic<bool> answers_queued_{false};
};

template <typename F>
auto Engine::call(F&& f, bool retry, time_point deadline) const
    -> decltype(f(std::declval<const CallContext&>())) {
  const auto now = policy_.clock->now();
  const time_point d = std::min(deadline, now + policy_.request_timeout);
  const CallContext ctx(d, {}, policy_.clock);
  for (int attempt = 1;;) {
    auto r = f(ctx);
    if (r.ok()) return r;
    const Errc code = r.error().code();
    const bool cut =
        ctx.expired() && (code == Errc::timeout || code == Errc::unavailable);
    if (cut) return no_answer(r.error());
    if (!retry) return r;
    const auto pause = retry_pause(r.error(), &attempt, d);
    if (!pause) return r;
    sleep_until(policy_.clock->now() + *pause, {});
  }
}

}  // namespace baton::engine

#endif  // BATON_ENGINE_ENGINE_H_
