// tests/support/faulty_store.h — a Store wrapper that injects faults into
// chosen operations (test-only): hang until released or until the call's
// deadline (CallContext) passes, as a real store whose server stopped
// answering (on real time, whatever clock the caller reads); fail with a
// given error; run the call and then lose the
// reply; delay the reply; or answer an acquire `timeout` at its call
// deadline and run it on the store later (a server that commits a request
// after its caller gave up). Every call is counted.
//
// Op::acquire covers a request's ask and look (each a store round trip),
// Op::multi the same for acquire_some / acquire_all; their withdraw
// counts as Op::release.
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

#include "baton/store.h"

namespace baton::testing {

enum class Op { acquire, extend, release, describe, list, multi, counter };

class FaultyStore final : public Store {
 public:
  explicit FaultyStore(std::shared_ptr<Store> inner)
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
  // The next acquire ask answers `timeout` at its call deadline (it must
  // have one), and reaches the store `after` that as a try: the store
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

  std::unique_ptr<Request> request(const AcquireSpec& spec) override {
    return std::make_unique<FaultyRequest>(*this, inner_->request(spec), spec);
  }
  std::unique_ptr<MultiRequest> request_multi(const MultiSpec& spec) override {
    return std::make_unique<FaultyMulti>(*this, inner_->request_multi(spec));
  }
  Result<Grant> extend(std::string_view name, const OwnerToken& token,
                       milliseconds ttl, const CallContext& ctx) override {
    return run(Op::extend, ctx,
               [&] { return inner_->extend(name, token, ttl, ctx); });
  }
  Result<ReleaseResult> release(std::string_view name, const OwnerToken& token,
                                const CallContext& ctx) override {
    return run(Op::release, ctx,
               [&] { return inner_->release(name, token, ctx); });
  }
  Result<LockInfo> describe(std::string_view name,
                            const CallContext& ctx) override {
    return run(Op::describe, ctx, [&] { return inner_->describe(name, ctx); });
  }
  Result<std::vector<LockInfo>> list(std::string_view prefix, std::size_t limit,
                                     const CallContext& ctx) override {
    return run(Op::list, ctx, [&] { return inner_->list(prefix, limit, ctx); });
  }
  Result<std::int64_t> counter_get(std::string_view name,
                                   const CallContext& ctx) override {
    return run(Op::counter, ctx,
               [&] { return inner_->counter_get(name, ctx); });
  }
  Result<std::int64_t> counter_add(std::string_view name, std::int64_t delta,
                                   const CallContext& ctx) override {
    return run(Op::counter, ctx,
               [&] { return inner_->counter_add(name, delta, ctx); });
  }
  Result<std::int64_t> counter_take(std::string_view name, std::int64_t n,
                                    const CallContext& ctx) override {
    return run(Op::counter, ctx,
               [&] { return inner_->counter_take(name, n, ctx); });
  }
  // The change feed is passed through without faults.
  Result<std::unique_ptr<Waitable>> watch(std::string_view prefix,
                                          const CallContext& ctx) override {
    return inner_->watch(prefix, ctx);
  }
  bool supports_shared() const override { return inner_->supports_shared(); }
  milliseconds recheck_interval() const override {
    return inner_->recheck_interval();
  }
  std::string safe_url() const override {
    return "faulty+" + inner_->safe_url();
  }

 private:
  class FaultyRequest final : public Request {
   public:
    FaultyRequest(FaultyStore& s, std::unique_ptr<Request> inner,
                  AcquireSpec spec)
        : s_(s), inner_(std::move(inner)), spec_(std::move(spec)) {}
    Result<Answer> ask(AskMode mode, milliseconds wait_left,
                       const CallContext& ctx) override {
      if (auto late = s_.take_commit_late()) {
        std::this_thread::sleep_for(ctx.deadline() - ctx.now());
        s_.run_late(*late, spec_);
        return Error(Errc::timeout, "faulty store: no answer (committed late)");
      }
      return s_.run(Op::acquire, ctx,
                    [&] { return inner_->ask(mode, wait_left, ctx); });
    }
    Result<Answer> look(milliseconds wait_left,
                        const CallContext& ctx) override {
      return s_.run(Op::acquire, ctx,
                    [&] { return inner_->look(wait_left, ctx); });
    }
    Result<Answer> withdraw(const CallContext& ctx) override {
      return s_.run(Op::release, ctx, [&] { return inner_->withdraw(ctx); });
    }
    std::optional<Grant> wait_change(Clock::time_point until,
                                     const CallContext& ctx) override {
      return inner_->wait_change(until, ctx);
    }
    void interrupt() override {
      Request::interrupt();
      inner_->interrupt();
      s_.cv_.notify_all();
    }

   private:
    FaultyStore& s_;
    std::unique_ptr<Request> inner_;
    const AcquireSpec spec_;
  };

  class FaultyMulti final : public MultiRequest {
   public:
    FaultyMulti(FaultyStore& s, std::unique_ptr<MultiRequest> inner)
        : s_(s), inner_(std::move(inner)) {}
    Result<MultiAnswer> ask(AskMode mode, milliseconds wait_left,
                            const CallContext& ctx) override {
      return s_.run(Op::multi, ctx,
                    [&] { return inner_->ask(mode, wait_left, ctx); });
    }
    Result<MultiAnswer> look(milliseconds wait_left,
                             const CallContext& ctx) override {
      return s_.run(Op::multi, ctx,
                    [&] { return inner_->look(wait_left, ctx); });
    }
    Result<MultiAnswer> withdraw(const CallContext& ctx) override {
      return s_.run(Op::release, ctx, [&] { return inner_->withdraw(ctx); });
    }
    std::optional<Grant> wait_change(Clock::time_point until,
                                     const CallContext& ctx) override {
      return inner_->wait_change(until, ctx);
    }
    void interrupt() override {
      MultiRequest::interrupt();
      inner_->interrupt();
      s_.cv_.notify_all();
    }

   private:
    FaultyStore& s_;
    std::unique_ptr<MultiRequest> inner_;
  };

  std::optional<std::chrono::milliseconds> take_commit_late() {
    std::lock_guard<std::mutex> g(mu_);
    std::optional<std::chrono::milliseconds> late;
    late.swap(commit_late_);
    if (late) ++calls_[Op::acquire];
    return late;
  }

  // The request reaches the store `after` from now, as a try.
  void run_late(std::chrono::milliseconds after, const AcquireSpec& spec) {
    std::lock_guard<std::mutex> g(mu_);
    late_.emplace_back([this, spec, after] {
      std::this_thread::sleep_for(after);
      auto req = inner_->request(spec);
      (void)req->ask(AskMode::try_only, milliseconds{0}, CallContext{});
    });
  }

  template <typename F>
  auto run(Op op, const CallContext& ctx, F call) -> decltype(call()) {
    std::unique_lock<std::mutex> g(mu_);
    ++calls_[op];
    if (hung_[op]) {
      ++hanging_[op];
      // As a real store's socket timeouts: real time, however the caller's
      // clock moves (tests drive a ManualClock).
      const auto now = std::chrono::steady_clock::now();
      const auto deadline = ctx.deadline() == CallContext::time_point::max()
                                ? std::chrono::steady_clock::time_point::max()
                                : now + (ctx.deadline() - ctx.now());
      while (hung_[op]) {
        if (ctx.stop_requested() ||
            std::chrono::steady_clock::now() >= deadline) {
          --hanging_[op];
          return Error(Errc::timeout, "faulty store: no answer (hung)");
        }
        cv_.wait_until(g,
                       std::min(deadline, std::chrono::steady_clock::now() +
                                              std::chrono::milliseconds(50)));
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

  std::shared_ptr<Store> inner_;
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
