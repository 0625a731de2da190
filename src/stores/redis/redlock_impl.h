// stores/redis/redlock_impl.h — the RedlockStore class (internal; see
// redlock_store.h for the contract). Single-lock calls live in
// redlock_store.cc, acquire_some / acquire_all in redlock_multi.cc; the
// waiting loop of both is redis::Waiter (wait.h).
#ifndef BATON_STORES_REDIS_REDLOCK_IMPL_H_
#define BATON_STORES_REDIS_REDLOCK_IMPL_H_

#include <algorithm>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "stores/redis/common.h"
#include "stores/redis/instance.h"
#include "stores/redis/task_pool.h"
#include "stores/redis/wait.h"

namespace baton::store::redis {

using std::chrono::microseconds;

inline microseconds drift_of(milliseconds ttl) {
  return microseconds(ttl.count() * 10) + microseconds(2000);  // 1% + 2 ms
}

class RedlockStore final : public Store {
 public:
  RedlockStore(std::vector<Target> targets, const StoreConfig& config,
               std::string url);

  Result<Grant> acquire(const AcquireSpec& spec, milliseconds wait) override;
  Result<Grant> extend(std::string_view name, const OwnerToken& token,
                       milliseconds ttl) override;
  Result<ReleaseResult> release(std::string_view name,
                                const OwnerToken& token) override;
  Result<LockInfo> describe(std::string_view name) override;
  Result<std::vector<LockInfo>> list(std::string_view prefix,
                                     std::size_t limit) override;
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
  // Rule 18: each instance's script keeps the modes; a reader and a writer
  // cannot both hold a majority (two majorities share an instance).
  bool supports_shared() const override { return true; }
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

  // Runs f on every instance in parallel (pooled threads, see TaskPool).
  template <typename T>
  std::vector<T> each(const std::function<T(Instance&)>& f) {
    std::vector<std::optional<T>> out(inst_.size());
    pool_.run_all(inst_.size(),
                  [&](std::size_t i) { out[i].emplace(f(*inst_[i])); });
    std::vector<T> res;
    res.reserve(out.size());
    for (auto& o : out) res.push_back(std::move(*o));
    return res;
  }
  void each(const std::function<void(Instance&)>& f) {
    pool_.run_all(inst_.size(), [&](std::size_t i) { f(*inst_[i]); });
  }
  std::vector<Instance*> instances() const {
    std::vector<Instance*> out;
    for (const auto& i : inst_) out.push_back(i.get());
    return out;
  }

  // `seq` > 0: the clean-up of round `seq`, which leaves alone what a later
  // round of this token was granted (see next_seq).
  void release_all(std::string_view name, const OwnerToken& token,
                   std::int64_t seq = 0) {
    each([&](Instance& i) { (void)i.release(name, token, seq); });
  }
  // `seq` > 0: the clean-up of multi round `seq` (as release_all).
  void release_names(const std::vector<std::string>& names,
                     const OwnerToken& token, std::int64_t seq) {
    each([&](Instance& i) {
      for (const auto& n : names) (void)i.release(n, token, seq);
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

  std::size_t index_of(const Instance& i) const {
    for (std::size_t k = 0; k < inst_.size(); ++k) {
      if (inst_[k].get() == &i) return k;
    }
    return 0;
  }

  // A round's number, increasing within the process (and across processes
  // that retry one token, as far as their clocks agree: it starts from the
  // system clock in µs). Every acquire round sends it, and its clean-ups
  // (release_all, yield, withdraw) carry it, so an instance that gets a
  // clean-up late — after a later round of the same owner token (a client
  // retry, rule 17, or the next round of one wait) was granted there — leaves
  // that grant alone. Without it a delayed network reorders them: a round
  // times out, its release_all is still in flight, the retry is granted on a
  // majority, then the old release lands and frees the lock under the holder
  // (finding 10: three holders of a mutex after a proxy_delay healed).
  static std::int64_t next_seq();

  // Fencing over the majority: raise every instance to the maximum.
  Result<std::uint64_t> raise_fence(std::string_view name,
                                    const std::vector<OwnerToken>& tokens,
                                    std::uint64_t top, bool again = false);
  Result<Grant> finish(const AcquireSpec& spec,
                       std::vector<Result<AcqReply>>& replies,
                       Steady::time_point t0, Steady::time_point call_start,
                       std::int64_t seq);
  Result<std::vector<Grant>> finish_multi(
      const MultiSpec& spec, std::vector<Result<MultiReply>>& replies,
      const std::vector<std::string>& names, Steady::time_point t0,
      Steady::time_point call_start, std::int64_t seq);

  const std::string url_;
  Notifier notifier_;  // before inst_: their subscribers wake it
  std::vector<std::unique_ptr<Instance>> inst_;
  std::size_t quorum_ = 1;
  TaskPool pool_;  // last: joined before the instances go
};

}  // namespace baton::store::redis

#endif  // BATON_STORES_REDIS_REDLOCK_IMPL_H_
