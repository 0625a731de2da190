// stores/postgres/requests.cc — one acquire's and one acquire_some /
// acquire_all's conversation with PostgreSQL: ask, look and withdraw are
// one acquire(...) / acquire_multi(...) call each (modes 'try' / 'wait',
// 'recheck' / 'full', 'withdraw'); the wake-up source is the store's
// LISTEN connection.
#include <mutex>
#include <optional>

#include "stores/postgres/store_impl.h"

namespace baton::store::pg {
namespace {

// `t` on ctx's clock, carried over to the steady clock.
TimePoint steady(const CallContext& ctx, CallContext::time_point t) {
  if (t == CallContext::time_point::max()) return TimePoint::max();
  return Clock::now() + (t - ctx.now());
}

// The engine's answer for an 'error' row: the store ended the wait on its
// side ('timeout': the request's database deadline passed), or a final
// refusal (not_acquired with the holders, a withdrawn request, a capacity
// mismatch). Either way nothing is left queued.
Error row_error(const std::vector<Row>& rows, bool* expired) {
  Error e = to_error(rows);
  *expired = e.code() == Errc::timeout;
  return e;
}

// The registration on the listener of a waiting call, made before its
// first wait-mode call (so that no notification sent after that call's
// commit is missed) and woken by interrupt() from any thread.
class Wakeup {
 public:
  void listen(Listener& l, const OwnerToken& token) {
    std::lock_guard<std::mutex> lk(mu_);
    if (!slot_) slot_.emplace(l, token);
  }
  // nullopt: not listening.
  std::optional<bool> wait(TimePoint end) {
    Listener::Slot* s = slot();
    if (s == nullptr) return std::nullopt;
    return s->wait(end);
  }
  std::optional<Listener::Slot::Granted> take_grant() {
    Listener::Slot* s = slot();
    return s == nullptr ? std::nullopt : s->take_grant();
  }
  void wake() {
    std::lock_guard<std::mutex> lk(mu_);
    if (slot_) slot_->wake();
  }

 private:
  Listener::Slot* slot() {
    std::lock_guard<std::mutex> lk(mu_);
    return slot_ ? &*slot_ : nullptr;
  }
  std::mutex mu_;
  std::optional<Listener::Slot> slot_;  // guarded by mu_ (made once)
};

class PgRequest final : public Request {
 public:
  PgRequest(PgStore& s, const AcquireSpec& spec) : s_(s), spec_(spec) {}

  Result<Answer> ask(AskMode mode, milliseconds wait_left,
                     const CallContext& ctx) override {
    const bool waits = mode == AskMode::wait;
    if (waits) wakeup_.listen(s_.listener(), spec_.token);
    const bool tried_fast = s_.try_fast(spec_);
    if (tried_fast) {
      if (auto g = s_.fast_acquire(spec_, ctx)) {
        return Answer::granted_with(std::move(*g));
      }
    }
    auto r = s_.call_acquire(spec_, waits ? "wait" : "try", wait_left, ctx);
    // A name the fast path failed on whose full pass did not grant at once
    // is busy: its next calls skip the fast path for a while.
    if (tried_fast && (!r.ok() || (*r)[0].kind != "grant")) {
      s_.busy().mark(spec_.name);
    }
    if (!r.ok()) return std::move(r).error();
    return answer(*r);
  }

  Result<Answer> look(milliseconds wait_left, const CallContext& ctx) override {
    const char* mode = next_look_;
    next_look_ = "recheck";
    auto r = s_.call_acquire(spec_, mode, wait_left, ctx);
    if (!r.ok()) return std::move(r).error();
    return answer(*r);
  }

  Result<Answer> withdraw(const CallContext& ctx) override {
    auto r = s_.call_acquire(spec_, "withdraw", milliseconds::zero(), ctx);
    if (!r.ok()) return std::move(r).error();
    return answer(*r);
  }

  std::optional<Grant> wait_change(CallContext::time_point until,
                                   const CallContext& ctx) override {
    if (interrupted()) return std::nullopt;
    if (!wakeup_.wait(steady(ctx, ctx.cap(until)))) {
      return Waitable::wait_change(until, ctx);
    }
    // The notification carried the grant (sent only after its commit): no
    // look needed. Reentrant joins and anything else look.
    auto g = wakeup_.take_grant();
    if (!g || g->name != spec_.name) return std::nullopt;
    Grant grant;
    grant.name = spec_.name;
    grant.token = spec_.token;
    grant.fencing_token = static_cast<std::uint64_t>(g->fencing);
    grant.ttl = milliseconds{g->ttl_ms};
    grant.capacity = spec_.capacity;
    grant.shared = spec_.shared;
    grant.valid_for = std::chrono::microseconds{g->expires_us - arrival_us_};
    grant.store_expires_at_ms = g->expires_us / 1000;
    return grant;
  }

  void interrupt() override {
    Waitable::interrupt();
    wakeup_.wake();
  }

 private:
  Result<Answer> answer(const std::vector<Row>& rows) {
    const Row& row = rows[0];
    if (arrival_us_ == 0) arrival_us_ = row.now_us;
    if (row.kind == "grant") {
      return Answer::granted_with(to_grant(row, arrival_us_));
    }
    if (row.kind == "error") {
      bool expired = false;
      Error e = row_error(rows, &expired);
      if (!expired) return Answer::refused_with(std::move(e));
      Answer a;
      a.kind = Answer::Kind::expired;
      a.gone = true;
      return a;
    }
    Answer a;  // queued
    a.position = static_cast<std::uint32_t>(row.n);
    // 'recheck' / 'full': call again at once in that mode.
    if (row.code == "recheck" || row.code == "full") {
      next_look_ = row.code == "full" ? "full" : "recheck";
      a.look_at = Clock::time_point::min();
    }
    return a;
  }

  PgStore& s_;
  const AcquireSpec spec_;
  std::int64_t arrival_us_ = 0;  // database time of the first answer
  const char* next_look_ = "recheck";
  Wakeup wakeup_;
};

class PgMulti final : public MultiRequest {
 public:
  PgMulti(PgStore& s, const MultiSpec& spec) : s_(s), spec_(spec) {}

  Result<MultiAnswer> ask(AskMode mode, milliseconds wait_left,
                          const CallContext& ctx) override {
    if (mode == AskMode::wait && wait_left > milliseconds::zero()) {
      wakeup_.listen(s_.listener(), spec_.reservation);
    }
    const bool all_try = spec_.all_or_nothing && mode == AskMode::try_only;
    auto r = s_.call_multi(spec_, all_try ? "try" : "wait", wait_left, ctx);
    if (!r.ok()) return std::move(r).error();
    return answer(*r);
  }

  Result<MultiAnswer> look(milliseconds wait_left,
                           const CallContext& ctx) override {
    auto r = s_.call_multi(spec_, "recheck",
                           std::max(wait_left, milliseconds{1}), ctx);
    if (!r.ok()) return std::move(r).error();
    return answer(*r);
  }

  // acquire_all: leaves every queue, or answers the grants that came in.
  // acquire_some: releases its requests (and leases) by reservation.
  Result<MultiAnswer> withdraw(const CallContext& ctx) override {
    if (spec_.all_or_nothing) {
      auto r = s_.call_multi(spec_, "withdraw", milliseconds::zero(), ctx);
      if (!r.ok()) return std::move(r).error();
      return answer(*r);
    }
    for (const auto& n : spec_.names) {
      auto r = s_.release(n, spec_.reservation, ctx);
      if (!r.ok()) return std::move(r).error();
    }
    MultiAnswer a;
    a.kind = MultiAnswer::Kind::expired;
    a.gone = true;
    return a;
  }

  std::optional<Grant> wait_change(CallContext::time_point until,
                                   const CallContext& ctx) override {
    if (interrupted()) return std::nullopt;
    if (!wakeup_.wait(steady(ctx, ctx.cap(until)))) {
      return Waitable::wait_change(until, ctx);
    }
    return std::nullopt;
  }

  void interrupt() override {
    Waitable::interrupt();
    wakeup_.wake();
  }

 private:
  Result<MultiAnswer> answer(const std::vector<Row>& rows) {
    if (arrival_us_ == 0) arrival_us_ = rows.back().now_us;
    MultiAnswer a;
    if (rows[0].kind == "error") {
      bool expired = false;
      a.error = row_error(rows, &expired);
      a.kind =
          expired ? MultiAnswer::Kind::expired : MultiAnswer::Kind::refused;
      a.gone = true;
      return a;
    }
    a.grants = to_grants(rows, arrival_us_);
    a.pending = static_cast<std::size_t>(rows.back().n);
    return a;
  }

  PgStore& s_;
  const MultiSpec spec_;
  std::int64_t arrival_us_ = 0;
  Wakeup wakeup_;
};

}  // namespace

std::unique_ptr<Request> PgStore::request(const AcquireSpec& spec) {
  return std::make_unique<PgRequest>(*this, spec);
}

std::unique_ptr<MultiRequest> PgStore::request_multi(const MultiSpec& spec) {
  return std::make_unique<PgMulti>(*this, spec);
}

}  // namespace baton::store::pg
