// core/store.cc — the parts of the public Store interface (baton/store.h)
// that are not virtual: the call context, answers, and the default wake-up
// source (a sleep that interrupt() cuts short).
#include "baton/store.h"

#include <utility>

namespace baton {

CallContext::CallContext()
    : deadline_(time_point::max()), clock_(Clock::steady()) {}

CallContext::CallContext(time_point deadline, std::stop_token stop,
                         std::shared_ptr<const Clock> clock)
    : deadline_(deadline),
      stop_(std::move(stop)),
      clock_(clock ? std::move(clock) : Clock::steady()) {}

bool CallContext::expired() const {
  return deadline_ != time_point::max() && clock_->now() >= deadline_;
}

milliseconds CallContext::left() const {
  if (deadline_ == time_point::max()) return milliseconds::max();
  const auto now = clock_->now();
  if (now >= deadline_) return milliseconds::zero();
  return std::chrono::ceil<milliseconds>(deadline_ - now);
}

CallContext CallContext::narrowed(time_point t) const {
  CallContext c = *this;
  c.deadline_ = cap(t);
  return c;
}

Answer Answer::granted_with(Grant g) {
  Answer a;
  a.kind = Kind::granted;
  a.grant = std::move(g);
  return a;
}

Answer Answer::refused_with(Error e, bool gone) {
  Answer a;
  a.kind = Kind::refused;
  a.error = std::move(e);
  a.gone = gone;
  return a;
}

std::optional<Grant> Waitable::wait_change(Clock::time_point until,
                                           const CallContext& ctx) {
  std::unique_lock<std::mutex> lk(mu_);
  const auto t = ctx.cap(until);
  while (!interrupted_ && ctx.now() < t) {
    ctx.clock().wait_until(cv_, lk, t);
  }
  return std::nullopt;
}

void Waitable::interrupt() {
  std::lock_guard<std::mutex> lk(mu_);
  interrupted_ = true;
  cv_.notify_all();
}

bool Waitable::interrupted() const {
  std::lock_guard<std::mutex> lk(mu_);
  return interrupted_;
}

Result<Answer> Request::look(milliseconds wait_left, const CallContext& ctx) {
  return ask(AskMode::wait, wait_left, ctx);
}

Result<MultiAnswer> MultiRequest::look(milliseconds wait_left,
                                       const CallContext& ctx) {
  return ask(AskMode::wait, wait_left, ctx);
}

}  // namespace baton
