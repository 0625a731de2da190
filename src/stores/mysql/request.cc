// stores/mysql/request.cc — one mysql:// acquire as the engine drives it:
// the first ask takes a doorbell and tries the fast path, then the
// scheduling passes of sqlstep::StepRequest; a queued request waits in
// GET_LOCK on the doorbell of the entry ahead of it, or naps on the
// in-process bell, until its next look.
#include "stores/mysql/store_impl.h"

namespace baton::store::my_impl {

MyRequest::MyRequest(MysqlStore& s, const AcquireSpec& spec)
    : StepRequest(spec, *s.bell_), s_(s) {}

// A doorbell still held (the request ended in an error) is let go within
// the last call's deadline; past it, its connection is closed, which lets
// go of it on the server.
MyRequest::~MyRequest() {
  if (door_.conn) s_.let_go(std::move(door_), deadline_);
}

Result<Answer> MyRequest::ask(AskMode mode, milliseconds wait_left,
                              const CallContext& ctx) {
  deadline_ = s_.deadline(ctx);
  if (!asked_) {
    asked_ = true;
    s_.sweep_doorbells(deadline_);
    door_ = s_.new_doorbell(spec_.name, token_, deadline_);
    if (s_.fast_path_for(spec_) && !s_.busy_.busy(spec_.name)) {
      if (auto g = s_.fast_acquire(deadline_, spec_, token_, &door_)) {
        sqlstep::AcquireOutcome o;
        o.grant = std::move(*g);
        return answer(std::move(o), ctx);
      }
    }
  }
  auto a = StepRequest::ask(mode, wait_left, ctx);
  // A first pass that failed before its doorbell was taken: no doorbell.
  if (door_.conn && !door_.tried) s_.let_go(std::move(door_), deadline_);
  return a;
}

Result<sqlstep::AcquireOutcome> MyRequest::pass(const CallContext& ctx,
                                                sqlstep::MultiMode mode,
                                                long long wait_ms) {
  deadline_ = s_.deadline(ctx);
  std::optional<my::BellTarget> target;
  auto r =
      s_.pass(ctx, spec_, token_, mode, wait_ms, &arrival_, &door_, &target);
  if (r.ok()) saw(std::move(target), r->position);
  return r;
}

Result<sqlstep::AcquireOutcome> MyRequest::peek(const CallContext& ctx) {
  deadline_ = s_.deadline(ctx);
  std::optional<my::BellTarget> target;
  auto r = s_.peek(ctx, spec_.name, token_, arrival_, &target);
  if (r.ok() && r->position > 0) saw(std::move(target), r->position);
  return r;
}

void MyRequest::saw(std::optional<my::BellTarget> target, int place) {
  place_ = place;
  target_ = std::move(target);
  if (rang_ && target_ && target_->token == waited_on_) silent_ = waited_on_;
}

Clock::time_point MyRequest::next_look(const CallContext& ctx) {
  target_bell_.clear();
  if (place_ > 0 && target_ && door_.held() && door_.usable() &&
      target_->token != silent_) {
    target_bell_ =
        my::doorbell_name(s_.where_, s_.o_.prefix, spec_.name, target_->token);
    // A target in this process: its release or withdrawal rings the
    // in-process bell as soon, without a round trip; the timers apply.
    if (doorbell_local(target_bell_)) target_bell_.clear();
  }
  if (target_bell_.empty()) {
    return ctx.now() +
           (place_ > 0 ? s_.place_recheck(place_) : s_.recheck(round_++));
  }
  // Push: the wait on the doorbell of the entry this request waits for
  // lasts at most until that entry is due, the heartbeat needs a pass, or
  // the fallback re-check (long when that entry's release is the one event
  // that can grant this request).
  const milliseconds window =
      target_->exact ? s_.long_recheck() : s_.place_recheck(place_);
  return ctx.now() +
         std::min<Clock::time_point::duration>(
             {window, s_.o_.waiter_timeout / 4,
              std::chrono::microseconds{target_->due_in_us} + milliseconds{1}});
}

std::optional<Grant> MyRequest::wait_change(Clock::time_point until,
                                            const CallContext& ctx) {
  rang_ = false;
  if (target_bell_.empty()) {
    // Only the first two in line answer the in-process bell (no herd of
    // looks after every release); the rest keep their timers.
    if (place_ <= 2) return StepRequest::wait_change(until, ctx);
    return Waitable::wait_change(until, ctx);
  }
  waited_on_ = target_->token;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (nap_.stopped()) return std::nullopt;
    in_get_lock_ = door_.conn.get();
  }
  const int r = s_.ring_wait(*door_.conn, target_bell_,
                             sqlstep::steady_of(ctx.cap(until), ctx),
                             sqlstep::steady_of(ctx.deadline(), ctx));
  {
    std::lock_guard<std::mutex> lk(mu_);
    in_get_lock_ = nullptr;
  }
  if (r < 0) door_.check();  // a broken connection took our doorbell along
  rang_ = r == 1;
  return std::nullopt;
}

void MyRequest::interrupt() {
  StepRequest::interrupt();
  std::lock_guard<std::mutex> lk(mu_);
  if (in_get_lock_ != nullptr) in_get_lock_->abort();
}

void MyRequest::ring() { s_.ring(); }

void MyRequest::finished(bool granted, const CallContext&) {
  s_.settle(std::move(door_), granted, spec_.name, token_, spec_.ttl,
            deadline_);
}

// --- acquire_some / acquire_all ----------------------------------------------

std::unique_ptr<MultiRequest> MysqlStore::request_multi(const MultiSpec& spec) {
  sqlstep::MultiHooks h;
  h.transact = [this, names = spec.names](
                   const CallContext& ctx,
                   const sqlstep::MultiHooks::Step& step) {
    return transact<my::MultiOutcome>(ctx, names, step);
  };
  h.pause = [this](int round) { return recheck(round); };
  h.ring = [this] { ring(); };
  h.waiter_timeout_us = o_.waiter_timeout.count() * 1000;
  return std::make_unique<sqlstep::StepMulti>(spec, *bell_, std::move(h));
}

}  // namespace baton::store::my_impl
