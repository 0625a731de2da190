// stores/redis/redlock_impl.h — the RedlockStore class (internal; see
// redlock_store.h for the contract). Single calls, fencing and the
// judging of a round's grants live in redlock_store.cc; one acquire's
// request (its ticket, rounds and split) in redlock_request.cc;
// acquire_some / acquire_all in redlock_multi.cc.
#ifndef BATON_STORES_REDIS_REDLOCK_IMPL_H_
#define BATON_STORES_REDIS_REDLOCK_IMPL_H_

#include <algorithm>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "core/jitter.h"
#include "stores/redis/common.h"
#include "stores/redis/instance.h"
#include "stores/redis/task_pool.h"

namespace baton::store::redis {

// A request that holds grants on fewer than a quorum (a split) for longer
// than a jittered 0.3–0.9 s gives them back and enqueues again; a split
// that ends resets it.
class Split {
 public:
  // Notes one round; true when the split has lasted past its timeout (it
  // then starts over).
  bool overdue(bool split) {
    if (!split) {
      since_ = {};
      return false;
    }
    const auto now = Steady::now();
    if (since_ == Steady::time_point{}) {
      since_ = now;
      timeout_ = core::jittered(milliseconds(300), 1.0, 3.0);
      return false;
    }
    if (now - since_ <= timeout_) return false;
    since_ = {};
    return true;
  }

 private:
  Steady::time_point since_{};  // epoch: no split
  milliseconds timeout_{0};
};

inline microseconds drift_of(milliseconds ttl) {
  return microseconds(ttl.count() * 10) + microseconds(2000);  // 1% + 2 ms
}

// What one round's replies add up to (acquire or multi).
struct Tally {
  std::size_t answered = 0;
  std::size_t granted = 0;  // acquire: instances that granted
  std::size_t withdrawn = 0;
  const Error* busy = nullptr;  // the first `busy` reply's error
  std::string failures;         // "; <error>" per instance that failed
  std::optional<Error> fatal;   // an error no other instance can outvote
};

class RedlockStore final : public baton::Store {
 public:
  RedlockStore(std::vector<Target> targets, const std::string& prefix,
               std::string url);

  std::unique_ptr<Request> request(const AcquireSpec& spec) override;
  std::unique_ptr<MultiRequest> request_multi(const MultiSpec& spec) override;
  Result<Grant> extend(std::string_view name, const OwnerToken& token,
                       milliseconds ttl, const CallContext& ctx) override;
  Result<ReleaseResult> release(std::string_view name, const OwnerToken& token,
                                const CallContext& ctx) override;
  Result<LockInfo> describe(std::string_view name,
                            const CallContext& ctx) override;
  Result<std::vector<LockInfo>> list(std::string_view prefix, std::size_t limit,
                                     const CallContext& ctx) override;
  Result<std::int64_t> counter_get(std::string_view,
                                   const CallContext&) override {
    return no_counters();
  }
  Result<std::int64_t> counter_add(std::string_view, std::int64_t,
                                   const CallContext&) override {
    return no_counters();
  }
  Result<std::int64_t> counter_take(std::string_view, std::int64_t,
                                    const CallContext&) override {
    return no_counters();
  }
  // Rule 18: each instance's script keeps the modes; a reader and a writer
  // cannot both hold a majority (two majorities share an instance).
  bool supports_shared() const override { return true; }
  milliseconds recheck_interval() const override {
    return redis::recheck_interval();
  }
  std::string safe_url() const override { return url_; }
  // The union of the masters' keyspace feeds (watch.h), given when a
  // majority has notifications on: every change a quorum made (a grant,
  // a release, a queued request) reached at least one of that majority.
  Result<std::unique_ptr<Waitable>> watch(std::string_view prefix,
                                          const CallContext& ctx) override;

  // --- For the requests (redlock_request.cc, redlock_multi.cc) ------------

  // Runs f(instance, ctx) on every instance in parallel (pooled threads,
  // each with its copy of ctx, see TaskPool).
  template <typename T, typename F>
  std::vector<T> each(const CallContext& ctx, F&& f) {
    std::vector<std::optional<T>> out(inst_.size());
    pool_.run_all(inst_.size(), ctx, [&](std::size_t i, const CallContext& c) {
      out[i].emplace(f(*inst_[i], c));
    });
    std::vector<T> res;
    res.reserve(out.size());
    for (auto& o : out) res.push_back(std::move(*o));
    if constexpr (!std::is_same_v<T, bool>) {
      // restart_guard: the answer of an instance whose lock data is younger
      // than the guard is not a vote (it ran, so a lease it granted stays
      // there and goes with the round's clean-up).
      for (std::size_t i = 0; i < res.size(); ++i) {
        if (auto why = not_a_vote(i)) res[i] = Error(Errc::unavailable, *why);
      }
    }
    return res;
  }
  // Why instance i's answers are not counted now (restart_guard), or none.
  std::optional<std::string> not_a_vote(std::size_t i) const;

  // `seq` > 0: the clean-up of round `seq`, which leaves alone what a later
  // round of this token was granted (see next_seq).
  void release_all(std::string_view name, const OwnerToken& token,
                   std::int64_t seq, const CallContext& ctx);
  // The same for several names (a reservation's round).
  void release_names(const std::vector<std::string>& names,
                     const OwnerToken& token, std::int64_t seq,
                     const CallContext& ctx);

  // Instances that must grant a lock of `capacity`. A majority is enough
  // for a mutex; for a semaphore, capacity + 1 holders must not fit in the
  // N × capacity slots, so q > N·c / (c + 1) (q = N/2 + 1 when c = 1).
  std::size_t quorum_for(std::uint32_t capacity) const {
    const std::size_t n = inst_.size(), c = capacity;
    return std::min(n, std::max(quorum_, n * c / (c + 1) + 1));
  }
  std::size_t size() const { return inst_.size(); }
  std::vector<Instance*> instances() const;
  // The instance a push came from (size() if none).
  std::size_t index_of_source(const void* from) const;
  Notifier& notifier() { return notifier_; }

  // A round's number, increasing within the process (and across processes
  // that retry one token, as far as their clocks agree: it starts from the
  // system clock in µs). Every acquire round sends it, and its clean-ups
  // (release_all, yield, withdraw) carry it, so an instance that gets a
  // clean-up late — after a later round of the same owner token (a client
  // retry, rule 17, or the next round of one wait) was granted there —
  // leaves that grant alone. Without it a delayed network reorders them: a
  // round times out, its release_all is still in flight, the retry is
  // granted on a majority, then the old release lands and frees the lock
  // under the holder.
  static std::int64_t next_seq();

  // The grant of a round (or of pushes) whose replies hold a quorum of
  // grants: validity, fencing; `t0`: when the round was sent; valid_for
  // counts from `first_ask` (rule 14). Releases everything on failure.
  Result<Grant> finish(const AcquireSpec& spec,
                       const std::vector<Result<AcqReply>>& replies,
                       Steady::time_point t0, Steady::time_point first_ask,
                       std::int64_t seq, const CallContext& ctx);
  // The same for the `names` a reservation's round holds on a quorum.
  Result<std::vector<Grant>> finish_multi(
      const MultiSpec& spec, const std::vector<Result<MultiReply>>& replies,
      const std::vector<std::string>& names, Steady::time_point t0,
      Steady::time_point first_ask, std::int64_t seq, const CallContext& ctx);

  // unavailable: "redlock: only 1 of 3 instances answered; ...".
  // `unavailable`: only `answered` instances answered; `quorum` (0: the
  // majority) were needed — a semaphore's quorum is larger (quorum_for).
  Error too_few(std::size_t answered, const std::string& failures,
                std::size_t quorum = 0) const;
  // The failures of a round's replies, and whether one is an error that
  // no other instance outvotes (anything but unavailable/internal/timeout).
  template <typename T>
  static void note_failure(const Result<T>& r, Tally* t) {
    const Errc c = r.error().code();
    if (c != Errc::unavailable && c != Errc::internal && c != Errc::timeout) {
      if (!t->fatal) t->fatal = r.error();
      return;
    }
    t->failures += "; " + r.error().message();
  }

 private:
  static Error no_counters() {
    return Error(Errc::invalid_argument,
                 "counters are not offered by redlock://: independent masters "
                 "have no atomic read-modify-write across a majority (use "
                 "redis://)");
  }

  // The q-th largest remaining lease: a quorum holds it that long.
  static microseconds kth_largest(std::vector<microseconds> vf, std::size_t q) {
    std::sort(vf.begin(), vf.end(), std::greater<>());
    return q >= 1 && vf.size() >= q ? vf[q - 1] : microseconds(0);
  }

  // Redlock validity: min(ttl, majority's remaining) − elapsed − drift.
  static std::optional<microseconds> validity(
      const std::vector<microseconds>& vf, milliseconds ttl,
      Steady::time_point t0, std::size_t q) {
    const auto elapsed =
        std::chrono::duration_cast<microseconds>(Steady::now() - t0);
    const auto v = std::min<microseconds>(ttl, kth_largest(vf, q)) - elapsed -
                   drift_of(ttl);
    if (v <= microseconds(0)) return std::nullopt;
    return v;
  }

  template <typename T, typename F, typename M>
  Result<T> quorum_answer(const CallContext& ctx, F&& f, M&& merge);
  // Fencing over the majority: raise every instance to the maximum.
  Result<std::uint64_t> raise_fence(std::string_view name,
                                    const std::vector<OwnerToken>& tokens,
                                    std::uint64_t top, const CallContext& ctx);
  // The lease `name` of a quorum among `replies`, fenced (finish_multi).
  Result<Grant> finish_name(const MultiSpec& spec,
                            const std::vector<Result<MultiReply>>& replies,
                            const std::string& name, Steady::time_point t0,
                            Steady::time_point first_ask,
                            const CallContext& ctx);

  const std::string url_;
  Notifier notifier_;  // before inst_: their subscribers wake it
  std::vector<std::unique_ptr<Instance>> inst_;
  std::size_t quorum_ = 1;
  TaskPool pool_;  // last: joined before the instances go
};

}  // namespace baton::store::redis

#endif  // BATON_STORES_REDIS_REDLOCK_IMPL_H_
