// engine/multi.cc — acquire_some / acquire_all driven through a store's
// MultiRequest (rule 11).
#include <algorithm>
#include <optional>

#include "core/jitter.h"
#include "engine/engine.h"
#include "engine/messages.h"
#include "engine/wait.h"

namespace baton::engine {

// One call of Engine::acquire_multi.
class MultiCall {
 public:
  MultiCall(const Engine& e, const MultiSpec& spec, milliseconds wait,
            std::stop_token stop, WaitHook on_wait)
      : e_(e),
        spec_(spec),
        wait_(wait),
        is_try_(wait == milliseconds::zero()),
        stop_(is_try_ ? std::stop_token{} : std::move(stop)),
        span_(e.clock(), wait, e.policy().request_timeout),
        ctx_(span_.deadline, stop_, e.policy().clock),
        on_wait_(is_try_ ? WaitHook{} : std::move(on_wait)) {}

  Result<std::vector<Timed>> run() {
    if (stop_.stop_requested()) return cancelled(spec_.names);
    e_.settler_->claim(spec_.reservation);
    Result<std::vector<Timed>> r = Error(Errc::internal, "not run");
    for (int attempt = 1;;) {
      r = one_request();
      if (r.ok() || stopped()) break;
      const auto pause =
          e_.retry_pause(r.error(), &attempt, span_.retry_until(), !is_try_);
      if (!pause) break;
      e_.sleep_until(e_.clock().now() + *pause, stop_);
      if (stopped()) break;
    }
    if (stopped()) {
      if (r.ok()) give_back(*r);
      for (const auto& n : spec_.names) {
        (void)e_.call(
            [&](const CallContext& c) {
              return e_.store().release(n, spec_.reservation, c);
            },
            false);
      }
      if (asked_) waiting();
      return cancelled(spec_.names);
    }
    if (r.ok()) return r;
    const Errc code = r.error().code();
    if (asked_ && code == Errc::timeout) waiting();
    if (ctx_.expired() &&
        (code == Errc::timeout || code == Errc::unavailable)) {
      e_.settler_->withdraw(e_.store_ptr(), spec_.names, spec_.reservation);
      if (is_try_) return e_.no_answer(r.error());
      if (spec_.all_or_nothing) {
        if (asked_) waiting();
        return not_all_granted(spec_.names.size(), wait_);
      }
    }
    return r;
  }

 private:
  bool stopped() const { return stop_.stop_requested(); }
  bool all() const { return spec_.all_or_nothing; }

  // Tells the hook, once, that the call waits.
  void waiting() {
    if (!on_wait_ || waited_) return;
    waited_ = true;
    on_wait_(std::nullopt);
  }

  // Whether `a` ends the call with its grants.
  bool decided(const MultiAnswer& a) const {
    if (all()) return a.pending == 0 && a.grants.size() == spec_.names.size();
    return !a.grants.empty() || a.pending == 0 || is_try_;
  }

  // As AcquireCall::give_back: by the call's deadline, the rest in the
  // background.
  void give_back(const std::vector<Timed>& leases) {
    for (const auto& t : leases) {
      auto r = e_.call(
          [&](const CallContext& c) {
            return e_.store().release(t.grant.name, t.grant.token, c);
          },
          true, ctx_.deadline());
      if (!r.ok()) {
        e_.settler_->withdraw(e_.store_ptr(), {t.grant.name}, t.grant.token);
      }
    }
  }
  void give_back(const std::vector<Grant>& grants) {
    for (const auto& g : grants) give_back({Timed{g, {}}});
  }

  // The grants of `a`, answered to an ask sent at `sent`; all given back
  // if any arrived after its own safe deadline (a partial answer of
  // acquire_all is no answer).
  Result<std::vector<Timed>> accept(const MultiAnswer& a, time_point sent) {
    std::vector<Timed> out;
    bool late = false;
    for (const auto& g : a.grants) {
      late |= e_.policy().fresh && !e_.policy().fresh(g, sent);
      out.push_back({g, sent});
    }
    if (!late) return out;
    give_back(out);
    return arrived_late_multi();
  }

  Result<std::vector<Timed>> one_request() {
    std::unique_ptr<MultiRequest> req = e_.store().request_multi(spec_);
    Interrupter interrupter(stop_, *req);
    const time_point sent = e_.clock().now();
    const AskMode mode = all() && is_try_ ? AskMode::try_only : AskMode::wait;
    asked_ = asked_ || !is_try_;
    Result<MultiAnswer> a = req->ask(mode, span_.left(e_.clock()), ctx_);
    for (;;) {
      if (!a.ok()) {
        if (stopped()) break;
        return std::move(a).error();
      }
      if (a->kind == MultiAnswer::Kind::refused) return std::move(a->error);
      if (a->kind == MultiAnswer::Kind::progress && decided(*a)) {
        if (stopped()) {
          give_back(a->grants);
          return cancelled(spec_.names);
        }
        return accept(*a, sent);
      }
      if (stopped()) break;
      if (a->kind == MultiAnswer::Kind::progress) waiting();
      if (span_.over(e_.clock()) || a->kind == MultiAnswer::Kind::expired ||
          (all() && is_try_)) {
        // acquire_some reports what it holds now; its other requests stay
        // queued spec.ttl after this call.
        if (!all()) {
          if (a->kind == MultiAnswer::Kind::progress) return accept(*a, sent);
          a = req->look(milliseconds::zero(), ctx_);
          if (a.ok() && a->kind == MultiAnswer::Kind::progress) {
            return accept(*a, sent);
          }
          if (!a.ok()) return std::move(a).error();
          return std::vector<Timed>{};
        }
        break;
      }
      a = next_answer(*req, *a);
    }
    return withdraw(*req, a.ok() && a->gone, sent);
  }

  Result<MultiAnswer> next_answer(MultiRequest& req, const MultiAnswer& a) {
    if (a.look_at != time_point::min()) {
      const time_point until = std::min(
          {span_.end, a.look_at,
           e_.clock().now() +
               core::jittered(e_.store().recheck_interval(), 1.0, 3.0)});
      (void)req.wait_change(until, ctx_);
    }
    return req.look(span_.left(e_.clock()), ctx_);
  }

  Result<std::vector<Timed>> withdraw(MultiRequest& req, bool gone,
                                      time_point sent) {
    if (!gone) {
      Result<MultiAnswer> w = withdraw_with_retries(req, ctx_);
      if (w.ok() && w->kind == MultiAnswer::Kind::progress && all() &&
          decided(*w)) {
        if (!stopped()) return accept(*w, sent);
        give_back(w->grants);
      }
      if (!w.ok()) {
        e_.settler_->withdraw(e_.store_ptr(), spec_.names, spec_.reservation);
        if (!stopped() && w.error().code() != Errc::timeout) {
          return std::move(w).error();
        }
      }
    }
    if (stopped()) return cancelled(spec_.names);
    return not_all_granted(spec_.names.size(), wait_);
  }

  const Engine& e_;
  const MultiSpec& spec_;
  const milliseconds wait_;
  const bool is_try_;
  const std::stop_token stop_;
  const Span span_;
  const CallContext ctx_;
  const WaitHook on_wait_;  // empty for a try
  bool asked_ = false;      // a blocking ask was sent
  bool waited_ = false;     // on_wait_ was called
};

Result<std::vector<Timed>> Engine::acquire_multi(const MultiSpec& spec,
                                                 milliseconds wait,
                                                 std::stop_token stop,
                                                 WaitHook on_wait) const {
  return MultiCall(*this, spec, wait, std::move(stop), std::move(on_wait))
      .run();
}

}  // namespace baton::engine
