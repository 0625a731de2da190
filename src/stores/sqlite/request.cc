// stores/sqlite/request.cc — one sqlite:// acquire (and acquire_some /
// acquire_all) as the engine drives it: the scheduling passes of
// sqlstep::StepRequest in BEGIN IMMEDIATE transactions, non-locking looks
// in read transactions, and naps on the inotify bell until a release or
// withdrawal rings it or the next look is due.
#include "stores/sqlite/store_impl.h"

namespace baton::store::sq_impl {

SqRequest::SqRequest(SqliteStore& s, const AcquireSpec& spec)
    : StepRequest(spec, s.bell_->local), s_(s) {}

Result<sqlstep::AcquireOutcome> SqRequest::pass(const CallContext& ctx,
                                                sqlstep::MultiMode mode,
                                                long long wait_ms) {
  const std::int64_t hb_us = s_.o_.waiter_timeout.count() * 1000;
  return s_.transact<sqlstep::AcquireOutcome>(
      ctx, {spec_.name}, [&](Tx& tx) -> Result<sqlstep::AcquireOutcome> {
        auto r = sqlstep::acquire_step(tx, spec_, token_, mode, wait_ms, hb_us,
                                       &arrival_);
        if (!r.ok()) return r;
        due_us_ = r->mine != nullptr
                      ? s_.next_due(tx.at(spec_.name), r->mine, tx.now())
                      : kNever;
        r->mine = nullptr;  // into the transaction's rows
        return r;
      });
}

Result<sqlstep::AcquireOutcome> SqRequest::peek(const CallContext& ctx) {
  std::int64_t now = 0;
  auto st = s_.read_state(ctx, {spec_.name}, &now);
  if (!st.ok()) return std::move(st).error();
  const NameState& s = (*st)[spec_.name];
  const Tx tx(s_.o_.prefix, sqlstep::Dialect::sqlite, {}, now,
              sq::wall_now_us() - now);
  auto out = sqlstep::quiet_look(tx, s, token_,
                                 s_.o_.waiter_timeout.count() * 1000, arrival_);
  if (out.position > 0) due_us_ = s_.next_due(s, out.mine, now);
  out.mine = nullptr;
  return out;
}

Clock::time_point SqRequest::next_look(const CallContext& ctx) {
  // The releaser's transaction grants the head of the queue and rings the
  // bell; otherwise a pass is due when something expires, or at the
  // fallback re-check.
  Clock::time_point at = ctx.now() + s_.recheck();
  if (due_us_ != kNever) {
    const std::int64_t in_us =
        std::max<std::int64_t>(0, due_us_ - sq::store_now_us());
    at = std::min(at, ctx.now() + std::chrono::microseconds{in_us});
  }
  return at;
}

void SqRequest::ring() { s_.bell_->ring(); }

// --- acquire_some / acquire_all ----------------------------------------------

std::unique_ptr<MultiRequest> SqliteStore::request_multi(
    const MultiSpec& spec) {
  sqlstep::MultiHooks h;
  h.transact = [this, names = spec.names](
                   const CallContext& ctx,
                   const sqlstep::MultiHooks::Step& step) {
    return transact<sq::MultiOutcome>(ctx, names, step);
  };
  // Multi-name waits look again with a locking pass on the bell or the
  // timer (the expiries of several names are not tracked).
  h.pause = [this](int) { return std::min(recheck(), milliseconds{25}); };
  h.ring = [this] { bell_->ring(); };
  h.waiter_timeout_us = o_.waiter_timeout.count() * 1000;
  return std::make_unique<sqlstep::StepMulti>(spec, bell_->local, std::move(h));
}

}  // namespace baton::store::sq_impl
