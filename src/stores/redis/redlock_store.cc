// stores/redis/redlock_store.cc — Redlock over N masters (redlock_store.h):
// construction, single calls, fencing and the judging of a round's grants.
#include "stores/redis/redlock_store.h"

#include <algorithm>
#include <atomic>
#include <future>
#include <optional>
#include <utility>

#include "baton/duration.h"
#include "core/validate.h"
#include "stores/redis/redlock_impl.h"
#include "stores/redis/watch.h"

namespace baton::store {
namespace redis {

RedlockStore::RedlockStore(std::vector<Target> targets,
                           const std::string& prefix, std::string url)
    : url_(std::move(url)) {
  for (auto& t : targets) {
    inst_.push_back(
        std::make_unique<Instance>(std::move(t), prefix, notifier_));
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

std::vector<Instance*> RedlockStore::instances() const {
  std::vector<Instance*> out;
  for (const auto& i : inst_) out.push_back(i.get());
  return out;
}

std::optional<std::string> RedlockStore::not_a_vote(std::size_t i) const {
  const milliseconds left = inst_[i]->guarded_for(Steady::now());
  if (left <= milliseconds::zero()) return std::nullopt;
  const Target& t = inst_[i]->target();
  return t.where() + ": its lock data is younger than restart_guard=" +
         format_duration(t.restart_guard) +
         " (restarted without its data, flushed, or new): its votes count "
         "in " +
         format_duration(left);
}

std::size_t RedlockStore::index_of_source(const void* from) const {
  for (std::size_t k = 0; k < inst_.size(); ++k) {
    if (inst_[k]->push_source() == from) return k;
  }
  return inst_.size();
}

Error RedlockStore::too_few(std::size_t answered, const std::string& failures,
                            std::size_t quorum) const {
  const std::string needed =
      quorum == 0 || quorum == quorum_
          ? "a majority is " + std::to_string(quorum_)
          : "a lock of this capacity needs " + std::to_string(quorum);
  Error e(Errc::unavailable, "redlock: only " + std::to_string(answered) +
                                 " of " + std::to_string(inst_.size()) +
                                 " instances answered; " + needed + failures);
  // restart_guard: when the guarded instances held back make up the
  // missing answers, the call can be answered once the guard of the last
  // one needed has run out (the engine waits that long within its wait).
  const std::size_t q = quorum == 0 ? quorum_ : quorum;
  std::vector<milliseconds> guarded;
  const auto now = Steady::now();
  for (const auto& i : inst_) {
    const milliseconds left = i->guarded_for(now);
    if (left > milliseconds::zero()) guarded.push_back(left);
  }
  if (answered < q && guarded.size() >= q - answered) {
    std::sort(guarded.begin(), guarded.end());
    // + 1 ms: a retry that wakes right at the end finds the guard over.
    e.with_retry_after(guarded[q - answered - 1] + milliseconds{1});
  }
  return e;
}

void RedlockStore::release_all(std::string_view name, const OwnerToken& token,
                               std::int64_t seq, const CallContext& ctx) {
  (void)each<bool>(ctx, [&](Instance& i, const CallContext& c) {
    return i.release(name, token, c, seq).ok();
  });
}

void RedlockStore::release_names(const std::vector<std::string>& names,
                                 const OwnerToken& token, std::int64_t seq,
                                 const CallContext& ctx) {
  (void)each<bool>(ctx, [&](Instance& i, const CallContext& c) {
    for (const auto& n : names) (void)i.release(n, token, c, seq);
    return true;
  });
}

Result<Grant> RedlockStore::extend(std::string_view name,
                                   const OwnerToken& token, milliseconds ttl,
                                   const CallContext& ctx) {
  const auto t0 = Steady::now();
  auto replies =
      each<Result<Grant>>(ctx, [&](Instance& i, const CallContext& c) {
        return i.extend(name, token, ttl, c);
      });
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
      const auto a = votes(r->fencing_token);
      const auto b = best ? votes(best->fencing_token) : 0;
      if (!best || a > b ||
          (a == b && r->fencing_token < best->fencing_token)) {
        best = *r;
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
    return too_few(answered, failures, q);
  }
  // The partial extensions are NOT released here: the caller still acts on
  // the lease until it learns of the loss, and a Session gives a lost lease
  // back only after its on_lost notice ran (rule 13). Releasing them here
  // would let another worker take the mutex on the instances freed (with
  // the ones this lease no longer held) before the holder's notice. They
  // expire at their TTL, or go with the caller's release.
  return Error(Errc::lock_lost, "lock " + core::quote_name(name) +
                                    " is held with this owner "
                                    "token on only " +
                                    std::to_string(ok) + " of " +
                                    std::to_string(inst_.size()) +
                                    " instances (the quorum is " +
                                    std::to_string(q) + "): the lease is lost");
}

Result<ReleaseResult> RedlockStore::release(std::string_view name,
                                            const OwnerToken& token,
                                            const CallContext& ctx) {
  auto replies =
      each<Result<ReleaseResult>>(ctx, [&](Instance& i, const CallContext& c) {
        return i.release(name, token, c);
      });
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

// What a quorum of instances answered to `f`: the first answer, merged
// with each later one by `merge`.
template <typename T, typename F, typename M>
Result<T> RedlockStore::quorum_answer(const CallContext& ctx, F&& f,
                                      M&& merge) {
  auto replies = each<Result<T>>(ctx, std::forward<F>(f));
  std::optional<T> out;
  std::size_t answered = 0;
  std::string failures;
  for (auto& r : replies) {
    if (!r.ok()) {
      failures += "; " + r.error().message();
      continue;
    }
    ++answered;
    if (!out) {
      out = std::move(*r);
    } else {
      merge(*out, *r);
    }
  }
  if (answered < quorum_) return too_few(answered, failures);
  return std::move(*out);
}

Result<LockInfo> RedlockStore::describe(std::string_view name,
                                        const CallContext& ctx) {
  return quorum_answer<LockInfo>(
      ctx,
      [&](Instance& i, const CallContext& c) { return i.describe(name, c); },
      [](LockInfo& out, const LockInfo& other) {
        out.last_fencing_token =
            std::max(out.last_fencing_token, other.last_fencing_token);
      });
}

Result<std::vector<LockInfo>> RedlockStore::list(std::string_view prefix,
                                                 std::size_t limit,
                                                 const CallContext& ctx) {
  return quorum_answer<std::vector<LockInfo>>(
      ctx,
      [&](Instance& i, const CallContext& c) {
        return i.list(prefix, std::max<std::size_t>(limit, 1), c);
      },
      [](std::vector<LockInfo>&, const std::vector<LockInfo>&) {});
}

Result<std::unique_ptr<Waitable>> RedlockStore::watch(std::string_view prefix,
                                                      const CallContext& ctx) {
  return watch_keyspace(
      instances(), prefix, quorum_,
      [this, p = std::string(prefix)](const CallContext& c) {
        return list(p, kWatchedLocks, c);
      },
      ctx);
}

// Fencing over the majority: raise every instance to the maximum. A pass
// is settled when a majority answered and no instance reports the value
// taken (by another grant's INCR or raise, see kFenceBody): then no other
// grant can hold `top`. Otherwise it goes past the largest value seen.
Result<std::uint64_t> RedlockStore::raise_fence(
    std::string_view name, const std::vector<OwnerToken>& tokens,
    std::uint64_t top, const CallContext& ctx) {
  constexpr int kMaxPasses = 16;  // each pass loses only to a racing grant
  for (int pass = 0; pass < kMaxPasses; ++pass) {
    auto acks = each<Result<std::uint64_t>>(
        ctx, [&](Instance& i, const CallContext& c) {
          const std::size_t idx = index_of_source(i.push_source());
          return i.fence(name, tokens[idx], top, c);
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
                                   const std::vector<Result<AcqReply>>& replies,
                                   Steady::time_point t0,
                                   Steady::time_point first_ask,
                                   std::int64_t seq, const CallContext& ctx) {
  std::vector<microseconds> vf;
  std::vector<OwnerToken> tokens(inst_.size(), spec.token);
  std::uint64_t top = 0;
  std::optional<Grant> g;
  bool unanimous = true;  // every instance granted, with one token value
  for (std::size_t i = 0; i < replies.size(); ++i) {
    const auto& r = replies[i];
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
  if (!g || !validity(vf, spec.ttl, t0, q)) {
    release_all(spec.name, spec.token, seq, ctx);
    return Error(Errc::unavailable,
                 "redlock: the majority for lock " +
                     core::quote_name(spec.name) +
                     " was reached too late to leave any validity");
  }
  // Every instance answered with the same token: each counter already is
  // that token (its INCR returned it), so there is nothing to raise.
  if (!unanimous) {
    auto fenced = raise_fence(spec.name, tokens, top, ctx);
    if (!fenced.ok()) {
      release_all(spec.name, spec.token, seq, ctx);
      return std::move(fenced).error();
    }
    top = *fenced;
  }
  g->fencing_token = top;
  g->shared = spec.shared;
  g->valid_for = std::chrono::duration_cast<microseconds>(t0 - first_ask) +
                 kth_largest(vf, q);
  return *g;
}

Result<Grant> RedlockStore::finish_name(
    const MultiSpec& spec, const std::vector<Result<MultiReply>>& replies,
    const std::string& name, Steady::time_point t0,
    Steady::time_point first_ask, const CallContext& ctx) {
  std::vector<microseconds> vf;
  std::vector<OwnerToken> tokens(inst_.size(), spec.reservation);
  std::optional<Grant> g;
  std::uint64_t top = 0;
  for (std::size_t i = 0; i < replies.size(); ++i) {
    if (!replies[i].ok()) continue;
    for (const auto& gi : replies[i]->grants) {
      if (gi.name != name) continue;
      tokens[i] = gi.token;  // the lease the fence script raises
      vf.push_back(gi.valid_for);
      top = std::max(top, gi.fencing_token);
      if (!g) g = gi;
    }
  }
  const std::size_t q = quorum_for(spec.capacity);
  if (!g || !validity(vf, spec.ttl, t0, q)) {
    return Error(Errc::unavailable,
                 "redlock: the majority for lock " + core::quote_name(name) +
                     " was reached too late to leave any validity");
  }
  auto fenced = raise_fence(name, tokens, top, ctx);
  if (!fenced.ok()) return std::move(fenced).error();
  g->fencing_token = *fenced;
  g->valid_for = std::chrono::duration_cast<microseconds>(t0 - first_ask) +
                 kth_largest(vf, q);
  return *g;
}

Result<std::vector<Grant>> RedlockStore::finish_multi(
    const MultiSpec& spec, const std::vector<Result<MultiReply>>& replies,
    const std::vector<std::string>& names, Steady::time_point t0,
    Steady::time_point first_ask, std::int64_t seq, const CallContext& ctx) {
  std::vector<Grant> out;
  for (const auto& name : names) {
    auto g = finish_name(spec, replies, name, t0, first_ask, ctx);
    if (!g.ok()) {
      release_names(spec.names, spec.reservation, seq, ctx);
      return std::move(g).error();
    }
    out.push_back(std::move(*g));
  }
  return out;
}

}  // namespace redis

namespace {

// With a password or TLS, every master is connected to at open (at once,
// each within its timeout): a master that refuses the password or whose
// certificate does not verify fails open(), naming it. A master that does
// not answer is not an error here: the others may still make a quorum.
Status check_credentials(const std::vector<redis::Target>& targets) {
  if (targets.empty() || (!targets[0].tls && targets[0].password.empty())) {
    return {};
  }
  std::vector<std::future<Result<redis::ConnPtr>>> checks;
  for (const redis::Target& t : targets) {
    checks.push_back(std::async(
        std::launch::async, [&t] { return redis::connect(t, CallContext()); }));
  }
  std::optional<Error> refused;
  for (auto& check : checks) {
    auto c = check.get();
    if (c.ok() || refused) continue;
    const std::string& m = c.error().message();
    if (c.error().code() == Errc::permission_denied ||
        m.find("TLS handshake failed: server certificate") !=
            std::string::npos ||
        m.find("certificate required") != std::string::npos) {
      refused = c.error();
    }
  }
  if (refused) return *refused;
  return {};
}

Result<std::unique_ptr<baton::Store>> open_redlock(const StoreUrl& url) {
  if (url.hosts.size() < 3) {
    return Error(Errc::invalid_argument, "store URL \"" + url.safe +
                                             "\": redlock:// needs at least "
                                             "3 independent masters (got " +
                                             std::to_string(url.hosts.size()) +
                                             ")");
  }
  auto config = redis::config_of(url);
  if (!config.ok()) return std::move(config).error();
  if (Status st = check_credentials(config->targets); !st.ok()) {
    return st.error();
  }
  return std::unique_ptr<baton::Store>(std::make_unique<redis::RedlockStore>(
      std::move(config->targets), config->prefix, url.safe));
}

}  // namespace

const StoreDescriptor& redlock_descriptor() {
  static const StoreDescriptor d = [] {
    StoreDescriptor r;
    r.name = "redlock";
    r.schemes = {"redlock"};
    r.summary = "Redlock over 3 or more independent Redis 7 masters";
    r.url_form = "redlock://h1:p1,h2:p2,h3:p3[/db][?prefix=baton:&...]";
    r.default_port = 6379;
    r.options = redis::common_options("250ms");
    r.options.push_back(flag_option(
        "tls", "0", "TLS to every instance (then ca, cert and key apply)"));
    OptionSpec guard = duration_option(
        "restart_guard", "0",
        "count an instance's votes only once its lock data is this old, so "
        "one restarted without its data (no persistence) cannot vote away a "
        "lease it forgot: set it to at least the longest TTL any client uses "
        "(0: off; a new deployment then waits it out once)");
    guard.zero_ok = true;
    r.options.push_back(std::move(guard));
    r.open = open_redlock;
    return r;
  }();
  return d;
}

}  // namespace baton::store
