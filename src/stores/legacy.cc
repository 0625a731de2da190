// stores/legacy.cc — see legacy.h.
#include "stores/legacy.h"

#include <condition_variable>
#include <mutex>
#include <thread>

#include "stores/call_deadline.h"

namespace baton::store {
namespace {

using std::chrono::steady_clock;
using OldStore = baton::store::Store;

// Releases `names` under `token` every kRepeat while a blocking ask runs,
// once interrupted: a release of a waiting token withdraws it and the old
// store's waiting call answers at once.
class Releaser {
 public:
  static constexpr milliseconds kRepeat{50};

  Releaser(OldStore& store, std::vector<std::string> names, OwnerToken token)
      : store_(store), names_(std::move(names)), token_(token) {}
  ~Releaser() { finish(); }

  void start() {
    std::lock_guard<std::mutex> lk(mu_);
    if (started_ || done_) return;
    started_ = true;
    thread_ = std::thread([this] {
      std::unique_lock<std::mutex> held(mu_);
      while (!done_) {
        held.unlock();
        for (const auto& n : names_) {
          const CallDeadlineScope scope(steady_clock::now() +
                                        milliseconds{5000});
          (void)store_.release(n, token_);
        }
        held.lock();
        cv_.wait_for(held, kRepeat, [&] { return done_; });
      }
    });
  }
  void finish() {
    {
      std::lock_guard<std::mutex> lk(mu_);
      done_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

 private:
  OldStore& store_;
  const std::vector<std::string> names_;
  const OwnerToken token_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool started_ = false;  // mu_
  bool done_ = false;     // mu_
  std::thread thread_;
};

// An old-style answer as the engine's. A timeout at the call deadline is
// a call cut short (the engine reports and settles it), not the end of the
// store's wait.
Result<Answer> to_answer(Result<Grant> r, AskMode mode,
                         const CallContext& ctx) {
  if (r.ok()) return Answer::granted_with(std::move(*r));
  const Errc code = r.error().code();
  if (code == Errc::timeout && mode == AskMode::wait && !ctx.expired()) {
    Answer a;
    a.kind = Answer::Kind::expired;
    a.gone = true;
    return a;
  }
  if (code == Errc::not_acquired) {
    return Answer::refused_with(std::move(r).error());
  }
  return std::move(r).error();
}

class LegacyRequest final : public Request {
 public:
  LegacyRequest(OldStore& store, const AcquireSpec& spec)
      : store_(store), spec_(spec), releaser_(store, {spec.name}, spec.token) {}

  Result<Answer> ask(AskMode mode, milliseconds wait_left,
                     const CallContext& ctx) override {
    if (interrupted()) return Answer::refused_with(stopped_error());
    const CallDeadlineScope scope(steady_deadline(ctx));
    return to_answer(
        store_.acquire(spec_, mode == AskMode::try_only ? milliseconds::zero()
                                                        : wait_left),
        mode, ctx);
  }
  Result<Answer> withdraw(const CallContext& ctx) override {
    const CallDeadlineScope scope(steady_deadline(ctx));
    auto r = store_.release(spec_.name, spec_.token);
    if (!r.ok()) return std::move(r).error();
    return Answer::refused_with(stopped_error());
  }
  void interrupt() override {
    Waitable::interrupt();
    releaser_.start();
  }

 private:
  static Error stopped_error() {
    return Error(Errc::not_acquired, "the request was withdrawn");
  }
  static steady_clock::time_point steady_deadline(const CallContext& ctx) {
    if (ctx.deadline() == CallContext::time_point::max()) {
      return steady_clock::time_point::max();
    }
    return steady_clock::now() + (ctx.deadline() - ctx.now());
  }

  OldStore& store_;
  const AcquireSpec spec_;
  Releaser releaser_;
  friend class LegacyMulti;
};

class LegacyMulti final : public MultiRequest {
 public:
  LegacyMulti(OldStore& store, const MultiSpec& spec)
      : store_(store),
        spec_(spec),
        releaser_(store, spec.names, spec.reservation) {}

  Result<MultiAnswer> ask(AskMode, milliseconds wait_left,
                          const CallContext& ctx) override {
    MultiAnswer a;
    if (interrupted()) {
      a.kind = MultiAnswer::Kind::expired;
      return a;
    }
    const CallDeadlineScope scope(steady_deadline(ctx));
    auto r = store_.acquire_multi(spec_, first_ ? wait_left : milliseconds{0});
    first_ = false;
    if (!r.ok()) {
      if (r.error().code() == Errc::timeout) {
        a.kind = MultiAnswer::Kind::expired;
        a.gone = true;
        return a;
      }
      if (r.error().code() == Errc::not_acquired) {
        a.kind = MultiAnswer::Kind::refused;
        a.error = std::move(r).error();
        return a;
      }
      return std::move(r).error();
    }
    a.grants = std::move(*r);
    // The old call returned what it holds after its own wait: the engine
    // takes it as the answer (acquire_some) or as all (acquire_all).
    a.pending = spec_.all_or_nothing && a.grants.size() < spec_.names.size()
                    ? spec_.names.size() - a.grants.size()
                    : 0;
    if (!spec_.all_or_nothing) a.pending = 0;
    return a;
  }
  Result<MultiAnswer> withdraw(const CallContext& ctx) override {
    const CallDeadlineScope scope(steady_deadline(ctx));
    for (const auto& n : spec_.names) {
      (void)store_.release(n, spec_.reservation);
    }
    MultiAnswer a;
    a.kind = MultiAnswer::Kind::expired;
    a.gone = true;
    return a;
  }
  void interrupt() override {
    Waitable::interrupt();
    releaser_.start();
  }

 private:
  static steady_clock::time_point steady_deadline(const CallContext& ctx) {
    if (ctx.deadline() == CallContext::time_point::max()) {
      return steady_clock::time_point::max();
    }
    return steady_clock::now() + (ctx.deadline() - ctx.now());
  }

  OldStore& store_;
  const MultiSpec spec_;
  Releaser releaser_;
  bool first_ = true;
};

class Adapter final : public baton::Store {
 public:
  explicit Adapter(std::shared_ptr<OldStore> old) : old_(std::move(old)) {}

  std::unique_ptr<Request> request(const AcquireSpec& spec) override {
    return std::make_unique<LegacyRequest>(*old_, spec);
  }
  std::unique_ptr<MultiRequest> request_multi(const MultiSpec& spec) override {
    return std::make_unique<LegacyMulti>(*old_, spec);
  }
  Result<Grant> extend(std::string_view name, const OwnerToken& token,
                       milliseconds ttl, const CallContext& ctx) override {
    const CallDeadlineScope scope(steady(ctx));
    return old_->extend(name, token, ttl);
  }
  Result<ReleaseResult> release(std::string_view name, const OwnerToken& token,
                                const CallContext& ctx) override {
    const CallDeadlineScope scope(steady(ctx));
    return old_->release(name, token);
  }
  Result<LockInfo> describe(std::string_view name,
                            const CallContext& ctx) override {
    const CallDeadlineScope scope(steady(ctx));
    return old_->describe(name);
  }
  Result<std::vector<LockInfo>> list(std::string_view prefix, std::size_t limit,
                                     const CallContext& ctx) override {
    const CallDeadlineScope scope(steady(ctx));
    return old_->list(prefix, limit);
  }
  Result<std::int64_t> counter_get(std::string_view name,
                                   const CallContext& ctx) override {
    const CallDeadlineScope scope(steady(ctx));
    return old_->counter_get(name);
  }
  Result<std::int64_t> counter_add(std::string_view name, std::int64_t delta,
                                   const CallContext& ctx) override {
    const CallDeadlineScope scope(steady(ctx));
    return old_->counter_add(name, delta);
  }
  Result<std::int64_t> counter_take(std::string_view name, std::int64_t n,
                                    const CallContext& ctx) override {
    const CallDeadlineScope scope(steady(ctx));
    return old_->counter_take(name, n);
  }
  bool supports_shared() const override { return old_->supports_shared(); }
  bool leases_outlive_client() const override {
    return old_->leases_outlive_client();
  }
  std::string safe_url() const override { return old_->safe_url(); }

 private:
  static steady_clock::time_point steady(const CallContext& ctx) {
    if (ctx.deadline() == CallContext::time_point::max()) {
      return steady_clock::time_point::max();
    }
    return steady_clock::now() + (ctx.deadline() - ctx.now());
  }
  std::shared_ptr<OldStore> old_;
};

}  // namespace

std::unique_ptr<baton::Store> adapt_legacy(std::shared_ptr<OldStore> old) {
  return std::make_unique<Adapter>(std::move(old));
}

}  // namespace baton::store
