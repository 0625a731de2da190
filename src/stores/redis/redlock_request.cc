// stores/redis/redlock_request.cc — one Redlock acquire (redlock_store.h):
// its rounds, its ticket, its split, and the grants its instances push.
#include <string_view>
#include <utility>

#include "core/validate.h"
#include "stores/redis/inbox.h"
#include "stores/redis/pushed.h"
#include "stores/redis/redlock_impl.h"

namespace baton::store::redis {
namespace {

class RedlockRequest final : public InboxRequest<Request> {
 public:
  RedlockRequest(RedlockStore& s, const AcquireSpec& spec)
      : InboxRequest(s.notifier(), spec.token.to_string(), s.instances()),
        s_(s),
        spec_(spec),
        quorum_(s.quorum_for(spec.capacity)),
        pushed_(s.size()) {}

  Result<Answer> ask(AskMode mode, milliseconds wait_left,
                     const CallContext& ctx) override;
  Result<Answer> look(milliseconds wait_left, const CallContext& ctx) override {
    return round(first_ ? kWait : kRefresh, wait_left, ctx);
  }
  Result<Answer> withdraw(const CallContext& ctx) override;
  std::optional<Grant> wait_change(Clock::time_point until,
                                   const CallContext& ctx) override;

 private:
  Result<Answer> round(const char* mode, milliseconds left,
                       const CallContext& ctx);
  Tally tally(const std::vector<Result<AcqReply>>& replies);
  Result<Answer> not_granted(const Tally& t, std::int64_t seq,
                             const CallContext& ctx);
  void requeue(milliseconds left, const CallContext& ctx);
  std::optional<Grant> take_pushed(std::vector<Notifier::Push> pushes,
                                   const CallContext& ctx, bool* wait_more);

  // A quorum granted: the lease, or — when finish() gave the grants back
  // (no validity left, or the fence could not be raised) — its error, and
  // the next round enqueues again at the ticket's place. The give-back
  // also marked the request withdrawn on the instances where it still
  // waited, and only an enqueue clears that mark: a refresh would end
  // the wait as "withdrawn" although its owner withdrew nothing.
  Result<Answer> finished(const std::vector<Result<AcqReply>>& replies,
                          Steady::time_point t0, std::int64_t seq,
                          const CallContext& ctx) {
    auto g = s_.finish(spec_, replies, t0, first_ask_, seq, ctx);
    if (!g.ok()) {
      first_ = true;
      return std::move(g).error();
    }
    return Answer::granted_with(std::move(*g));
  }

  RedlockStore& s_;
  const AcquireSpec spec_;
  const std::size_t quorum_;
  // The waiter's ticket: 0 until the first round assigned one on each
  // instance, then the maximum of those, raised on every instance by the
  // next rounds, so every instance queues waiters in one order (see
  // "Order" in docs/stores/redis.md).
  std::int64_t ticket_ = 0;
  bool first_ = true;  // the next round enqueues (the first, or a requeue)
  Steady::time_point first_ask_{};
  Split split_;
  Pushed pushed_;
};

Result<Answer> RedlockRequest::ask(AskMode mode, milliseconds wait_left,
                                   const CallContext& ctx) {
  if (first_ask_ == Steady::time_point{}) first_ask_ = Steady::now();
  if (mode == AskMode::try_only) return round(kTry, wait_left, ctx);
  first_ = true;
  return round(kWait, wait_left, ctx);
}

// One round: the acquire script on every instance in parallel.
Result<Answer> RedlockRequest::round(const char* mode, milliseconds left,
                                     const CallContext& ctx) {
  const bool try_only = std::string_view(mode) == kTry;
  if (!try_only) {
    pushed_.clear();
    inbox_.before_send();
  }
  const auto t0 = Steady::now();
  const std::int64_t seq = RedlockStore::next_seq();
  auto replies =
      s_.each<Result<AcqReply>>(ctx, [&](Instance& i, const CallContext& c) {
        return i.acquire(spec_, mode, left.count(), c, try_only ? -1 : ticket_,
                         seq);
      });
  if (!try_only) pushed_.round(replies, t0);
  const Tally t = tally(replies);
  if (t.fatal) {
    s_.release_all(spec_.name, spec_.token, seq, ctx);
    return *t.fatal;
  }
  if (t.granted >= quorum_) return finished(replies, t0, seq, ctx);
  if (t.withdrawn > 0 || t.answered < quorum_ || try_only) {
    return not_granted(t, seq, ctx);
  }
  first_ = false;
  Answer a;
  if (inbox_.subscribe(ctx)) {
    a.look_at = Clock::time_point::min();  // a push may have been missed
  } else if (split_.overdue(t.granted > 0)) {
    requeue(left, ctx);
    first_ = true;
    a.look_at = Clock::time_point::min();  // enqueue at the ticket's place
  }
  return a;
}

Tally RedlockRequest::tally(const std::vector<Result<AcqReply>>& replies) {
  Tally t;
  for (const auto& r : replies) {
    if (!r.ok()) {
      RedlockStore::note_failure(r, &t);
      continue;
    }
    ++t.answered;
    if (r->kind == AcqReply::Kind::granted) ++t.granted;
    if (r->kind == AcqReply::Kind::withdrawn) ++t.withdrawn;
    if (r->kind == AcqReply::Kind::queued)
      ticket_ = std::max(ticket_, r->ticket);
    if (r->kind == AcqReply::Kind::busy && t.busy == nullptr) t.busy = &r->busy;
  }
  return t;
}

// A round that neither granted nor left the request waiting: withdrawn by
// its owner token, too few instances answered, or a try that failed. What
// it holds is given back, except when no majority answered before the
// call deadline: the engine withdraws the token in the background then.
Result<Answer> RedlockRequest::not_granted(const Tally& t, std::int64_t seq,
                                           const CallContext& ctx) {
  const bool gave_up =
      t.answered < quorum_ && t.withdrawn == 0 && ctx.expired();
  if (!gave_up) s_.release_all(spec_.name, spec_.token, seq, ctx);
  if (t.withdrawn > 0) {
    return Answer::refused_with(
        Error(Errc::not_acquired, "the request for lock " +
                                      core::quote_name(spec_.name) +
                                      " was withdrawn while it waited"));
  }
  if (t.answered < quorum_) {
    if (ctx.expired()) {
      return Error(Errc::timeout, "redlock: lock " +
                                      core::quote_name(spec_.name) +
                                      ": no majority answered before the "
                                      "call deadline" +
                                      t.failures);
    }
    return s_.too_few(t.answered, t.failures, quorum_);
  }
  if (t.busy != nullptr) return Answer::refused_with(*t.busy);
  return Answer::refused_with(
      Error(Errc::not_acquired,
            "lock " + core::quote_name(spec_.name) + " was granted on " +
                std::to_string(t.granted) + " of " + std::to_string(s_.size()) +
                " instances; the quorum is " + std::to_string(quorum_)));
}

// Gives the partial grants back but keeps the ticket (the acquire script's
// `yield`), so the request keeps its place in the queue on every instance
// and the lowest ticket among the split waiters ends up with the quorum (a
// new ticket at the tail would let later requests overtake it).
void RedlockRequest::requeue(milliseconds left, const CallContext& ctx) {
  const std::int64_t seq = RedlockStore::next_seq();
  if (ticket_ <= 0) return s_.release_all(spec_.name, spec_.token, seq, ctx);
  (void)s_.each<Result<AcqReply>>(ctx, [&](Instance& i, const CallContext& c) {
    return i.acquire(spec_, kYield, left.count(), c, ticket_, seq);
  });
}

Result<Answer> RedlockRequest::withdraw(const CallContext& ctx) {
  const auto t0 = Steady::now();
  const std::int64_t seq = RedlockStore::next_seq();
  auto replies =
      s_.each<Result<AcqReply>>(ctx, [&](Instance& i, const CallContext& c) {
        return i.acquire(spec_, kWithdraw, 0, c, -1, seq);
      });
  std::size_t n = 0;
  for (const auto& r : replies) {
    if (r.ok() && r->kind == AcqReply::Kind::granted) ++n;
  }
  if (n >= quorum_) return finished(replies, t0, seq, ctx);
  // Past the call deadline the engine withdraws the token in the
  // background.
  if (!ctx.expired()) s_.release_all(spec_.name, spec_.token, seq, ctx);
  return expired_answer();
}

// Woken by pushes (rule 10): grants pushed by every instance are a round's
// replies, with no refresh round; while only some came, waits a moment for
// the rest (the same release runs on each instance).
std::optional<Grant> RedlockRequest::wait_change(Clock::time_point until,
                                                 const CallContext& ctx) {
  auto pushes = messages(until, ctx);
  for (;;) {
    bool wait_more = false;
    auto g = take_pushed(std::move(pushes), ctx, &wait_more);
    if (g || !wait_more || interrupted() || ctx.now() >= ctx.cap(until)) {
      return g;
    }
    pushes = messages(std::min(until, ctx.now() + pushed_.nap()), ctx);
  }
}

std::optional<Grant> RedlockRequest::take_pushed(
    std::vector<Notifier::Push> pushes, const CallContext& ctx,
    bool* wait_more) {
  const auto use = pushed_.take(
      std::move(pushes), spec_.name, quorum_, [&](const void* from) {
        // A guarded instance's pushes are not votes either:
        // the next round asks it (RedlockStore::each).
        const std::size_t i = s_.index_of_source(from);
        return i < s_.size() && s_.not_a_vote(i) ? s_.size() : i;
      });
  *wait_more = use == Pushed::Use::wait;
  if (use != Pushed::Use::all && use != Pushed::Use::quorum) {
    return std::nullopt;
  }
  test_hooks().pushed_grants.fetch_add(1);
  const auto replies = pushed_.replies();
  const auto since = pushed_.since();
  pushed_.clear();
  auto g = finished(replies, since, RedlockStore::next_seq(), ctx);
  if (!g.ok()) return std::nullopt;  // given back: the next look enqueues
  return std::move(g->grant);
}

}  // namespace

std::unique_ptr<Request> RedlockStore::request(const AcquireSpec& spec) {
  return std::make_unique<RedlockRequest>(*this, spec);
}

}  // namespace baton::store::redis
