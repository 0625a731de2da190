// stores/redis/redlock_multi.cc — acquire_some and acquire_all over N
// masters (see redlock_store.h and docs/stores/redis.md): one reservation's
// rounds of the multi script.
#include <map>
#include <string_view>

#include "stores/redis/inbox.h"
#include "stores/redis/redlock_impl.h"

namespace baton::store::redis {
namespace {

// What one multi round's replies add up to, per name.
struct MultiTally {
  Tally t;
  std::size_t full = 0;               // instances that granted every name
  std::vector<std::string> majority;  // names granted on a quorum
  std::vector<std::string> minority;  // names granted on fewer, but some
};

class RedlockMulti final : public InboxRequest<MultiRequest> {
 public:
  RedlockMulti(RedlockStore& s, const MultiSpec& spec)
      : InboxRequest(s.notifier(), spec.reservation.to_string(), s.instances()),
        s_(s),
        spec_(spec),
        quorum_(s.quorum_for(spec.capacity)) {}

  Result<MultiAnswer> ask(AskMode mode, milliseconds wait_left,
                          const CallContext& ctx) override {
    if (first_ask_ == Steady::time_point{}) first_ask_ = Steady::now();
    first_ = true;
    const bool try_all = spec_.all_or_nothing && mode == AskMode::try_only;
    return round(try_all ? kTry : kWait, wait_left, ctx);
  }
  Result<MultiAnswer> look(milliseconds wait_left,
                           const CallContext& ctx) override {
    return round(first_ ? kWait : kRefresh, wait_left, ctx);
  }
  Result<MultiAnswer> withdraw(const CallContext& ctx) override;

 private:
  Result<MultiAnswer> round(const char* mode, milliseconds left,
                            const CallContext& ctx);
  MultiTally tally(const std::vector<Result<MultiReply>>& replies) const;
  Result<MultiAnswer> not_granted(const MultiTally& m, const CallContext& ctx);
  Result<MultiAnswer> finish(const std::vector<Result<MultiReply>>& replies,
                             const std::vector<std::string>& names,
                             Steady::time_point t0, const CallContext& ctx);

  RedlockStore& s_;
  const MultiSpec spec_;
  const std::size_t quorum_;
  bool first_ = true;     // the next round enqueues (the first, or a requeue)
  std::int64_t seq_ = 0;  // the last round's number
  Steady::time_point first_ask_{};
  Split split_;
};

// acquire_all queues until the wait's end; acquire_some keeps its requests
// queued `ttl` after the call and reports what a quorum granted once
// anything is, or once the wait is over.
Result<MultiAnswer> RedlockMulti::round(const char* mode, milliseconds left,
                                        const CallContext& ctx) {
  const bool all = spec_.all_or_nothing;
  const bool try_all = std::string_view(mode) == kTry;
  inbox_.before_send();
  const auto t0 = Steady::now();
  seq_ = RedlockStore::next_seq();
  const std::int64_t qms = all ? left.count() : spec_.ttl.count();
  auto replies =
      s_.each<Result<MultiReply>>(ctx, [&](Instance& i, const CallContext& c) {
        return i.multi(spec_, mode, qms, c, seq_);
      });
  MultiTally m = tally(replies);
  if (m.t.fatal) {
    if (all) s_.release_names(spec_.names, spec_.reservation, seq_, ctx);
    return *m.t.fatal;
  }
  if (all && m.full >= quorum_) return finish(replies, spec_.names, t0, ctx);
  if (m.t.withdrawn > 0 || m.t.answered < quorum_ || try_all) {
    return not_granted(m, ctx);
  }
  if (!all && (!m.majority.empty() || left <= milliseconds::zero())) {
    if (!m.minority.empty()) {
      s_.release_names(m.minority, spec_.reservation, seq_, ctx);
    }
    return finish(replies, m.majority, t0, ctx);
  }
  first_ = false;
  MultiAnswer a;
  a.pending = spec_.names.size();
  if (left > milliseconds::zero() && inbox_.subscribe(ctx)) {
    a.look_at = Clock::time_point::min();  // a push may have been missed
  } else if (split_.overdue(all ? m.full > 0 || !m.majority.empty() ||
                                      !m.minority.empty()
                                : !m.minority.empty())) {
    // Gives back what it holds (acquire_all: every name; acquire_some: the
    // minority names) and enqueues again.
    s_.release_names(all ? spec_.names : m.minority, spec_.reservation, seq_,
                     ctx);
    first_ = true;
    a.look_at = Clock::time_point::min();
  }
  return a;
}

MultiTally RedlockMulti::tally(
    const std::vector<Result<MultiReply>>& replies) const {
  MultiTally m;
  std::map<std::string, std::size_t, std::less<>> count;
  for (const auto& r : replies) {
    if (!r.ok()) {
      RedlockStore::note_failure(r, &m.t);
      continue;
    }
    ++m.t.answered;
    if (r->kind == MultiReply::Kind::busy && m.t.busy == nullptr) {
      m.t.busy = &r->busy;
    }
    if (r->kind == MultiReply::Kind::withdrawn) ++m.t.withdrawn;
    if (r->grants.size() == spec_.names.size()) ++m.full;
    for (const auto& g : r->grants) ++count[g.name];
  }
  for (const auto& name : spec_.names) {
    const auto it = count.find(name);
    const std::size_t c = it == count.end() ? 0 : it->second;
    if (c >= quorum_) {
      m.majority.push_back(name);
    } else if (c > 0) {
      m.minority.push_back(name);
    }
  }
  return m;
}

Result<MultiAnswer> RedlockMulti::not_granted(const MultiTally& m,
                                              const CallContext& ctx) {
  const bool all = spec_.all_or_nothing;
  if (m.t.withdrawn > 0) {
    s_.release_names(spec_.names, spec_.reservation, seq_, ctx);
    return refused_multi(Error(
        Errc::not_acquired, "the reservation was withdrawn while it waited"));
  }
  if (all) s_.release_names(spec_.names, spec_.reservation, seq_, ctx);
  if (m.t.answered < quorum_) {
    if (ctx.expired()) {
      return Error(Errc::timeout,
                   "redlock: no majority answered before the call deadline" +
                       m.t.failures);
    }
    return s_.too_few(m.t.answered, m.t.failures, quorum_);
  }
  if (m.t.busy != nullptr) return refused_multi(*m.t.busy);
  return refused_multi(
      Error(Errc::not_acquired, "not all of the " +
                                    std::to_string(spec_.names.size()) +
                                    " locks are free on a majority"));
}

Result<MultiAnswer> RedlockMulti::finish(
    const std::vector<Result<MultiReply>>& replies,
    const std::vector<std::string>& names, Steady::time_point t0,
    const CallContext& ctx) {
  auto g = s_.finish_multi(spec_, replies, names, t0, first_ask_, seq_, ctx);
  if (!g.ok()) {
    // Given back everywhere, which marks the reservation withdrawn where
    // it still waited: only an enqueue clears that mark (as for a single
    // request, redlock_request.cc).
    first_ = true;
    return std::move(g).error();
  }
  MultiAnswer a;
  a.pending = spec_.names.size() - g->size();
  a.grants = std::move(*g);
  return a;
}

Result<MultiAnswer> RedlockMulti::withdraw(const CallContext& ctx) {
  seq_ = RedlockStore::next_seq();
  if (!spec_.all_or_nothing) {
    s_.release_names(spec_.names, spec_.reservation, seq_, ctx);
    return expired_multi();
  }
  const auto t0 = Steady::now();
  auto replies =
      s_.each<Result<MultiReply>>(ctx, [&](Instance& i, const CallContext& c) {
        return i.multi(spec_, kWithdraw, 0, c, seq_);
      });
  std::size_t full = 0;
  for (const auto& r : replies) {
    if (r.ok() && r->kind == MultiReply::Kind::ok &&
        r->grants.size() == spec_.names.size()) {
      ++full;
    }
  }
  if (full >= quorum_) return finish(replies, spec_.names, t0, ctx);
  s_.release_names(spec_.names, spec_.reservation, seq_, ctx);
  return expired_multi();
}

}  // namespace

std::unique_ptr<MultiRequest> RedlockStore::request_multi(
    const MultiSpec& spec) {
  return std::make_unique<RedlockMulti>(*this, spec);
}

}  // namespace baton::store::redis
