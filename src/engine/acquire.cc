// engine/acquire.cc — one acquire (try, blocking, shared) driven through a
// store's Request: ask, wait for a change, look, withdraw.
#include <algorithm>
#include <optional>

#include "core/jitter.h"
#include "core/request.h"
#include "engine/engine.h"
#include "engine/messages.h"
#include "engine/wait.h"

namespace baton::engine {

// One call of Engine::acquire.
class AcquireCall {
 public:
  AcquireCall(const Engine& e, AcquireSpec spec, milliseconds wait,
              std::stop_token stop, WaitHook on_wait)
      : e_(e),
        spec_(std::move(spec)),
        wait_(wait),
        is_try_(wait == milliseconds::zero()),
        stop_(is_try_ ? std::stop_token{} : std::move(stop)),
        span_(e.clock(), wait, e.policy().request_timeout),
        ctx_(span_.deadline, stop_, e.policy().clock),
        on_wait_(is_try_ ? WaitHook{} : std::move(on_wait)) {}

  Result<Timed> run() {
    if (stop_.stop_requested()) return cancelled({spec_.name});
    // A repeat of an abandoned call (rule 17) must not be withdrawn.
    e_.settler_->claim(spec_.token);
    Result<Timed> r = attempts();
    if (stopped()) {
      if (r.ok()) give_back(r->grant);
      // A request the store may still have queued (an ask cut short).
      (void)e_.call(
          [&](const CallContext& c) {
            return e_.store().release(spec_.name, spec_.token, c);
          },
          false);
      if (asked_) waiting(std::nullopt);
      return cancelled({spec_.name});
    }
    if (r.ok()) return r;
    const Errc code = r.error().code();
    if (asked_ && code == Errc::timeout) waiting(std::nullopt);
    if (ctx_.expired() &&
        (code == Errc::timeout || code == Errc::unavailable)) {
      // Cut short at the call deadline: the request may still be queued or
      // be granted later; withdraw it in the background.
      e_.settler_->withdraw(e_.store_ptr(), {spec_.name}, spec_.token);
      if (is_try_) return e_.no_answer(r.error());
      if (asked_) waiting(std::nullopt);
      return cut_at_deadline(spec_.name, wait_, e_.store().safe_url(),
                             r.error());
    }
    return r;
  }

 private:
  bool stopped() const { return stop_.stop_requested(); }

  // The requests of the call, retried after `unavailable` (and after a
  // grant that arrived too late) while the wait lasts.
  Result<Timed> attempts() {
    if (on_wait_ && !e_.answers_queued_.load(std::memory_order_relaxed)) {
      if (auto r = probe()) return std::move(*r);
    }
    Result<Timed> r = Error(Errc::internal, "not run");
    for (int attempt = 1;;) {
      late_ = false;
      r = one_request();
      if (r.ok() || stopped()) break;
      if (late_) {
        // A fresh request with a fresh token, while the wait goes on.
        if (is_try_ || span_.over(e_.clock())) break;
        continue;
      }
      const auto pause =
          e_.retry_pause(r.error(), &attempt, span_.retry_until(), !is_try_);
      if (!pause) break;
      e_.sleep_until(e_.clock().now() + *pause, stop_);
      if (stopped()) break;
    }
    return r;
  }

  // Tells the hook, once, that the request waits.
  void waiting(std::optional<std::uint64_t> position) {
    if (!on_wait_ || waited_) return;
    waited_ = true;
    on_wait_(position);
  }

  // A `queued` answer: the store shows its waits (see WaitHook).
  void queued(const Answer& a) {
    e_.answers_queued_.store(true, std::memory_order_relaxed);
    waiting(a.position > 0 ? std::optional<std::uint64_t>(a.position - 1)
                           : std::nullopt);
  }

  // A hooked wait on a store that may hold a waiting ask's reply: a try
  // first, so that the wait's start is known when it starts. An answer
  // ends the call (a grant, a final refusal); nullopt: the wait goes on
  // (the try's errors are met again, and retried, by the wait's asks).
  std::optional<Result<Timed>> probe() {
    std::unique_ptr<Request> req = e_.store().request(spec_);
    Interrupter interrupter(stop_, *req);
    const time_point sent = e_.clock().now();
    auto a = req->ask(AskMode::try_only, milliseconds::zero(), ctx_);
    if (!a.ok() || stopped()) return std::nullopt;
    switch (a->kind) {
      case Answer::Kind::granted: {
        Result<Timed> r = accept(a->grant, sent);
        if (late_) return std::nullopt;  // ended; wait with a fresh token
        return r;
      }
      case Answer::Kind::refused:
        if (a->error.code() != Errc::not_acquired) return std::move(a->error);
        waiting(std::nullopt);
        return std::nullopt;
      case Answer::Kind::queued:  // a store that queues a try (a bug)
        if (!a->gone) (void)req->withdraw(ctx_);
        queued(*a);
        return std::nullopt;
      case Answer::Kind::expired:
        break;
    }
    return std::nullopt;
  }

  // The lease answered to an ask sent at `sent`, or — if it arrived after
  // its own safe deadline — given back, with a fresh token for the rest of
  // the wait (that lease has ended; stores refuse an ended token).
  Result<Timed> accept(const Grant& g, time_point sent) {
    if (!e_.policy().fresh || e_.policy().fresh(g, sent)) {
      return Timed{g, sent};
    }
    give_back(g);
    spec_.token = OwnerToken::random();
    late_ = true;
    return arrived_late(spec_.name);
  }

  // Gives a lease back by the call's deadline (rule 7: a blocking acquire
  // answers by the end of its wait + the grace); a release that has not
  // answered by then is finished in the background.
  void give_back(const Grant& g) {
    auto r = e_.call(
        [&](const CallContext& c) {
          return e_.store().release(g.name, g.token, c);
        },
        true, ctx_.deadline());
    if (!r.ok()) e_.settler_->withdraw(e_.store_ptr(), {g.name}, g.token);
  }

  Result<Timed> one_request() {
    std::unique_ptr<Request> req = e_.store().request(spec_);
    Interrupter interrupter(stop_, *req);
    const time_point sent = e_.clock().now();
    if (is_try_) return try_once(*req, sent);
    asked_ = true;
    Result<Answer> a = req->ask(AskMode::wait, span_.left(e_.clock()), ctx_);
    for (;;) {
      if (!a.ok()) {
        if (stopped()) break;
        return std::move(a).error();
      }
      switch (a->kind) {
        case Answer::Kind::granted:
          if (stopped()) {
            give_back(a->grant);
            return cancelled({spec_.name});
          }
          return accept(a->grant, sent);
        case Answer::Kind::refused:
          return std::move(a->error);
        case Answer::Kind::expired:
          if (!span_.over(e_.clock()) && !stopped()) {
            // The store's own wait (at most 7 days) ended; ours goes on.
            a = req->ask(AskMode::wait, span_.left(e_.clock()), ctx_);
            continue;
          }
          break;
        case Answer::Kind::queued:
          if (on_wait_) queued(*a);
          if (auto next = next_answer(*req, *a)) {
            a = std::move(*next);
            continue;
          }
          break;
      }
      break;
    }
    return withdraw(*req, a.ok() && a->gone, sent);
  }

  // A try: granted or refused, never left queued.
  Result<Timed> try_once(Request& req, time_point sent) {
    auto a = req.ask(AskMode::try_only, milliseconds::zero(), ctx_);
    if (!a.ok()) return std::move(a).error();
    if (a->kind == Answer::Kind::granted) return accept(a->grant, sent);
    if (a->kind == Answer::Kind::refused) return std::move(a->error);
    if (!a->gone) (void)req.withdraw(ctx_);
    return not_free(spec_.name);
  }

  // While queued: waits for a change or the next look, then looks.
  // nullopt: the wait is over (or stopped); withdraw.
  std::optional<Result<Answer>> next_answer(Request& req, const Answer& a) {
    if (stopped() || span_.over(e_.clock())) return std::nullopt;
    if (a.look_at == time_point::min()) {
      return req.look(span_.left(e_.clock()), ctx_);
    }
    const time_point until =
        std::min({span_.end, a.look_at,
                  e_.clock().now() +
                      core::jittered(e_.store().recheck_interval(), 1.0, 3.0)});
    std::optional<Grant> pushed = req.wait_change(until, ctx_);
    if (pushed) return Answer::granted_with(std::move(*pushed));
    if (stopped() || span_.over(e_.clock())) return std::nullopt;
    return req.look(span_.left(e_.clock()), ctx_);
  }

  // The wait is over: leave the queue, or take the grant that came in.
  Result<Timed> withdraw(Request& req, bool gone, time_point sent) {
    if (!gone) {
      Result<Answer> w = withdraw_with_retries(req, ctx_);
      if (w.ok() && w->kind == Answer::Kind::granted) {
        if (stopped()) {
          give_back(w->grant);
          return cancelled({spec_.name});
        }
        return accept(w->grant, sent);
      }
      if (!w.ok()) {
        e_.settler_->withdraw(e_.store_ptr(), {spec_.name}, spec_.token);
        if (!stopped() && w.error().code() != Errc::timeout) {
          return std::move(w).error();
        }
      }
    }
    if (stopped()) return cancelled({spec_.name});
    return not_granted(spec_.name, wait_);
  }

  const Engine& e_;
  AcquireSpec spec_;
  const milliseconds wait_;
  const bool is_try_;
  const std::stop_token stop_;
  const Span span_;
  const CallContext ctx_;
  const WaitHook on_wait_;  // empty for a try
  bool late_ = false;       // the last request's grant arrived too late
  bool asked_ = false;      // a blocking ask was sent
  bool waited_ = false;     // on_wait_ was called
};

Result<Timed> Engine::acquire(AcquireSpec spec, milliseconds wait,
                              std::stop_token stop, WaitHook on_wait) const {
  return AcquireCall(*this, std::move(spec), wait, std::move(stop),
                     std::move(on_wait))
      .run();
}

}  // namespace baton::engine
