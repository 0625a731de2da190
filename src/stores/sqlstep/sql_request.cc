// stores/sqlstep/sql_request.cc — see sql_request.h.
#include "stores/sqlstep/sql_request.h"

#include <algorithm>

namespace baton::store::sqlstep {

using std::chrono::steady_clock;

SteadyTime io_deadline(const CallContext& ctx, milliseconds cap) {
  static const Clock* const steady = Clock::steady().get();
  const SteadyTime now = steady_clock::now();
  SteadyTime d = now + cap;
  if (ctx.deadline() == Clock::time_point::max()) return d;
  // On the steady clock (every call but a test's) the deadline is one.
  if (&ctx.clock() == steady) return std::min(d, ctx.deadline());
  return std::min(d, now + (ctx.deadline() - ctx.now()));
}

SteadyTime steady_of(Clock::time_point t, const CallContext& ctx) {
  if (t == Clock::time_point::max()) return SteadyTime::max();
  return steady_clock::now() + (t - ctx.now());
}

std::uint64_t LocalBell::generation() {
  std::lock_guard<std::mutex> lk(mu_);
  return gen_;
}

void LocalBell::ring() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    ++gen_;
  }
  cv_.notify_all();
}

void LocalBell::poke() {
  { std::lock_guard<std::mutex> lk(mu_); }
  cv_.notify_all();
}

void wait_slice(std::condition_variable& cv, std::unique_lock<std::mutex>& lk,
                SteadyTime until) {
  const auto slice = std::min<steady_clock::duration>(
      until - steady_clock::now(), milliseconds{100});
  cv.wait_until(
      lk, std::chrono::system_clock::now() +
              std::chrono::duration_cast<std::chrono::system_clock::duration>(
                  slice));
}

void LocalBell::nap(SteadyTime until, std::uint64_t seen,
                    const std::atomic<bool>& stop) {
  std::unique_lock<std::mutex> lk(mu_);
  while (gen_ == seen && !stop.load() && steady_clock::now() < until) {
    wait_slice(cv_, lk, until);
  }
}

long long row_wait_ms(milliseconds wait_left) {
  constexpr long long kDayMs = 24LL * 3600 * 1000;
  return std::clamp<long long>(wait_left.count(), 0, kDayMs);
}

void BellNap::nap(Clock::time_point until, const CallContext& ctx) {
  bell_.nap(steady_of(ctx.cap(until), ctx), seen_, stop_);
}

void BellNap::stop() {
  stop_.store(true);
  bell_.poke();
}

// --- StepRequest ------------------------------------------------------------

StepRequest::StepRequest(const AcquireSpec& spec, LocalBell& bell)
    : spec_(spec), token_(spec.token.to_string()), nap_(bell) {}

Result<Answer> StepRequest::answer(Result<AcquireOutcome> r,
                                   const CallContext& ctx) {
  if (!r.ok()) {
    if (r.error().code() != Errc::not_acquired) return std::move(r).error();
    finished(false, ctx);
    return Answer::refused_with(std::move(r).error());
  }
  if (r->grant) {
    finished(true, ctx);
    return Answer::granted_with(std::move(*r->grant));
  }
  Answer a;
  if (r->ended) {
    finished(false, ctx);
    a.kind = Answer::Kind::expired;
    a.gone = true;
    return a;
  }
  a.position = static_cast<std::uint32_t>(std::max(r->position, 0));
  a.look_at = next_look(ctx);
  return a;
}

Result<Answer> StepRequest::ask(AskMode mode, milliseconds wait_left,
                                const CallContext& ctx) {
  nap_.mark();
  if (mode == AskMode::try_only) {
    return answer(pass(ctx, MultiMode::try_, 0), ctx);
  }
  return answer(pass(ctx, MultiMode::wait, row_wait_ms(wait_left)), ctx);
}

Result<Answer> StepRequest::look(milliseconds wait_left,
                                 const CallContext& ctx) {
  nap_.mark();
  auto light = peek(ctx);
  if (light.ok() && (light->grant || light->position > 0)) {
    return answer(std::move(light), ctx);
  }
  return answer(pass(ctx, MultiMode::wait, row_wait_ms(wait_left)), ctx);
}

Result<Answer> StepRequest::withdraw(const CallContext& ctx) {
  auto r = pass(ctx, MultiMode::withdraw, 0);
  ring();
  return answer(std::move(r), ctx);
}

std::optional<Grant> StepRequest::wait_change(Clock::time_point until,
                                              const CallContext& ctx) {
  nap_.nap(until, ctx);
  return std::nullopt;
}

void StepRequest::interrupt() {
  Waitable::interrupt();
  nap_.stop();
}

// --- StepMulti --------------------------------------------------------------

StepMulti::StepMulti(const MultiSpec& spec, LocalBell& bell, MultiHooks hooks)
    : spec_(spec), hooks_(std::move(hooks)), nap_(bell) {}

Result<MultiOutcome> StepMulti::step(const CallContext& ctx, MultiMode mode,
                                     long long wait_ms) {
  return hooks_.transact(ctx, [&](Tx& tx) -> Result<MultiOutcome> {
    if (arrival_ == 0) arrival_ = tx.now();
    return multi_step(tx, spec_, mode, wait_ms, hooks_.waiter_timeout_us,
                      arrival_);
  });
}

Result<MultiAnswer> StepMulti::answer(Result<MultiOutcome> r,
                                      const CallContext& ctx) {
  MultiAnswer a;
  if (!r.ok()) {
    if (r.error().code() != Errc::not_acquired) return std::move(r).error();
    a.kind = MultiAnswer::Kind::refused;
    a.error = std::move(r).error();
    a.gone = true;
    return a;
  }
  a.grants = std::move(r->grants);
  a.pending = static_cast<std::size_t>(std::max(r->pending, 0));
  if (r->ended) {
    a.kind = MultiAnswer::Kind::expired;
    a.gone = true;
    return a;
  }
  a.look_at = ctx.now() + hooks_.pause(round_++);
  return a;
}

Result<MultiAnswer> StepMulti::ask(AskMode mode, milliseconds wait_left,
                                   const CallContext& ctx) {
  nap_.mark();
  const bool try_all = spec_.all_or_nothing && mode == AskMode::try_only;
  return answer(step(ctx, try_all ? MultiMode::try_ : MultiMode::wait,
                     row_wait_ms(wait_left)),
                ctx);
}

Result<MultiAnswer> StepMulti::look(milliseconds wait_left,
                                    const CallContext& ctx) {
  nap_.mark();
  // At least 1 ms: an acquire_all whose turn came is granted by this look
  // even at the end of its wait.
  return answer(
      step(ctx, MultiMode::wait, std::max(row_wait_ms(wait_left), 1LL)), ctx);
}

Result<MultiAnswer> StepMulti::withdraw(const CallContext& ctx) {
  // An acquire_all whose turn came on every name is granted (progress,
  // nothing pending); anything else leaves the queues (expired).
  auto r = step(ctx, MultiMode::withdraw, 0);
  hooks_.ring();
  return answer(std::move(r), ctx);
}

std::optional<Grant> StepMulti::wait_change(Clock::time_point until,
                                            const CallContext& ctx) {
  nap_.nap(until, ctx);
  return std::nullopt;
}

void StepMulti::interrupt() {
  Waitable::interrupt();
  nap_.stop();
}

}  // namespace baton::store::sqlstep
