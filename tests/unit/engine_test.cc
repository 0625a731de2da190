// tests/unit/engine_test.cc — the waiting engine (src/engine) against a
// scripted store: every answer of every ask, look and withdraw is chosen by
// the test, time is a clock that jumps to whatever instant the engine waits
// for (no sleeps), and every call is recorded. Each rule the engine owns is
// checked once here, for all stores.
#include "engine/engine.h"

#include <gtest/gtest.h>

#include <atomic>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "baton/store.h"
#include "baton/store_descriptor.h"

namespace baton::engine {
namespace {

using namespace std::chrono_literals;
using TP = Clock::time_point;

// A clock that never blocks: a wait or sleep until `t` moves it to `t`.
class JumpClock final : public Clock {
 public:
  time_point now() const override {
    std::lock_guard<std::mutex> g(mu_);
    return now_;
  }
  void wait_until(std::condition_variable&, std::unique_lock<std::mutex>&,
                  time_point t) const override {
    jump(t);
  }
  void sleep_until(time_point t) const override { jump(t); }
  void advance(std::chrono::nanoseconds d) const {
    std::lock_guard<std::mutex> g(mu_);
    now_ += std::chrono::duration_cast<time_point::duration>(d);
  }

 private:
  void jump(time_point t) const {
    std::lock_guard<std::mutex> g(mu_);
    if (t != time_point::max() && t > now_) now_ = t;
  }
  mutable std::mutex mu_;
  mutable time_point now_{std::chrono::hours(1000)};
};

// One recorded call of the scripted store.
struct Call {
  std::string what;  // ask_try, ask_wait, look, withdraw, wait, release
  TP at;
  TP until;  // wait: the instant it was asked to wait until
  OwnerToken token;
  milliseconds wait_left{0};
};

Grant grant_of(const std::string& name, OwnerToken token,
               milliseconds ttl = 10s) {
  Grant g;
  g.name = name;
  g.token = token;
  g.fencing_token = 7;
  g.ttl = ttl;
  g.valid_for = ttl;
  return g;
}

Answer queued(TP look_at = TP::max()) {
  Answer a;
  a.kind = Answer::Kind::queued;
  a.look_at = look_at;
  return a;
}

// Answers come from per-kind scripts (an empty script: `queued` for ask and
// look, `expired` + gone for withdraw, no change for wait).
class ScriptedStore final : public Store {
 public:
  explicit ScriptedStore(std::shared_ptr<JumpClock> clock)
      : clock_(std::move(clock)) {}

  std::deque<std::function<Result<Answer>(const AcquireSpec&)>> asks, looks,
      withdraws;
  std::deque<std::optional<Grant>> pushes;  // what wait_change returns
  std::function<void()> on_wait;            // e.g. a stop request
  // Answers release (null: was_held = false at once). Called from the
  // engine's background threads too: it may capture only what it owns.
  std::function<Result<ReleaseResult>(const CallContext&)> on_release;
  std::vector<Call> calls;
  int releases = 0;
  milliseconds recheck{100};

  std::vector<std::string> kinds() const {
    std::vector<std::string> out;
    for (const auto& c : calls) out.push_back(c.what);
    return out;
  }
  int count(const std::string& what) const {
    int n = 0;
    for (const auto& c : calls) n += c.what == what;
    return n;
  }

  std::unique_ptr<Request> request(const AcquireSpec& spec) override {
    return std::make_unique<Req>(*this, spec);
  }
  std::unique_ptr<MultiRequest> request_multi(const MultiSpec& spec) override {
    return std::make_unique<Multi>(*this, spec);
  }
  Result<Grant> extend(std::string_view, const OwnerToken&, milliseconds,
                       const CallContext&) override {
    return Error(Errc::lock_lost, "scripted");
  }
  Result<ReleaseResult> release(std::string_view, const OwnerToken& token,
                                const CallContext& ctx) override {
    {
      std::lock_guard<std::mutex> g(mu_);
      ++releases;
      calls.push_back({"release", clock_->now(), {}, token, {}});
    }
    if (on_release) return on_release(ctx);
    return ReleaseResult{};
  }
  Result<LockInfo> describe(std::string_view, const CallContext&) override {
    return LockInfo{};
  }
  Result<std::vector<LockInfo>> list(std::string_view, std::size_t,
                                     const CallContext&) override {
    return std::vector<LockInfo>{};
  }
  Result<std::int64_t> counter_get(std::string_view,
                                   const CallContext&) override {
    return 0;
  }
  Result<std::int64_t> counter_add(std::string_view, std::int64_t,
                                   const CallContext&) override {
    return 0;
  }
  Result<std::int64_t> counter_take(std::string_view, std::int64_t,
                                    const CallContext&) override {
    return 0;
  }
  milliseconds recheck_interval() const override { return recheck; }
  std::string safe_url() const override { return "scripted:"; }

  // multi scripts
  std::deque<std::function<Result<MultiAnswer>()>> multi_asks, multi_looks,
      multi_withdraws;

 private:
  Result<Answer> next(
      std::deque<std::function<Result<Answer>(const AcquireSpec&)>>& q,
      const AcquireSpec& spec, Result<Answer> fallback) {
    if (q.empty()) return fallback;
    auto f = std::move(q.front());
    q.pop_front();
    return f(spec);
  }

  class Req final : public Request {
   public:
    Req(ScriptedStore& s, AcquireSpec spec) : s_(s), spec_(std::move(spec)) {}
    Result<Answer> ask(AskMode mode, milliseconds wait_left,
                       const CallContext&) override {
      s_.calls.push_back({mode == AskMode::try_only ? "ask_try" : "ask_wait",
                          s_.clock_->now(),
                          {},
                          spec_.token,
                          wait_left});
      return s_.next(s_.asks, spec_, queued());
    }
    Result<Answer> look(milliseconds wait_left, const CallContext&) override {
      s_.calls.push_back(
          {"look", s_.clock_->now(), {}, spec_.token, wait_left});
      return s_.next(s_.looks, spec_, queued());
    }
    Result<Answer> withdraw(const CallContext&) override {
      s_.calls.push_back({"withdraw", s_.clock_->now(), {}, spec_.token, {}});
      Answer gone;
      gone.kind = Answer::Kind::expired;
      gone.gone = true;
      return s_.next(s_.withdraws, spec_, gone);
    }
    std::optional<Grant> wait_change(TP until,
                                     const CallContext& ctx) override {
      s_.calls.push_back({"wait", s_.clock_->now(), until, spec_.token, {}});
      if (s_.on_wait) s_.on_wait();
      if (interrupted()) return std::nullopt;
      if (!s_.pushes.empty()) {
        auto p = std::move(s_.pushes.front());
        s_.pushes.pop_front();
        if (p) return p;
      }
      s_.clock_->sleep_until(ctx.cap(until));
      return std::nullopt;
    }

   private:
    ScriptedStore& s_;
    const AcquireSpec spec_;
  };

  class Multi final : public MultiRequest {
   public:
    Multi(ScriptedStore& s, MultiSpec spec) : s_(s), spec_(std::move(spec)) {}
    Result<MultiAnswer> ask(AskMode mode, milliseconds wait_left,
                            const CallContext&) override {
      s_.calls.push_back({mode == AskMode::try_only ? "ask_try" : "ask_wait",
                          s_.clock_->now(),
                          {},
                          spec_.reservation,
                          wait_left});
      return pop(s_.multi_asks);
    }
    Result<MultiAnswer> look(milliseconds, const CallContext&) override {
      s_.calls.push_back({"look", s_.clock_->now(), {}, spec_.reservation, {}});
      return pop(s_.multi_looks);
    }
    Result<MultiAnswer> withdraw(const CallContext&) override {
      s_.calls.push_back(
          {"withdraw", s_.clock_->now(), {}, spec_.reservation, {}});
      MultiAnswer gone;
      gone.kind = MultiAnswer::Kind::expired;
      gone.gone = true;
      if (s_.multi_withdraws.empty()) return gone;
      return pop(s_.multi_withdraws);
    }
    std::optional<Grant> wait_change(TP until,
                                     const CallContext& ctx) override {
      s_.calls.push_back(
          {"wait", s_.clock_->now(), until, spec_.reservation, {}});
      if (s_.on_wait) s_.on_wait();
      if (!interrupted()) s_.clock_->sleep_until(ctx.cap(until));
      return std::nullopt;
    }

   private:
    Result<MultiAnswer> pop(
        std::deque<std::function<Result<MultiAnswer>()>>& q) {
      if (q.empty()) {
        MultiAnswer a;
        a.pending = spec_.names.size();
        return a;
      }
      auto f = std::move(q.front());
      q.pop_front();
      return f();
    }
    ScriptedStore& s_;
    const MultiSpec spec_;
  };

  std::shared_ptr<JumpClock> clock_;
  std::mutex mu_;
};

struct Fixture {
  std::shared_ptr<JumpClock> clock = std::make_shared<JumpClock>();
  std::shared_ptr<ScriptedStore> store = std::make_shared<ScriptedStore>(clock);
  Policy policy = [this] {
    Policy p;
    p.clock = clock;
    p.request_timeout = 5s;
    p.retry_interval = 100ms;
    p.max_retries = 3;
    return p;
  }();
  std::unique_ptr<Engine> engine;

  Engine& e() {
    if (!engine) engine = std::make_unique<Engine>(store, policy);
    return *engine;
  }
  AcquireSpec spec(const std::string& name = "job") const {
    AcquireSpec s;
    s.name = name;
    s.token = OwnerToken::random();
    s.ttl = 10s;
    return s;
  }
};

std::function<Result<Answer>(const AcquireSpec&)> grant() {
  return [](const AcquireSpec& s) -> Result<Answer> {
    return Answer::granted_with(grant_of(s.name, s.token));
  };
}
std::function<Result<Answer>(const AcquireSpec&)> fail(Errc code) {
  return [code](const AcquireSpec&) -> Result<Answer> {
    return Error(code, "scripted failure");
  };
}

TEST(EngineTest, ATryIsOneAskAndReportsWhenItWasSent) {
  Fixture f;
  f.store->asks.push_back(grant());
  const TP before = f.clock->now();
  auto r = f.e().acquire(f.spec(), 0ms, {});
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_EQ(r->sent, before);
  EXPECT_EQ(f.store->kinds(), std::vector<std::string>{"ask_try"});
}

TEST(EngineTest, ATryThatIsRefusedPassesTheStoresErrorOn) {
  Fixture f;
  f.store->asks.push_back([](const AcquireSpec&) -> Result<Answer> {
    return Answer::refused_with(
        Error(Errc::not_acquired, "held").with_holders({HolderInfo{}}));
  });
  auto r = f.e().acquire(f.spec(), 0ms, {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), Errc::not_acquired);
  EXPECT_EQ(r.error().holders().size(), 1u);
  EXPECT_EQ(f.store->count("withdraw"), 0);
}

TEST(EngineTest, UnavailableIsRetriedWithTheSameTokenThenReturned) {
  Fixture f;
  for (int i = 0; i < 10; ++i) f.store->asks.push_back(fail(Errc::unavailable));
  auto s = f.spec();
  auto r = f.e().acquire(s, 0ms, {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), Errc::unavailable);
  ASSERT_EQ(f.store->count("ask_try"), 4);  // 1 + max_retries
  for (const auto& c : f.store->calls) EXPECT_EQ(c.token, s.token);
  // Each pause is jittered within [base/2, base], base doubling from 100 ms.
  for (int i = 1; i < 4; ++i) {
    const auto gap = f.store->calls[i].at - f.store->calls[i - 1].at;
    const auto base = 100ms * (1 << (i - 1));
    EXPECT_GE(gap, base / 2) << i;
    EXPECT_LE(gap, base) << i;
  }
}

// Error::retry_after: a store that says when it can answer (redlock://'s
// restart_guard). A blocking acquire whose wait outlasts the hint sleeps
// exactly that long, even with no retries allowed; a try, and a wait that
// ends sooner, answer the error at once.
std::function<Result<Answer>(const AcquireSpec&)> unavailable_for(
    milliseconds hint) {
  return [hint](const AcquireSpec&) -> Result<Answer> {
    return Error(Errc::unavailable, "votes count later").with_retry_after(hint);
  };
}

TEST(EngineTest, AWaitOutlastingTheStoresRetryAfterWaitsItOut) {
  Fixture f;
  f.policy.max_retries = 0;
  f.store->asks.push_back(unavailable_for(2500ms));
  f.store->asks.push_back(unavailable_for(400ms));
  f.store->asks.push_back(grant());
  auto r = f.e().acquire(f.spec(), 10s, {});
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  ASSERT_EQ(f.store->count("ask_wait"), 3);
  EXPECT_EQ(f.store->calls[1].at - f.store->calls[0].at, 2500ms);
  EXPECT_EQ(f.store->calls[2].at - f.store->calls[1].at, 400ms);
}

TEST(EngineTest, AStoresRetryAfterPastTheWaitOrInATryIsAnsweredAtOnce) {
  Fixture f;
  f.policy.max_retries = 0;
  f.store->asks.push_back(unavailable_for(2500ms));
  f.store->asks.push_back(unavailable_for(2500ms));
  const TP start = f.clock->now();
  auto waited = f.e().acquire(f.spec(), 2s, {});
  ASSERT_FALSE(waited.ok());
  EXPECT_EQ(waited.error().code(), Errc::unavailable);
  EXPECT_EQ(waited.error().retry_after(), 2500ms);
  auto tried = f.e().acquire(f.spec(), 0ms, {});
  ASSERT_FALSE(tried.ok());
  EXPECT_EQ(tried.error().code(), Errc::unavailable);
  EXPECT_EQ(f.store->count("ask_wait") + f.store->count("ask_try"), 2);
  EXPECT_LT(f.clock->now() - start, 2s);
}

TEST(EngineTest, ATryCutShortAtItsDeadlineIsUnavailableAndWithdrawnLater) {
  Fixture f;
  f.store->asks.push_back([&](const AcquireSpec&) -> Result<Answer> {
    f.clock->advance(6s);  // past request_timeout
    return Error(Errc::timeout, "no answer");
  });
  auto r = f.e().acquire(f.spec(), 0ms, {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), Errc::unavailable);
  EXPECT_NE(r.error().message().find("no answer from scripted: within 5s"),
            std::string::npos)
      << r.error().message();
}

TEST(EngineTest, AWaiterSleepsUntilAChangeThenLooks) {
  Fixture f;
  f.store->looks.push_back(grant());
  const TP start = f.clock->now();
  auto r = f.e().acquire(f.spec(), 10s, {});
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_EQ(f.store->kinds(),
            (std::vector<std::string>{"ask_wait", "wait", "look"}));
  EXPECT_EQ(r->sent, start);  // valid_for counts from the first ask
  // The re-check pause is 1x..3x the store's interval.
  const auto& w = f.store->calls[1];
  EXPECT_GE(w.until - w.at, 100ms);
  EXPECT_LE(w.until - w.at, 300ms);
}

TEST(EngineTest, AGrantCarriedByTheWakeUpNeedsNoLook) {
  Fixture f;
  auto s = f.spec();
  f.store->pushes.push_back(grant_of(s.name, s.token));
  auto r = f.e().acquire(s, 10s, {});
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_EQ(f.store->kinds(), (std::vector<std::string>{"ask_wait", "wait"}));
}

TEST(EngineTest, LookAtIsHonouredAndMinMeansAtOnce) {
  Fixture f;
  const TP start = f.clock->now();
  f.store->asks.push_back(
      [&](const AcquireSpec&) -> Result<Answer> { return queued(TP::min()); });
  f.store->looks.push_back([&](const AcquireSpec&) -> Result<Answer> {
    return queued(start + 40ms);  // a holder's expiry, before any re-check
  });
  f.store->looks.push_back(grant());
  auto r = f.e().acquire(f.spec(), 10s, {});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(f.store->kinds(),
            (std::vector<std::string>{"ask_wait", "look", "wait", "look"}));
  EXPECT_EQ(f.store->calls[2].until, start + 40ms);
}

TEST(EngineTest, AWaitThatEndsWithdrawsOnceAndTimesOut) {
  Fixture f;
  f.store->withdraws.push_back([](const AcquireSpec&) -> Result<Answer> {
    Answer a;
    a.kind = Answer::Kind::expired;
    a.gone = true;
    return a;
  });
  const TP start = f.clock->now();
  auto r = f.e().acquire(f.spec(), 250ms, {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), Errc::timeout);
  EXPECT_EQ(r.error().message(), "lock \"job\" was not granted within 250ms");
  EXPECT_EQ(f.store->count("withdraw"), 1);
  EXPECT_EQ(f.store->calls.back().what, "withdraw");
  EXPECT_GE(f.store->calls.back().at, start + 250ms);
  // The first ask said how long the caller waits.
  EXPECT_EQ(f.store->calls[0].wait_left, 250ms);
}

TEST(EngineTest, AGrantFoundByTheWithdrawIsKept) {
  Fixture f;
  f.store->withdraws.push_back(grant());
  auto r = f.e().acquire(f.spec(), 250ms, {});
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_EQ(f.store->releases, 0);
}

TEST(EngineTest, AnAnswerThatLeftNoTraceIsNotWithdrawn) {
  Fixture f;
  f.store->asks.push_back([&](const AcquireSpec&) -> Result<Answer> {
    f.clock->advance(2ms);  // the store's wait, and so the caller's, ended
    Answer a;
    a.kind = Answer::Kind::expired;
    a.gone = true;
    return a;
  });
  auto r = f.e().acquire(f.spec(), 1ms, {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), Errc::timeout);
  EXPECT_EQ(f.store->count("withdraw"), 0);
}

TEST(EngineTest, TheStoresOwnWaitEndingEarlyIsAskedAgain) {
  Fixture f;
  f.store->asks.push_back([&](const AcquireSpec&) -> Result<Answer> {
    Answer a;
    a.kind = Answer::Kind::expired;
    a.gone = true;
    return a;
  });
  f.store->asks.push_back(grant());
  auto r = f.e().acquire(f.spec(), 10s, {});
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_EQ(f.store->kinds(),
            (std::vector<std::string>{"ask_wait", "ask_wait"}));
}

TEST(EngineTest, UnavailableWhileWaitingAsksAgainWithTheSameToken) {
  Fixture f;
  f.store->looks.push_back(fail(Errc::unavailable));
  f.store->asks.push_back(
      [](const AcquireSpec&) -> Result<Answer> { return queued(); });
  f.store->asks.push_back(grant());
  auto s = f.spec();
  auto r = f.e().acquire(s, 10s, {});
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_EQ(f.store->count("ask_wait"), 2);
  for (const auto& c : f.store->calls) EXPECT_EQ(c.token, s.token);
}

TEST(EngineTest, ALateGrantIsGivenBackAndTheWaitGoesOnWithAFreshToken) {
  Fixture f;
  int offered = 0;
  f.policy.fresh = [&](const Grant&, TP) { return ++offered > 1; };
  f.store->asks.push_back(grant());
  f.store->asks.push_back(grant());
  auto s = f.spec();
  auto r = f.e().acquire(s, 10s, {});
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_EQ(f.store->releases, 1);
  ASSERT_EQ(f.store->count("ask_wait"), 2);
  EXPECT_EQ(f.store->calls[0].token, s.token);
  EXPECT_EQ(f.store->calls[1].token, s.token);  // the release
  EXPECT_NE(f.store->calls[2].token, s.token);
  EXPECT_NE(r->grant.token, s.token);
}

TEST(EngineTest, ALateGrantOfATryIsGivenBackAndReportedAsTimeout) {
  Fixture f;
  f.policy.fresh = [](const Grant&, TP) { return false; };
  f.store->asks.push_back(grant());
  auto r = f.e().acquire(f.spec(), 0ms, {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), Errc::timeout);
  EXPECT_EQ(f.store->releases, 1);
}

TEST(EngineTest, AStopInterruptsTheWaitWithdrawsAndAnswersCancelled) {
  Fixture f;
  std::stop_source stop;
  f.store->on_wait = [&] { stop.request_stop(); };
  auto r = f.e().acquire(f.spec(), 10s, stop.get_token());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), Errc::cancelled);
  EXPECT_EQ(f.store->count("look"), 0);
  EXPECT_EQ(f.store->count("withdraw"), 1);
}

TEST(EngineTest, AGrantThatRacesAStopIsGivenBack) {
  Fixture f;
  std::stop_source stop;
  f.store->on_wait = [&] { stop.request_stop(); };
  f.store->withdraws.push_back(grant());
  auto r = f.e().acquire(f.spec(), 10s, stop.get_token());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), Errc::cancelled);
  EXPECT_GE(f.store->releases, 1);
}

TEST(EngineTest, AStopBeforeTheCallSendsNothing) {
  Fixture f;
  std::stop_source stop;
  stop.request_stop();
  auto r = f.e().acquire(f.spec(), 10s, stop.get_token());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), Errc::cancelled);
  EXPECT_TRUE(f.store->calls.empty());
}

TEST(EngineTest, AWithdrawThatCannotFinishIsHandedToTheBackground) {
  Fixture f;
  for (int i = 0; i < 4; ++i)
    f.store->withdraws.push_back(fail(Errc::unavailable));
  auto r = f.e().acquire(f.spec(), 250ms, {});
  ASSERT_FALSE(r.ok());
  // The wait is over (the caller is told `timeout`); the request is left
  // to the background withdrawal.
  EXPECT_EQ(r.error().code(), Errc::timeout);
  EXPECT_GE(f.store->count("withdraw"), 1);
  // The background withdrawal runs on its own thread with real pauses; it
  // has at least started, and will release by the call's token.
  EXPECT_GE(f.e().pending_withdrawals() + f.store->releases, 1u);
}

// --- acquire_some / acquire_all --------------------------------------------

MultiSpec multi(bool all) {
  MultiSpec s;
  s.names = {"a", "b"};
  s.reservation = OwnerToken::random();
  s.ttl = 10s;
  s.all_or_nothing = all;
  return s;
}

std::function<Result<MultiAnswer>()> progress(std::vector<std::string> held,
                                              std::size_t pending,
                                              OwnerToken r) {
  return [=]() -> Result<MultiAnswer> {
    MultiAnswer a;
    for (const auto& n : held) a.grants.push_back(grant_of(n, r));
    a.pending = pending;
    return a;
  };
}

TEST(EngineTest, AcquireSomeReturnsAtTheFirstGrant) {
  Fixture f;
  auto s = multi(false);
  f.store->multi_looks.push_back(progress({"b"}, 1, s.reservation));
  auto r = f.e().acquire_multi(s, 10s, {});
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  ASSERT_EQ(r->size(), 1u);
  EXPECT_EQ((*r)[0].grant.name, "b");
  EXPECT_EQ(f.store->count("withdraw"), 0);  // the rest stays queued
}

TEST(EngineTest, AcquireSomeReportsWhatItHoldsWhenTheWaitEnds) {
  Fixture f;
  auto s = multi(false);
  auto r = f.e().acquire_multi(s, 250ms, {});
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_TRUE(r->empty());
  EXPECT_EQ(f.store->count("withdraw"), 0);
}

TEST(EngineTest, AcquireAllWaitsForEveryNameOrWithdraws) {
  Fixture f;
  auto s = multi(true);
  auto r = f.e().acquire_multi(s, 250ms, {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), Errc::timeout);
  EXPECT_EQ(r.error().message(),
            "not all of the 2 locks were granted within 250ms");
  EXPECT_EQ(f.store->count("withdraw"), 1);

  Fixture g;
  g.store->multi_looks.push_back(progress({"a", "b"}, 0, s.reservation));
  auto all = g.e().acquire_multi(s, 10s, {});
  ASSERT_TRUE(all.ok()) << all.error().to_string();
  EXPECT_EQ(all->size(), 2u);
}

TEST(EngineTest, ALateMultiGrantGivesEveryLeaseBack) {
  Fixture f;
  f.policy.fresh = [](const Grant& g, TP) { return g.name != "b"; };
  auto s = multi(true);
  f.store->multi_asks.push_back(progress({"a", "b"}, 0, s.reservation));
  auto r = f.e().acquire_multi(s, 10s, {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), Errc::timeout);
  EXPECT_EQ(f.store->releases, 2);
}

// A release that does not answer, e.g. a grant given back through a
// silent network: the first release waits until its context's deadline.
std::function<Result<ReleaseResult>(const CallContext&)> first_release_silent(
    std::shared_ptr<JumpClock> clock) {
  auto calls = std::make_shared<std::atomic<int>>(0);
  return [clock, calls](const CallContext& ctx) -> Result<ReleaseResult> {
    if (calls->fetch_add(1) > 0) return ReleaseResult{};
    clock->sleep_until(ctx.deadline());
    return Error(Errc::timeout, "silent");
  };
}

// Rule 7: giving back a grant that came too late ends by the call's
// deadline (the end of the wait + the grace), not request_timeout later;
// the release is finished in the background.
TEST(EngineTest, AGiveBackThatDoesNotAnswerEndsByTheDeadline) {
  Fixture f;
  f.policy.fresh = [](const Grant&, TP) { return false; };
  f.store->on_release = first_release_silent(f.clock);
  f.store->asks.push_back(grant());
  const TP start = f.clock->now();
  auto r = f.e().acquire(f.spec(), 2s, {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), Errc::timeout) << r.error().to_string();
  EXPECT_LE(f.clock->now(), start + 2s + kReplyGrace);
  EXPECT_GE(f.e().pending_withdrawals(), 1u);
}

TEST(EngineTest, AMultiGiveBackThatDoesNotAnswerEndsByTheDeadline) {
  Fixture f;
  f.policy.fresh = [](const Grant&, TP) { return false; };
  f.store->on_release = first_release_silent(f.clock);
  auto s = multi(true);
  f.store->multi_asks.push_back(progress({"a", "b"}, 0, s.reservation));
  const TP start = f.clock->now();
  auto r = f.e().acquire_multi(s, 2s, {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), Errc::timeout) << r.error().to_string();
  EXPECT_LE(f.clock->now(), start + 2s + kReplyGrace);
  EXPECT_GE(f.e().pending_withdrawals(), 1u);
}

TEST(EngineTest, ACancelledMultiWaitReleasesEveryName) {
  Fixture f;
  std::stop_source stop;
  f.store->on_wait = [&] { stop.request_stop(); };
  auto s = multi(false);
  auto r = f.e().acquire_multi(s, 10s, stop.get_token());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), Errc::cancelled);
  EXPECT_EQ(f.store->releases, 2);
}

// --- single calls -----------------------------------------------------------

TEST(EngineTest, ASingleCallIsRetriedAndCutShortAtItsDeadline) {
  Fixture f;
  int n = 0;
  auto r = f.e().call([&](const CallContext&) -> Result<int> {
    ++n;
    return Error(Errc::unavailable, "down");
  });
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(n, 4);
  n = 0;
  auto once = f.e().call(
      [&](const CallContext&) -> Result<int> {
        ++n;
        return Error(Errc::unavailable, "down");
      },
      false);
  EXPECT_EQ(n, 1);
  auto cut = f.e().call([&](const CallContext& ctx) -> Result<int> {
    f.clock->sleep_until(ctx.deadline());
    return Error(Errc::timeout, "silent");
  });
  ASSERT_FALSE(cut.ok());
  EXPECT_EQ(cut.error().code(), Errc::unavailable);
  EXPECT_NE(cut.error().message().find("within 5s"), std::string::npos);
}

// --- store options ------------------------------------------------------

// A duration option is positive, unless it declares that 0 means something
// (a pool's "no limit").
TEST(EngineTest, ADurationOptionTakesZeroOnlyWhereItSaysSo) {
  StoreDescriptor d;
  d.name = "opts";
  d.schemes = {"opts"};
  OptionSpec limit = duration_option("max_lifetime", "30m", "0 = no limit");
  limit.zero_ok = true;
  d.options = {duration_option("request_timeout", "5s", "positive"), limit};
  auto zero = parse_store_url("opts://h:1/?max_lifetime=0", d);
  ASSERT_TRUE(zero.ok()) << zero.error().to_string();
  EXPECT_EQ(zero->options.duration("max_lifetime"), 0ms);
  EXPECT_TRUE(zero->options.given("max_lifetime"));
  auto refused = parse_store_url("opts://h:1/?request_timeout=0", d);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code(), Errc::invalid_argument);
  EXPECT_NE(refused.error().message().find("request_timeout: must be positive"),
            std::string::npos)
      << refused.error().to_string();
}

}  // namespace
}  // namespace baton::engine
