// stores/redis/redlock_multi.cc — RedlockStore::acquire_multi (acquire_some
// and acquire_all over N masters; see redlock_store.h and
// docs/stores/redis.md).
#include <map>

#include "stores/call_deadline.h"
#include "stores/redis/redlock_impl.h"

namespace baton::store::redis {

Result<std::vector<Grant>> RedlockStore::finish_multi(
    const MultiSpec& spec, std::vector<Result<MultiReply>>& replies,
    const std::vector<std::string>& names, Steady::time_point t0,
    Steady::time_point call_start, std::int64_t seq) {
  std::vector<Grant> out;
  for (const auto& name : names) {
    std::vector<microseconds> vf;
    std::vector<OwnerToken> tokens(inst_.size(), spec.reservation);
    std::optional<Grant> g;
    std::uint64_t top = 0;
    for (std::size_t i = 0; i < replies.size(); ++i) {
      auto& r = replies[i];
      if (!r.ok()) continue;
      for (const auto& gi : r->grants) {
        if (gi.name != name) continue;
        tokens[i] = gi.token;  // the lease the fence script raises
        vf.push_back(gi.valid_for);
        top = std::max(top, gi.fencing_token);
        if (!g) g = gi;
      }
    }
    const std::size_t q = quorum_for(spec.capacity);
    if (!g || !validity(vf, spec.ttl, t0, q)) {
      release_names(spec.names, spec.reservation, seq);
      return Error(Errc::unavailable,
                   "redlock: the majority for lock " + core::quote_name(name) +
                       " was reached too late to leave any validity");
    }
    auto fenced = raise_fence(name, tokens, top);
    if (!fenced.ok()) {
      release_names(spec.names, spec.reservation, seq);
      return std::move(fenced).error();
    }
    g->fencing_token = *fenced;
    g->valid_for = std::chrono::duration_cast<microseconds>(t0 - call_start) +
                   kth_largest(vf, q);
    out.push_back(std::move(*g));
  }
  return out;
}

Result<std::vector<Grant>> RedlockStore::acquire_multi(const MultiSpec& spec,
                                                       milliseconds wait) {
  using R = Result<std::vector<Grant>>;
  if (Status st = check_multi(spec, wait); !st.ok()) return st.error();
  const auto call_start = Steady::now();
  const std::size_t n = spec.names.size();
  const bool aon = spec.all_or_nothing;
  const bool waiting = wait > milliseconds::zero();
  const std::size_t q = quorum_for(spec.capacity);
  std::vector<std::string> minority;  // of the last round
  std::int64_t seq = 0;               // the last round's number
  // One round: the multi script on every instance in parallel.
  auto round = [&](bool first, std::int64_t left) -> Round<std::vector<Grant>> {
    const auto t0 = Steady::now();
    seq = next_seq();
    const char* mode = aon && !waiting ? kTry : first ? kWait : kRefresh;
    const std::int64_t qms = aon ? left : spec.ttl.count();
    auto replies = each<Result<MultiReply>>(
        [&](Instance& i) { return i.multi(spec, mode, qms, seq); });
    std::size_t answered = 0, full = 0, withdrawn = 0;
    const Error* busy = nullptr;
    std::string failures;
    std::map<std::string, std::size_t> count;
    for (auto& r : replies) {
      if (!r.ok()) {
        if (r.error().code() != Errc::unavailable &&
            r.error().code() != Errc::internal &&
            r.error().code() != Errc::timeout) {
          if (aon) release_names(spec.names, spec.reservation, seq);
          return R(r.error());
        }
        failures += "; " + r.error().message();
        continue;
      }
      ++answered;
      if (r->kind == MultiReply::Kind::busy && busy == nullptr) busy = &r->busy;
      if (r->kind == MultiReply::Kind::withdrawn) ++withdrawn;
      if (r->grants.size() == n) ++full;
      for (const auto& g : r->grants) ++count[g.name];
    }
    std::vector<std::string> majority;
    minority.clear();
    for (const auto& name : spec.names) {
      const std::size_t c = count.count(name) ? count[name] : 0;
      if (c >= q) {
        majority.push_back(name);
      } else if (c > 0) {
        minority.push_back(name);
      }
    }
    if (aon && full >= q) {
      return finish_multi(spec, replies, spec.names, t0, call_start, seq);
    }
    if (withdrawn > 0) {
      release_names(spec.names, spec.reservation, seq);
      return R(Error(Errc::not_acquired,
                     "the reservation was withdrawn while it waited"));
    }
    if (answered < q) {
      if (aon) release_names(spec.names, spec.reservation, seq);
      if (store::call_deadline_passed()) {  // rule 7: the caller gave up
        return R(Error(Errc::timeout,
                       "redlock: no majority answered before the call "
                       "deadline" +
                           failures));
      }
      return R(too_few(answered, failures));
    }
    if (aon && !waiting) {
      release_names(spec.names, spec.reservation, seq);
      if (busy != nullptr) return R(*busy);
      return R(Error(Errc::not_acquired, "not all of the " + std::to_string(n) +
                                             " locks are free on a majority"));
    }
    if (!aon && (!majority.empty() || !waiting || left <= 0)) {
      if (!minority.empty()) release_names(minority, spec.reservation, seq);
      return finish_multi(spec, replies, majority, t0, call_start, seq);
    }
    return Keep{.split =
                    aon ? (full > 0 || !majority.empty() || !minority.empty())
                        : !minority.empty()};
  };
  if (!waiting) return std::get<R>(round(true, 0));
  {
    Waiter waiter(notifier_, spec.reservation.to_string(), instances());
    auto out = waiter.run<std::vector<Grant>>(wait_end(wait), aon, round, [&] {
      release_names(aon ? spec.names : minority, spec.reservation, seq);
    });
    if (out) return std::move(*out);
  }
  const auto t0 = Steady::now();
  seq = next_seq();
  auto replies = each<Result<MultiReply>>(
      [&](Instance& i) { return i.multi(spec, kWithdraw, 0, seq); });
  std::size_t full = 0;
  for (auto& r : replies) {
    if (r.ok() && r->kind == MultiReply::Kind::ok && r->grants.size() == n) {
      ++full;
    }
  }
  if (full >= q) {
    return finish_multi(spec, replies, spec.names, t0, call_start, seq);
  }
  release_names(spec.names, spec.reservation, seq);
  return Error(Errc::timeout, "not all of the " + std::to_string(n) +
                                  " locks were granted on a majority within " +
                                  std::to_string(wait.count()) + "ms");
}

}  // namespace baton::store::redis
