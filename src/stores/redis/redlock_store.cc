// stores/redis/redlock_store.cc — Redlock over N masters (redlock_store.h):
// construction, single-lock calls and fencing. acquire_multi is in
// redlock_multi.cc.
#include "stores/redis/redlock_store.h"

#include <algorithm>
#include <atomic>
#include <utility>

#include "stores/call_deadline.h"
#include "stores/redis/pushed.h"
#include "stores/redis/redlock_impl.h"

namespace baton::store {
namespace redis {

RedlockStore::RedlockStore(std::vector<Target> targets,
                           const StoreConfig& config, std::string url)
    : url_(std::move(url)) {
  for (auto& t : targets) {
    inst_.push_back(
        std::make_unique<Instance>(std::move(t), config.prefix, notifier_));
  }
  quorum_ = inst_.size() / 2 + 1;
}

std::int64_t RedlockStore::next_seq() {
  static std::atomic<std::int64_t> last{0};
  const std::int64_t now =
      std::chrono::duration_cast<microseconds>(
          std::chrono::system_clock::now().time_since_epoch())
          .count();
  std::int64_t prev = last.load();
  std::int64_t next;
  do {
    next = std::max(prev + 1, now);
  } while (!last.compare_exchange_weak(prev, next));
  return next;
}

Result<Grant> RedlockStore::acquire(const AcquireSpec& spec,
                                    milliseconds wait) {
  if (Status st = check_acquire(spec, wait); !st.ok()) return st.error();
  const auto call_start = Steady::now();
  const bool waiting = wait > milliseconds::zero();
  const std::size_t quorum = quorum_for(spec.capacity);
  // The waiter's ticket: 0 until the first round assigned one on each
  // instance, then the maximum of those, raised on every instance by the
  // next rounds, so every instance queues waiters in one order (see "Order"
  // in docs/stores/redis.md).
  std::int64_t ticket = 0;
  const std::size_t n = inst_.size();
  Pushed pushed(n);
  Waiter* waiter_ptr = nullptr;  // set while waiting
  // One round: the acquire script on every instance in parallel.
  auto round = [&](bool first, std::int64_t left) -> Round<Grant> {
    if (waiter_ptr != nullptr && !first) {
      // Woken by pushes (rule 10): grants pushed by every instance are the
      // round's replies, with no refresh round; while only some came, wait
      // a moment for the rest (the same release runs on each instance).
      const auto use = pushed.take(waiter_ptr->take_pushes(), spec.name, quorum,
                                   [&](const void* from) {
                                     for (std::size_t k = 0; k < n; ++k) {
                                       if (inst_[k]->push_source() == from) {
                                         return k;
                                       }
                                     }
                                     return n;
                                   });
      if (use == Pushed::Use::all || use == Pushed::Use::quorum) {
        test_hooks().pushed_grants.fetch_add(1);
        std::vector<Result<AcqReply>> replies = pushed.replies();
        const auto since = pushed.since();
        pushed.clear();
        return finish(spec, replies, since, call_start, next_seq());
      }
      if (use == Pushed::Use::wait) return Keep{.nap = pushed.nap()};
    }
    pushed.clear();
    const auto t0 = Steady::now();
    const std::int64_t seq = next_seq();
    auto replies = each<Result<AcqReply>>([&](Instance& i) {
      return i.acquire(spec,
                       !waiting ? kTry
                       : first  ? kWait
                                : kRefresh,
                       left, waiting ? ticket : -1, seq);
    });
    if (waiting) pushed.round(replies, t0);
    std::size_t answered = 0, granted = 0, withdrawn = 0;
    const Error* busy = nullptr;
    std::string failures;
    for (auto& r : replies) {
      if (!r.ok()) {
        if (r.error().code() != Errc::unavailable &&
            r.error().code() != Errc::internal &&
            r.error().code() != Errc::timeout) {
          release_all(spec.name, spec.token, seq);
          return Result<Grant>(r.error());
        }
        failures += "; " + r.error().message();
        continue;
      }
      ++answered;
      if (r->kind == AcqReply::Kind::granted) ++granted;
      if (r->kind == AcqReply::Kind::withdrawn) ++withdrawn;
      if (r->kind == AcqReply::Kind::queued) {
        ticket = std::max(ticket, r->ticket);
      }
      if (r->kind == AcqReply::Kind::busy && busy == nullptr) busy = &r->busy;
    }
    if (granted >= quorum) return finish(spec, replies, t0, call_start, seq);
    // A round that no majority answered by the call deadline answers
    // `timeout` at once (rule 7): the client then withdraws the token in
    // the background (settle_abandoned), so no clean-up round runs here.
    const bool gave_up =
        answered < quorum && withdrawn == 0 && store::call_deadline_passed();
    if ((withdrawn > 0 || answered < quorum || !waiting) && !gave_up) {
      release_all(spec.name, spec.token, seq);
    }
    if (withdrawn > 0) {
      return Result<Grant>(
          Error(Errc::not_acquired, "the request for lock " +
                                        core::quote_name(spec.name) +
                                        " was withdrawn while it waited"));
    }
    if (answered < quorum) {
      if (store::call_deadline_passed()) {  // rule 7: the caller gave up
        return Result<Grant>(Error(
            Errc::timeout, "redlock: lock " + core::quote_name(spec.name) +
                               ": no majority answered before the "
                               "call deadline" +
                               failures));
      }
      return Result<Grant>(too_few(answered, failures));
    }
    if (!waiting) {
      if (busy != nullptr) return Result<Grant>(*busy);
      return Result<Grant>(Error(
          Errc::not_acquired,
          "lock " + core::quote_name(spec.name) + " was granted on " +
              std::to_string(granted) + " of " + std::to_string(inst_.size()) +
              " instances; the quorum is " + std::to_string(quorum)));
    }
    return Keep{.split = granted > 0};
  };
  if (!waiting) return std::get<Result<Grant>>(round(true, 0));
  {
    const auto end = wait_end(wait);
    // A split that lasted too long: give the partial grants back but keep
    // the ticket, so the waiter keeps its place in the queue on every
    // instance and the lowest ticket among the split waiters ends up with
    // the quorum (a new ticket at the tail would let later requests
    // overtake it; the torture test's FIFO checker saw that).
    auto requeue = [&] {
      const std::int64_t seq = next_seq();
      if (ticket <= 0) return release_all(spec.name, spec.token, seq);
      const std::int64_t left = ms_left(end);
      each<Result<AcqReply>>([&](Instance& i) {
        return i.acquire(spec, kYield, left, ticket, seq);
      });
    };
    Waiter waiter(notifier_, spec.token.to_string(), instances());
    waiter_ptr = &waiter;
    auto out = waiter.run<Grant>(end, true, round, requeue);
    waiter_ptr = nullptr;
    if (out) return std::move(*out);
  }
  const auto t0 = Steady::now();
  const std::int64_t seq = next_seq();
  auto replies = each<Result<AcqReply>>(
      [&](Instance& i) { return i.acquire(spec, kWithdraw, 0, -1, seq); });
  std::size_t granted = 0;
  for (auto& r : replies) {
    if (r.ok() && r->kind == AcqReply::Kind::granted) ++granted;
  }
  if (granted >= quorum) return finish(spec, replies, t0, call_start, seq);
  // Past the call deadline the client withdraws the token in the
  // background (as above).
  if (!store::call_deadline_passed()) release_all(spec.name, spec.token, seq);
  return Error(Errc::timeout, "lock " + core::quote_name(spec.name) +
                                  " was not granted on a majority within " +
                                  std::to_string(wait.count()) + "ms");
}

Result<Grant> RedlockStore::extend(std::string_view name,
                                   const OwnerToken& token, milliseconds ttl) {
  if (Status st = core::validate_name(name); !st.ok()) return st.error();
  if (Status st = core::validate_ttl(ttl); !st.ok()) return st.error();
  const auto t0 = Steady::now();
  auto replies = each<Result<Grant>>(
      [&](Instance& i) { return i.extend(name, token, ttl); });
  std::size_t ok = 0, answered = 0;
  std::string failures;
  std::vector<microseconds> vf;
  std::optional<Grant> best;
  // The lease's fencing token is the one the grant's quorum agreed on (the
  // fence step wrote it to every lease of the quorum). An instance that
  // re-granted the lease on its own (restarted without its data, then a
  // retry by owner token) reports a local token nobody agreed on: the
  // token most instances report wins, the lower on a tie.
  auto votes = [&](std::uint64_t f) {
    return std::count_if(replies.begin(), replies.end(), [&](const auto& x) {
      return x.ok() && x->fencing_token == f;
    });
  };
  for (auto& r : replies) {
    if (r.ok()) {
      ++ok;
      ++answered;
      vf.push_back(r->valid_for);
      if (!best) {
        best = *r;
      } else {
        const auto a = votes(r->fencing_token), b = votes(best->fencing_token);
        if (a > b || (a == b && r->fencing_token < best->fencing_token)) {
          best = *r;
        }
      }
    } else if (r.error().code() == Errc::lock_lost) {
      ++answered;
    } else {
      failures += "; " + r.error().message();
    }
  }
  const std::size_t q = best ? quorum_for(best->capacity) : quorum_;
  if (ok >= q) {
    if (validity(vf, ttl, t0, q)) {
      best->valid_for = kth_largest(vf, q);  // from t0 >= the client's send
      return *best;
    }
  } else if (answered < q) {
    return too_few(answered, failures);
  }
  // The partial extensions are NOT released here: the caller still acts on
  // the lease until it learns of the loss, and a Session gives a lost lease
  // back only after its on_lost notice ran (rule 13). Releasing them here
  // let another worker take the mutex on the instances freed (with the ones
  // this lease no longer held) before the holder's notice — torture
  // checker 8b, seeds 98104 and 98130 (finding 10). They expire at their
  // TTL, or go with the caller's release.
  return Error(Errc::lock_lost, "lock " + core::quote_name(name) +
                                    " is held with this owner "
                                    "token on only " +
                                    std::to_string(ok) + " of " +
                                    std::to_string(inst_.size()) +
                                    " instances (the quorum is " +
                                    std::to_string(q) + "): the lease is lost");
}

Result<ReleaseResult> RedlockStore::release(std::string_view name,
                                            const OwnerToken& token) {
  if (Status st = core::validate_name(name); !st.ok()) return st.error();
  auto replies = each<Result<ReleaseResult>>(
      [&](Instance& i) { return i.release(name, token); });
  std::size_t answered = 0, held = 0;
  std::string failures;
  ReleaseResult out;
  for (auto& r : replies) {
    if (!r.ok()) {
      failures += "; " + r.error().message();
      continue;
    }
    ++answered;
    if (r->was_held) {
      ++held;
      out.holds_left = std::max(out.holds_left, r->holds_left);
    }
  }
  if (answered < quorum_) return too_few(answered, failures);
  out.was_held = held >= quorum_;
  if (!out.was_held) out.holds_left = 0;
  return out;
}

Result<LockInfo> RedlockStore::describe(std::string_view name) {
  if (Status st = core::validate_name(name); !st.ok()) return st.error();
  auto replies =
      each<Result<LockInfo>>([&](Instance& i) { return i.describe(name); });
  std::optional<LockInfo> out;
  std::size_t answered = 0;
  std::string failures;
  for (auto& r : replies) {
    if (!r.ok()) {
      failures += "; " + r.error().message();
      continue;
    }
    ++answered;
    if (!out) {
      out = *r;
    } else {
      out->last_fencing_token =
          std::max(out->last_fencing_token, r->last_fencing_token);
    }
  }
  if (answered < quorum_) return too_few(answered, failures);
  return *out;
}

Result<std::vector<LockInfo>> RedlockStore::list(std::string_view prefix,
                                                 std::size_t limit) {
  if (!prefix.empty()) {
    if (Status st = core::validate_name(prefix, "name prefix"); !st.ok()) {
      return st.error();
    }
  }
  auto replies = each<Result<std::vector<LockInfo>>>([&](Instance& i) {
    return i.list(prefix, std::max<std::size_t>(limit, 1));
  });
  std::size_t answered = 0;
  std::string failures;
  const std::vector<LockInfo>* first = nullptr;
  for (auto& r : replies) {
    if (!r.ok()) {
      failures += "; " + r.error().message();
      continue;
    }
    ++answered;
    if (first == nullptr) first = &*r;
  }
  if (answered < quorum_) return too_few(answered, failures);
  return *first;
}

// Fencing over the majority: raise every instance to the maximum. A pass
// is settled when a majority answered and no instance reports the value
// taken (by another grant's INCR or raise, see kFenceBody): then no other
// grant can hold `top`. Otherwise it goes past the largest value seen.
Result<std::uint64_t> RedlockStore::raise_fence(
    std::string_view name, const std::vector<OwnerToken>& tokens,
    std::uint64_t top, bool /*again*/) {
  constexpr int kMaxPasses = 16;  // each pass loses only to a racing grant
  for (int pass = 0; pass < kMaxPasses; ++pass) {
    auto acks = each<Result<std::uint64_t>>([&](Instance& i) {
      const std::size_t idx = index_of(i);
      return i.fence(name, tokens[idx], top);
    });
    std::size_t ok = 0;
    std::uint64_t seen = top;
    std::string failures;
    for (auto& a : acks) {
      if (a.ok()) {
        ++ok;
        seen = std::max(seen, *a);
      } else {
        failures += "; " + a.error().message();
      }
    }
    if (ok < quorum_) return too_few(ok, failures);
    if (seen == top) return top;
    top = seen;  // the least value no answering instance has issued
  }
  return Error(Errc::unavailable,
               "redlock: lock " + core::quote_name(name) +
                   ": no unique fencing token settled after " +
                   std::to_string(kMaxPasses) + " passes (racing grants)");
}

Result<Grant> RedlockStore::finish(const AcquireSpec& spec,
                                   std::vector<Result<AcqReply>>& replies,
                                   Steady::time_point t0,
                                   Steady::time_point call_start,
                                   std::int64_t seq) {
  std::vector<microseconds> vf;
  std::vector<OwnerToken> tokens(inst_.size(), spec.token);
  std::uint64_t top = 0;
  std::optional<Grant> g;
  bool unanimous = true;  // every instance granted, with one token value
  for (std::size_t i = 0; i < replies.size(); ++i) {
    auto& r = replies[i];
    if (!r.ok() || r->kind != AcqReply::Kind::granted) {
      unanimous = false;
      continue;
    }
    vf.push_back(r->grant.valid_for);
    tokens[i] = r->grant.token;
    if (g && r->grant.fencing_token != top) unanimous = false;
    top = std::max(top, r->grant.fencing_token);
    if (!g) g = r->grant;
  }
  const std::size_t q = quorum_for(spec.capacity);
  if (!validity(vf, spec.ttl, t0, q)) {
    release_all(spec.name, spec.token, seq);
    return Error(Errc::unavailable,
                 "redlock: the majority for lock " +
                     core::quote_name(spec.name) +
                     " was reached too late to leave any validity");
  }
  // Every instance answered with the same token: each counter already is
  // that token (its INCR returned it), so there is nothing to raise.
  if (!unanimous) {
    auto fenced = raise_fence(spec.name, tokens, top);
    if (!fenced.ok()) {
      release_all(spec.name, spec.token, seq);
      return std::move(fenced).error();
    }
    top = *fenced;
  }
  g->fencing_token = top;
  g->shared = spec.shared;
  g->valid_for = std::chrono::duration_cast<microseconds>(t0 - call_start) +
                 kth_largest(vf, q);
  return *g;
}

}  // namespace redis

Result<std::unique_ptr<Store>> open_redlock_store(const core::Url& url) {
  if (url.scheme != "redlock") {
    return Error(Errc::invalid_argument,
                 "store URL \"" + url.safe() + "\" is not a redlock:// URL");
  }
  if (url.hosts.size() < 3) {
    return Error(Errc::invalid_argument, "store URL \"" + url.safe() +
                                             "\": redlock:// needs at least "
                                             "3 independent masters (got " +
                                             std::to_string(url.hosts.size()) +
                                             ")");
  }
  auto config = redis::parse_config(url, milliseconds(250));
  if (!config.ok()) return std::move(config).error();
  std::vector<redis::Target> targets;
  for (const auto& h : url.hosts) {
    redis::Target t;
    t.host = h.host;
    t.port = h.port == 0 ? 6379 : h.port;
    t.user = config->user;
    t.password = config->password;
    t.db = config->db;
    t.timeout = config->timeout;
    t.tls = config->tls;
    targets.push_back(std::move(t));
  }
  return std::unique_ptr<Store>(std::make_unique<redis::RedlockStore>(
      std::move(targets), *config, url.safe()));
}

}  // namespace baton::store
