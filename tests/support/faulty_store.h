// tests/support/faulty_store.h — a Store wrapper that injects faults into
// chosen operations (test-only): hang until released or until the caller's
// call deadline (stores/call_deadline.h) passes, as a real store whose
// server stopped answering; fail with a given error; or run the call and
// then lose the reply; or answer an acquire `timeout` at its call deadline
// and run it on the store later (a server that commits a request after its
// caller gave up). Every call is counted.
//
// Thread safety: every member may be called from any thread.
#ifndef BATON_TESTS_SUPPORT_FAULTY_STORE_H_
#define BATON_TESTS_SUPPORT_FAULTY_STORE_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "stores/call_deadline.h"
#include "stores/store.h"

namespace baton::testing {

enum class Op { acquire, extend, release, describe, list, multi, counter };

class FaultyStore final : public store::Store {
 public:
  explicit FaultyStore(std::shared_ptr<store::Store> inner)
      : inner_(std::move(inner)) {}
  ~FaultyStore() override {
    for (auto& t : late_) t.join();
  }

  // Calls of `op` hang (without reaching the inner store) until resume(op)
  // or the call deadline; past the deadline they answer `timeout`, as the
  // real stores do (rule 7).
  void hang(Op op) {
    std::lock_guard<std::mutex> g(mu_);
    hung_[op] = true;
  }
  void resume(Op op) {
    {
      std::lock_guard<std::mutex> g(mu_);
      hung_[op] = false;
    }
    cv_.notify_all();
  }
  // The next `times` calls of `op` answer `e` without reaching the store.
  void fail(Op op, Error e, int times = 1) {
    std::lock_guard<std::mutex> g(mu_);
    fail_[op] = {std::move(e), times};
  }
  // The next `times` calls of `op` reach the store, but the caller gets
  // `unavailable` (a reply lost on the way back).
  void lose_reply(Op op, int times = 1) {
    std::lock_guard<std::mutex> g(mu_);
    lose_[op] = times;
  }
  // The next `times` calls of `op` reach the store, and their reply comes
  // `d` later (a slow network on the way back).
  void delay_reply(Op op, std::chrono::milliseconds d, int times = 1) {
    std::lock_guard<std::mutex> g(mu_);
    delay_[op] = {d, times};
  }
  // The next acquire answers `timeout` at its call deadline (it must have
  // one), and reaches the store `after` that as a try (wait 0): the store
  // commits the request after its caller gave up.
  void commit_acquire_late(std::chrono::milliseconds after) {
    std::lock_guard<std::mutex> g(mu_);
    commit_late_ = after;
  }
  // Calls of `op` started so far (hung ones included).
  int calls(Op op) const {
    std::lock_guard<std::mutex> g(mu_);
    auto it = calls_.find(op);
    return it == calls_.end() ? 0 : it->second;
  }
  // Calls of `op` hanging right now.
  int hanging(Op op) const {
    std::lock_guard<std::mutex> g(mu_);
    auto it = hanging_.find(op);
    return it == hanging_.end() ? 0 : it->second;
  }

  Result<store::Grant> acquire(const store::AcquireSpec& s,
                               milliseconds wait) override {
    std::optional<std::chrono::milliseconds> late;
    {
      std::lock_guard<std::mutex> g(mu_);
      late.swap(commit_late_);
      if (late) ++calls_[Op::acquire];
    }
    if (late) {
      std::this_thread::sleep_until(store::call_deadline());
      std::lock_guard<std::mutex> g(mu_);
      late_.emplace_back([this, s, after = *late] {
        std::this_thread::sleep_for(after);
        (void)inner_->acquire(s, milliseconds{0});
      });
      return Error(Errc::timeout, "faulty store: no answer (committed late)");
    }
    return run(Op::acquire, [&] { return inner_->acquire(s, wait); });
  }
  Result<store::Grant> extend(std::string_view name, const OwnerToken& token,
                              milliseconds ttl) override {
    return run(Op::extend, [&] { return inner_->extend(name, token, ttl); });
  }
  Result<store::ReleaseResult> release(std::string_view name,
                                       const OwnerToken& token) override {
    return run(Op::release, [&] { return inner_->release(name, token); });
  }
  Result<LockInfo> describe(std::string_view name) override {
    return run(Op::describe, [&] { return inner_->describe(name); });
  }
  Result<std::vector<LockInfo>> list(std::string_view prefix,
                                     std::size_t limit) override {
    return run(Op::list, [&] { return inner_->list(prefix, limit); });
  }
  Result<std::vector<store::Grant>> acquire_multi(const store::MultiSpec& s,
                                                  milliseconds wait) override {
    return run(Op::multi, [&] { return inner_->acquire_multi(s, wait); });
  }
  Result<std::int64_t> counter_get(std::string_view name) override {
    return run(Op::counter, [&] { return inner_->counter_get(name); });
  }
  Result<std::int64_t> counter_add(std::string_view name,
                                   std::int64_t delta) override {
    return run(Op::counter, [&] { return inner_->counter_add(name, delta); });
  }
  Result<std::int64_t> counter_take(std::string_view name,
                                    std::int64_t n) override {
    return run(Op::counter, [&] { return inner_->counter_take(name, n); });
  }
  bool supports_shared() const override { return inner_->supports_shared(); }
  std::string safe_url() const override {
    return "faulty+" + inner_->safe_url();
  }

 private:
  template <typename F>
  auto run(Op op, F call) -> decltype(call()) {
    std::unique_lock<std::mutex> g(mu_);
    ++calls_[op];
    if (hung_[op]) {
      ++hanging_[op];
      const auto deadline = store::call_deadline();
      while (hung_[op]) {
        if (deadline == store::SteadyTime::max()) {
          cv_.wait(g);
        } else if (cv_.wait_until(g, deadline) == std::cv_status::timeout &&
                   hung_[op]) {
          --hanging_[op];
          return Error(Errc::timeout, "faulty store: no answer (hung)");
        }
      }
      --hanging_[op];
    }
    if (auto it = fail_.find(op); it != fail_.end() && it->second.second > 0) {
      --it->second.second;
      return it->second.first;
    }
    bool lose = false;
    if (auto it = lose_.find(op); it != lose_.end() && it->second > 0) {
      --it->second;
      lose = true;
    }
    std::chrono::milliseconds delay{0};
    if (auto it = delay_.find(op);
        it != delay_.end() && it->second.second > 0) {
      --it->second.second;
      delay = it->second.first;
    }
    g.unlock();
    auto r = call();
    if (lose) return Error(Errc::unavailable, "faulty store: reply lost");
    std::this_thread::sleep_for(delay);
    return r;
  }

  std::shared_ptr<store::Store> inner_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<Op, bool> hung_;
  std::map<Op, std::pair<Error, int>> fail_;
  std::map<Op, int> lose_;
  std::map<Op, std::pair<std::chrono::milliseconds, int>> delay_;
  std::map<Op, int> calls_;
  std::map<Op, int> hanging_;
  std::optional<std::chrono::milliseconds> commit_late_;
  std::vector<std::thread> late_;
};

}  // namespace baton::testing

#endif  // BATON_TESTS_SUPPORT_FAULTY_STORE_H_
