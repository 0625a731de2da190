// tests/client/observer_test.cc — observer events (baton/observer.h) where
// the conformance suite cannot reach: a slow observer delays only the call
// it runs in; a keeper's renewals that fail and are retried, and its loss
// at the local safe deadline on a manual clock while a renewal hangs; an
// acquire that fails (unavailable) and a release that answers false.
#include "baton/observer.h"

#include <gtest/gtest.h>

#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "baton/client.h"
#include "baton/keeper.h"
#include "stores/memory/memory_store.h"
#include "support/eventually.h"
#include "support/faulty_store.h"

namespace baton {
namespace {

using namespace std::chrono_literals;
using std::chrono::steady_clock;
using testing::eventually;
using testing::FaultyStore;
using testing::Op;

AcquireOptions ttl(std::chrono::milliseconds t) {
  AcquireOptions o;
  o.ttl = t;
  return o;
}

struct Seen {
  EventKind kind;
  std::string lock;
  LostReason reason;
  bool retryable;
  std::chrono::microseconds waited;
  std::optional<Errc> error;
};

// Records every event; sleeps `pause` in each first.
class Recorder : public Observer {
 public:
  explicit Recorder(std::chrono::milliseconds pause = 0ms) : pause_(pause) {}
  void on_event(const Event& e) override {
    if (pause_ > 0ms) std::this_thread::sleep_for(pause_);
    std::lock_guard<std::mutex> lk(mu_);
    seen_.push_back(
        {e.kind, std::string(e.lock), e.lost_reason, e.retryable, e.waited,
         e.error ? std::optional<Errc>(e.error->code()) : std::nullopt});
  }
  std::vector<Seen> events() const {
    std::lock_guard<std::mutex> lk(mu_);
    return seen_;
  }
  std::string kinds() const {
    std::string out;
    for (const Seen& s : events()) {
      if (!out.empty()) out += ' ';
      out += to_string(s.kind);
    }
    return out;
  }
  std::size_t count(EventKind k) const {
    std::size_t n = 0;
    for (const Seen& s : events()) n += s.kind == k;
    return n;
  }

 private:
  const std::chrono::milliseconds pause_;
  mutable std::mutex mu_;
  std::vector<Seen> seen_;
};

TEST(ObserverNames, EveryKindAndReasonHasItsName) {
  EXPECT_EQ(to_string(EventKind::wait_started), "wait_started");
  EXPECT_EQ(to_string(EventKind::granted), "granted");
  EXPECT_EQ(to_string(EventKind::not_acquired), "not_acquired");
  EXPECT_EQ(to_string(EventKind::timed_out), "timed_out");
  EXPECT_EQ(to_string(EventKind::cancelled), "cancelled");
  EXPECT_EQ(to_string(EventKind::failed), "failed");
  EXPECT_EQ(to_string(EventKind::renewed), "renewed");
  EXPECT_EQ(to_string(EventKind::renewal_failed), "renewal_failed");
  EXPECT_EQ(to_string(EventKind::lost), "lost");
  EXPECT_EQ(to_string(EventKind::released), "released");
  EXPECT_EQ(to_string(EventKind::became_leader), "became_leader");
  EXPECT_EQ(to_string(EventKind::stopped_leading), "stopped_leading");
  EXPECT_EQ(to_string(EventKind::new_leader), "new_leader");
  EXPECT_EQ(to_string(LostReason::store_said), "store_said");
  EXPECT_EQ(to_string(LostReason::deadline_passed), "deadline_passed");
}

// A slow observer (50 ms an event) delays the calls it runs in by that
// much, not their results, not the `waited` they report, and not the calls
// of a client without it on the same store.
TEST(ObserverTest, ASlowObserverDelaysOnlyTheCallItRunsIn) {
  auto slow = std::make_shared<Recorder>(50ms);
  ClientOptions o;
  o.observer = slow;
  auto observed = Client::open("memory:observer-slow", o);
  auto plain = Client::open("memory:observer-slow");
  ASSERT_TRUE(observed.ok() && plain.ok());
  auto t0 = steady_clock::now();
  auto lease = observed->try_acquire("a", ttl(30s));
  const auto took = steady_clock::now() - t0;
  ASSERT_TRUE(lease.ok()) << lease.error().to_string();
  EXPECT_GE(took, 50ms);
  // While the observer sleeps in the observed client's next call, the plain
  // client's calls answer at once.
  auto busy = std::async(std::launch::async,
                         [&] { return observed->try_acquire("a", ttl(30s)); });
  std::this_thread::sleep_for(10ms);
  t0 = steady_clock::now();
  auto other = plain->try_acquire("b", ttl(30s));
  ASSERT_TRUE(other.ok());
  EXPECT_TRUE(*plain->release(*other));
  EXPECT_LT(steady_clock::now() - t0, 40ms);
  auto refused = busy.get();
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code(), Errc::not_acquired);
  // A keeper with the slow observer still renews, and is not lost.
  KeeperOptions ko;
  ko.renew_interval = 100ms;
  LeaseKeeper keeper(*observed, *lease, ko);
  ASSERT_TRUE(
      eventually([&] { return slow->count(EventKind::renewed) >= 3; }, 5s));
  EXPECT_FALSE(keeper.lost());
  ASSERT_TRUE(*keeper.release());
  EXPECT_EQ(slow->count(EventKind::lost), 0u);
  const auto seen = slow->events();
  ASSERT_FALSE(seen.empty());
  EXPECT_EQ(seen[0].kind, EventKind::granted);
  EXPECT_LT(seen[0].waited, 50ms) << "waited counts the observer's time";
  EXPECT_EQ(seen.back().kind, EventKind::released);
}

// A memory store behind a FaultyStore, on a manual clock, with no drift
// allowance: deadlines are exact.
struct Faulty {
  std::shared_ptr<ManualClock> clock = std::make_shared<ManualClock>();
  std::shared_ptr<FaultyStore> store = std::make_shared<FaultyStore>(
      std::shared_ptr<Store>(store::make_memory_store()));
  std::shared_ptr<Recorder> observer = std::make_shared<Recorder>();
  Client client = make_client();

  Client make_client() {
    ClientOptions o;
    o.clock = clock;
    o.drift_factor = 0;
    o.drift_floor = 0ms;
    o.request_timeout = 60s;
    o.max_retries = 0;
    o.observer = observer;
    return Client::wrap(store, o);
  }
  ~Faulty() {
    for (Op op : {Op::extend, Op::release}) store->resume(op);
  }
};

TEST(ObserverTest, AKeeperRetriesAFailedRenewalThenIsLostAtItsDeadline) {
  Faulty f;
  std::atomic<int> notices{0};
  KeeperOptions ko;
  ko.on_lost = [&](const Error&) { notices.fetch_add(1); };
  auto l = f.client.try_acquire("job", ttl(30s));
  ASSERT_TRUE(l.ok());
  LeaseKeeper k(f.client, *l, ko);
  // One renewal fails (unavailable): renewal_failed, retried, renewed.
  f.store->fail(Op::extend, Error(Errc::unavailable, "injected"));
  f.clock->advance(10s);
  ASSERT_TRUE(
      eventually([&] { return f.observer->count(EventKind::renewal_failed); }));
  f.clock->advance(20ms);  // the fast retry
  ASSERT_TRUE(
      eventually([&] { return f.observer->count(EventKind::renewed) == 1; }));
  // The next renewal hangs: lost at the deadline, reason deadline_passed.
  f.store->hang(Op::extend);
  const auto deadline = k.safe_deadline();
  f.clock->advance(10s);
  ASSERT_TRUE(eventually([&] { return f.store->hanging(Op::extend) == 1; }));
  f.clock->set(deadline);
  ASSERT_TRUE(eventually([&] { return notices.load() == 1; }));
  EXPECT_EQ(f.observer->kinds(), "granted renewal_failed renewed lost");
  const auto seen = f.observer->events();
  ASSERT_EQ(seen.size(), 4u);
  EXPECT_TRUE(seen[1].retryable);
  EXPECT_EQ(seen[1].error, Errc::unavailable);
  EXPECT_EQ(seen[3].reason, LostReason::deadline_passed);
  EXPECT_EQ(seen[3].error, Errc::lock_lost);
  // The hung renewal answers; the session gives the lease back quietly.
  f.store->resume(Op::extend);
  ASSERT_TRUE(eventually([&] { return f.store->calls(Op::release) >= 1; }));
  EXPECT_EQ(f.observer->kinds(), "granted renewal_failed renewed lost");
  EXPECT_EQ(notices.load(), 1);
}

TEST(ObserverTest, AFailedAcquireIsFailedAndAFalseReleaseIsNoEvent) {
  Faulty f;
  f.store->fail(Op::acquire, Error(Errc::unavailable, "injected"));
  auto r = f.client.try_acquire("x", ttl(30s));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), Errc::unavailable);
  EXPECT_EQ(f.observer->kinds(), "failed");
  EXPECT_EQ(f.observer->events()[0].error, Errc::unavailable);
  auto l = f.client.try_acquire("x", ttl(30s));
  ASSERT_TRUE(l.ok()) << l.error().to_string();
  EXPECT_TRUE(*f.client.release(*l));
  EXPECT_FALSE(*f.client.release(*l));  // nothing held: no event
  EXPECT_EQ(f.observer->kinds(), "failed granted released");
}

}  // namespace
}  // namespace baton
