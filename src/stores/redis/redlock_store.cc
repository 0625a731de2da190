// stores/redis/redlock_store.cc — Redlock over N masters (redlock_store.h).
#include "stores/redis/redlock_store.h"

#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <thread>
#include <utility>

#include "stores/redis/common.h"
#include "stores/redis/instance.h"

namespace baton::store {
namespace {

using namespace redis;  // NOLINT
using std::chrono::microseconds;

milliseconds split_timeout() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  return milliseconds(std::uniform_int_distribution<int>(300, 900)(rng));
}

microseconds drift_of(milliseconds ttl) {
  return microseconds(ttl.count() * 10) + microseconds(2000);  // 1% + 2 ms
}

class RedlockStore final : public Store {
 public:
  RedlockStore(std::vector<Target> targets, const StoreConfig& config,
               std::string url)
      : url_(std::move(url)) {
    for (auto& t : targets) {
      inst_.push_back(
          std::make_unique<Instance>(std::move(t), config.prefix, notifier_));
    }
    quorum_ = inst_.size() / 2 + 1;
  }

  Result<Grant> acquire(const AcquireSpec& spec, milliseconds wait) override {
    if (Status st = check_acquire(spec, wait); !st.ok()) return st.error();
    const auto call_start = Steady::now();
    const bool waiting = wait > milliseconds::zero();
    const auto end = waiting ? wait_end(wait) : call_start;
    const std::string key = spec.token.to_string();
    std::shared_ptr<Notifier::Slot> slot;
    if (waiting) {
      each([&](Instance& i) { i.ensure_subscribed(); });
      slot = notifier_.enter(key);
    }
    struct Leave {
      Notifier& n;
      const std::string& k;
      bool on;
      ~Leave() {
        if (on) n.leave(k);
      }
    } leave{notifier_, key, waiting};
    Steady::time_point split_since{};  // epoch: no split
    const std::size_t quorum = quorum_for(spec.capacity);
    bool enqueue = true;  // first round, or again after a split
    for (;;) {
      const bool first = std::exchange(enqueue, false);
      const std::uint64_t seen = waiting ? notifier_.gen(*slot) : 0;
      const std::int64_t left = ms_left(end);
      if (waiting && left <= 0) break;
      const auto t0 = Steady::now();
      auto replies = each<Result<AcqReply>>([&](Instance& i) {
        return i.acquire(spec,
                         !waiting ? kTry
                         : first  ? kWait
                                  : kRefresh,
                         left);
      });
      std::size_t answered = 0, granted = 0, withdrawn = 0;
      const Error* busy = nullptr;
      std::string failures;
      for (std::size_t i = 0; i < replies.size(); ++i) {
        auto& r = replies[i];
        if (!r.ok()) {
          if (r.error().code() != Errc::unavailable &&
              r.error().code() != Errc::internal) {
            release_all(spec.name, spec.token);
            return r.error();
          }
          failures += "; " + r.error().message();
          continue;
        }
        ++answered;
        if (r->kind == AcqReply::Kind::granted) ++granted;
        if (r->kind == AcqReply::Kind::withdrawn) ++withdrawn;
        if (r->kind == AcqReply::Kind::busy && busy == nullptr) busy = &r->busy;
      }
      if (granted >= quorum) {
        return finish(spec, replies, t0, call_start);
      }
      if (withdrawn > 0) {
        release_all(spec.name, spec.token);
        return Error(Errc::not_acquired, "the request for lock " +
                                             core::quote_name(spec.name) +
                                             " was withdrawn while it waited");
      }
      if (answered < quorum) {
        release_all(spec.name, spec.token);
        return too_few(answered, failures);
      }
      if (!waiting) {
        release_all(spec.name, spec.token);
        if (busy != nullptr) return *busy;
        return Error(Errc::not_acquired,
                     "lock " + core::quote_name(spec.name) +
                         " was granted on " + std::to_string(granted) + " of " +
                         std::to_string(inst_.size()) +
                         " instances; the quorum is " + std::to_string(quorum));
      }
      if (granted > 0) {
        if (split_since == Steady::time_point{}) {
          split_since = Steady::now();
        } else if (Steady::now() - split_since > split_timeout()) {
          release_all(spec.name, spec.token);  // requeue at the tail
          split_since = {};
          enqueue = true;
          continue;
        }
      } else {
        split_since = {};
      }
      notifier_.wait(*slot, seen,
                     std::min(end, Steady::now() + recheck_period()));
    }
    const auto t0 = Steady::now();
    auto replies = each<Result<AcqReply>>(
        [&](Instance& i) { return i.acquire(spec, kWithdraw, 0); });
    std::size_t granted = 0;
    for (auto& r : replies) {
      if (r.ok() && r->kind == AcqReply::Kind::granted) ++granted;
    }
    if (granted >= quorum) return finish(spec, replies, t0, call_start);
    release_all(spec.name, spec.token);
    return Error(Errc::timeout, "lock " + core::quote_name(spec.name) +
                                    " was not granted on a majority within " +
                                    std::to_string(wait.count()) + "ms");
  }

  Result<Grant> extend(std::string_view name, const OwnerToken& token,
                       milliseconds ttl) override {
    if (Status st = core::validate_name(name); !st.ok()) return st.error();
    if (Status st = core::validate_ttl(ttl); !st.ok()) return st.error();
    const auto t0 = Steady::now();
    auto replies = each<Result<Grant>>(
        [&](Instance& i) { return i.extend(name, token, ttl); });
    std::size_t ok = 0, answered = 0;
    std::string failures;
    std::vector<microseconds> vf;
    std::optional<Grant> best;
    for (auto& r : replies) {
      if (r.ok()) {
        ++ok;
        ++answered;
        vf.push_back(r->valid_for);
        if (!best || r->fencing_token > best->fencing_token) best = *r;
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
    release_all(name, token);
    return Error(Errc::lock_lost, "lock " + core::quote_name(name) +
                                      " is held with this owner "
                                      "token on only " +
                                      std::to_string(ok) + " of " +
                                      std::to_string(inst_.size()) +
                                      " instances (the quorum is " +
                                      std::to_string(q) +
                                      "): the lease is lost");
  }

  Result<ReleaseResult> release(std::string_view name,
                                const OwnerToken& token) override {
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

  Result<LockInfo> describe(std::string_view name) override {
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

  Result<std::vector<LockInfo>> list(std::string_view prefix,
                                     std::size_t limit) override {
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

  Result<std::vector<Grant>> acquire_multi(const MultiSpec& spec,
                                           milliseconds wait) override;

  Result<std::int64_t> counter_get(std::string_view) override {
    return no_counters();
  }
  Result<std::int64_t> counter_add(std::string_view, std::int64_t) override {
    return no_counters();
  }
  Result<std::int64_t> counter_take(std::string_view, std::int64_t) override {
    return no_counters();
  }

  std::string safe_url() const override { return url_; }

 private:
  static Error no_counters() {
    return Error(Errc::invalid_argument,
                 "counters are not offered by redlock://: independent masters "
                 "have no atomic read-modify-write across a majority (use "
                 "redis://)");
  }

  Error too_few(std::size_t answered, const std::string& failures) const {
    return Error(Errc::unavailable, "redlock: only " +
                                        std::to_string(answered) + " of " +
                                        std::to_string(inst_.size()) +
                                        " instances answered; a majority is " +
                                        std::to_string(quorum_) + failures);
  }

  // Runs f on every instance in parallel (one thread per extra instance).
  template <typename T>
  std::vector<T> each(const std::function<T(Instance&)>& f) {
    std::vector<std::optional<T>> out(inst_.size());
    std::vector<std::thread> threads;
    for (std::size_t i = 1; i < inst_.size(); ++i) {
      threads.emplace_back([&, i] { out[i].emplace(f(*inst_[i])); });
    }
    out[0].emplace(f(*inst_[0]));
    for (auto& t : threads) t.join();
    std::vector<T> res;
    res.reserve(out.size());
    for (auto& o : out) res.push_back(std::move(*o));
    return res;
  }
  void each(const std::function<void(Instance&)>& f) {
    std::vector<std::thread> threads;
    for (std::size_t i = 1; i < inst_.size(); ++i) {
      threads.emplace_back([&, i] { f(*inst_[i]); });
    }
    f(*inst_[0]);
    for (auto& t : threads) t.join();
  }

  void release_all(std::string_view name, const OwnerToken& token) {
    each([&](Instance& i) { (void)i.release(name, token); });
  }
  void release_names(const std::vector<std::string>& names,
                     const OwnerToken& token) {
    each([&](Instance& i) {
      for (const auto& n : names) (void)i.release(n, token);
    });
  }

  // Instances that must grant a lock of `capacity`. A majority is enough
  // for a mutex; for a semaphore, capacity + 1 holders must not fit in the
  // N × capacity slots, so q > N·c / (c + 1) (q = N/2 + 1 when c = 1).
  std::size_t quorum_for(std::uint32_t capacity) const {
    const std::size_t n = inst_.size(), c = capacity;
    return std::min(n, std::max(quorum_, n * c / (c + 1) + 1));
  }

  // The q-th largest remaining lease: a quorum holds it that long.
  microseconds kth_largest(std::vector<microseconds> vf, std::size_t q) const {
    std::sort(vf.begin(), vf.end(), std::greater<>());
    return q >= 1 && vf.size() >= q ? vf[q - 1] : microseconds(0);
  }

  // Redlock validity: min(ttl, majority's remaining) − elapsed − drift.
  std::optional<microseconds> validity(const std::vector<microseconds>& vf,
                                       milliseconds ttl, Steady::time_point t0,
                                       std::size_t q) const {
    const auto elapsed =
        std::chrono::duration_cast<microseconds>(Steady::now() - t0);
    const auto v = std::min<microseconds>(ttl, kth_largest(vf, q)) - elapsed -
                   drift_of(ttl);
    if (v <= microseconds(0)) return std::nullopt;
    return v;
  }

  // Fencing over the majority: raise every instance to the maximum.
  Result<std::uint64_t> raise_fence(std::string_view name,
                                    const std::vector<OwnerToken>& tokens,
                                    std::uint64_t top, bool again = false) {
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
    if (seen > top && !again) {
      // An instance outside the majority has seen a larger token (e.g. the
      // majority lost its data): go past it.
      return raise_fence(name, tokens, seen + 1, true);
    }
    return top;
  }

  std::size_t index_of(const Instance& i) const {
    for (std::size_t k = 0; k < inst_.size(); ++k) {
      if (inst_[k].get() == &i) return k;
    }
    return 0;
  }

  Result<Grant> finish(const AcquireSpec& spec,
                       std::vector<Result<AcqReply>>& replies,
                       Steady::time_point t0, Steady::time_point call_start) {
    std::vector<microseconds> vf;
    std::vector<OwnerToken> tokens(inst_.size(), spec.token);
    std::uint64_t top = 0;
    std::optional<Grant> g;
    for (std::size_t i = 0; i < replies.size(); ++i) {
      auto& r = replies[i];
      if (!r.ok() || r->kind != AcqReply::Kind::granted) continue;
      vf.push_back(r->grant.valid_for);
      tokens[i] = r->grant.token;
      top = std::max(top, r->grant.fencing_token);
      if (!g) g = r->grant;
    }
    const std::size_t q = quorum_for(spec.capacity);
    if (!validity(vf, spec.ttl, t0, q)) {
      release_all(spec.name, spec.token);
      return Error(Errc::unavailable,
                   "redlock: the majority for lock " +
                       core::quote_name(spec.name) +
                       " was reached too late to leave any validity");
    }
    auto fenced = raise_fence(spec.name, tokens, top);
    if (!fenced.ok()) {
      release_all(spec.name, spec.token);
      return std::move(fenced).error();
    }
    g->fencing_token = *fenced;
    g->valid_for = std::chrono::duration_cast<microseconds>(t0 - call_start) +
                   kth_largest(vf, q);
    return *g;
  }

  Result<std::vector<Grant>> finish_multi(
      const MultiSpec& spec, std::vector<Result<MultiReply>>& replies,
      const std::vector<std::string>& names, Steady::time_point t0,
      Steady::time_point call_start);

  const std::string url_;
  Notifier notifier_;  // before inst_: their subscribers wake it
  std::vector<std::unique_ptr<Instance>> inst_;
  std::size_t quorum_ = 1;
};

Result<std::vector<Grant>> RedlockStore::finish_multi(
    const MultiSpec& spec, std::vector<Result<MultiReply>>& replies,
    const std::vector<std::string>& names, Steady::time_point t0,
    Steady::time_point call_start) {
  std::vector<Grant> out;
  for (const auto& name : names) {
    std::vector<microseconds> vf;
    std::vector<OwnerToken> tokens(inst_.size(), spec.reservation);
    std::optional<Grant> g;
    std::uint64_t top = 0;
    for (auto& r : replies) {
      if (!r.ok()) continue;
      for (const auto& gi : r->grants) {
        if (gi.name != name) continue;
        vf.push_back(gi.valid_for);
        top = std::max(top, gi.fencing_token);
        if (!g) g = gi;
      }
    }
    const std::size_t q = quorum_for(spec.capacity);
    if (!g || !validity(vf, spec.ttl, t0, q)) {
      release_names(spec.names, spec.reservation);
      return Error(Errc::unavailable,
                   "redlock: the majority for lock " + core::quote_name(name) +
                       " was reached too late to leave any validity");
    }
    auto fenced = raise_fence(name, tokens, top);
    if (!fenced.ok()) {
      release_names(spec.names, spec.reservation);
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
  if (Status st = check_multi(spec, wait); !st.ok()) return st.error();
  const auto call_start = Steady::now();
  const std::size_t n = spec.names.size();
  const bool aon = spec.all_or_nothing;
  const bool waiting = wait > milliseconds::zero();
  const auto end = waiting ? wait_end(wait) : call_start;
  const std::string key = spec.reservation.to_string();
  each([&](Instance& i) { i.ensure_subscribed(); });
  auto slot = notifier_.enter(key);
  struct Leave {
    Notifier& nt;
    const std::string& k;
    ~Leave() { nt.leave(k); }
  } leave{notifier_, key};
  Steady::time_point split_since{};  // epoch: no split
  const std::size_t q = quorum_for(spec.capacity);
  for (;;) {
    const std::uint64_t seen = notifier_.gen(*slot);
    const std::int64_t left = ms_left(end);
    if (aon && waiting && left <= 0) break;
    const auto t0 = Steady::now();
    const char* mode = aon && !waiting ? kTry : kWait;
    const std::int64_t qms = aon ? left : spec.ttl.count();
    auto replies = each<Result<MultiReply>>(
        [&](Instance& i) { return i.multi(spec, mode, qms); });
    std::size_t answered = 0, full = 0;
    const Error* busy = nullptr;
    std::string failures;
    std::map<std::string, std::size_t> count;
    for (auto& r : replies) {
      if (!r.ok()) {
        if (r.error().code() != Errc::unavailable &&
            r.error().code() != Errc::internal) {
          if (aon) release_names(spec.names, spec.reservation);
          return r.error();
        }
        failures += "; " + r.error().message();
        continue;
      }
      ++answered;
      if (r->kind == MultiReply::Kind::busy && busy == nullptr) busy = &r->busy;
      if (r->grants.size() == n) ++full;
      for (const auto& g : r->grants) ++count[g.name];
    }
    std::vector<std::string> majority, minority;
    for (const auto& name : spec.names) {
      const std::size_t c = count.count(name) ? count[name] : 0;
      if (c >= q) {
        majority.push_back(name);
      } else if (c > 0) {
        minority.push_back(name);
      }
    }
    if (aon && full >= q) {
      return finish_multi(spec, replies, spec.names, t0, call_start);
    }
    if (answered < q) {
      if (aon) release_names(spec.names, spec.reservation);
      return too_few(answered, failures);
    }
    if (aon && !waiting) {
      release_names(spec.names, spec.reservation);
      if (busy != nullptr) return *busy;
      return Error(Errc::not_acquired, "not all of the " + std::to_string(n) +
                                           " locks are free on a majority");
    }
    if (!aon && (!majority.empty() || !waiting || left <= 0)) {
      if (!minority.empty()) release_names(minority, spec.reservation);
      return finish_multi(spec, replies, majority, t0, call_start);
    }
    const bool split =
        aon ? (full > 0 || !majority.empty() || !minority.empty())
            : !minority.empty();
    if (split) {
      if (split_since == Steady::time_point{}) {
        split_since = Steady::now();
      } else if (Steady::now() - split_since > split_timeout()) {
        release_names(aon ? spec.names : minority, spec.reservation);
        split_since = {};
        continue;
      }
    } else {
      split_since = {};
    }
    notifier_.wait(*slot, seen,
                   std::min(end, Steady::now() + recheck_period()));
  }
  const auto t0 = Steady::now();
  auto replies = each<Result<MultiReply>>(
      [&](Instance& i) { return i.multi(spec, kWithdraw, 0); });
  std::size_t full = 0;
  for (auto& r : replies) {
    if (r.ok() && r->kind == MultiReply::Kind::ok && r->grants.size() == n) {
      ++full;
    }
  }
  if (full >= q) {
    return finish_multi(spec, replies, spec.names, t0, call_start);
  }
  release_names(spec.names, spec.reservation);
  return Error(Errc::timeout, "not all of the " + std::to_string(n) +
                                  " locks were granted on a majority within " +
                                  std::to_string(wait.count()) + "ms");
}

}  // namespace

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
  auto config = parse_config(url, milliseconds(250));
  if (!config.ok()) return std::move(config).error();
  std::vector<Target> targets;
  for (const auto& h : url.hosts) {
    Target t;
    t.host = h.host;
    t.port = h.port == 0 ? 6379 : h.port;
    t.user = config->user;
    t.password = config->password;
    t.db = config->db;
    t.timeout = config->timeout;
    targets.push_back(std::move(t));
  }
  return std::unique_ptr<Store>(
      std::make_unique<RedlockStore>(std::move(targets), *config, url.safe()));
}

}  // namespace baton::store
