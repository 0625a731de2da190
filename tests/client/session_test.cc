// tests/client/session_test.cc — Session, LeaseKeeper and Elector on a
// manual clock, with store faults injected by FaultyStore: renewal, the
// lost notice at the local safe deadline while a renewal hangs (rule 13),
// and release without waiting for a store that does not answer.
#include "baton/session.h"

#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "baton/elector.h"
#include "baton/keeper.h"
#include "stores/memory/memory_store.h"
#include "support/eventually.h"
#include "support/faulty_store.h"

namespace baton {
namespace {

using namespace std::chrono_literals;
using testing::eventually;
using testing::FaultyStore;
using testing::Op;

AcquireOptions ttl(std::chrono::milliseconds t) {
  AcquireOptions o;
  o.ttl = t;
  return o;
}

// A memory store behind a FaultyStore, on a manual clock, with no drift
// allowance so that deadlines are exact.
struct Fixture {
  std::shared_ptr<ManualClock> clock = std::make_shared<ManualClock>();
  std::shared_ptr<FaultyStore> store = std::make_shared<FaultyStore>(
      std::shared_ptr<Store>(store::make_memory_store()));
  Client client = make_client();

  Client make_client() {
    ClientOptions o;
    o.clock = clock;
    o.drift_factor = 0;
    o.drift_floor = 0ms;
    o.request_timeout = 60s;
    o.max_retries = 0;
    return Client::wrap(store, o);
  }
  // Lets hung calls finish so that the session's threads can end.
  ~Fixture() {
    for (Op op : {Op::extend, Op::release}) store->resume(op);
  }
};

struct LostLog {
  std::mutex mu;
  std::vector<Error> errors;
  std::vector<Clock::time_point> at;
  std::shared_ptr<const Clock> clock;

  KeeperOptions options() {
    KeeperOptions ko;
    ko.on_lost = [this](const Error& e) {
      std::lock_guard<std::mutex> g(mu);
      errors.push_back(e);
      at.push_back(clock->now());
    };
    return ko;
  }
  std::size_t count() {
    std::lock_guard<std::mutex> g(mu);
    return errors.size();
  }
};

TEST(SessionTest, RenewalMovesTheSafeDeadlineByExactlyTheElapsedTime) {
  Fixture f;
  auto l = f.client.try_acquire("job", ttl(30s));
  ASSERT_TRUE(l.ok()) << l.error().to_string();
  EXPECT_EQ(l->local_deadline, f.clock->now() + 30s);
  LeaseKeeper k(f.client, *l);
  const auto first = k.safe_deadline();
  for (int i = 1; i <= 3; ++i) {
    f.clock->advance(10s);  // the renew interval, TTL/3
    ASSERT_TRUE(
        eventually([&] { return k.safe_deadline() > first + (i - 1) * 10s; }));
    EXPECT_EQ(k.safe_deadline(), first + i * 10s);
    EXPECT_EQ(f.store->calls(Op::extend), i);
  }
  EXPECT_FALSE(k.lost());
  EXPECT_EQ(k.fencing_token(), l->fencing_token);
}

TEST(SessionTest, NoticeFiresAtTheSafeDeadlineWhileARenewalHangs) {
  Fixture f;
  LostLog log;
  log.clock = f.clock;
  auto l = f.client.try_acquire("job", ttl(30s));
  ASSERT_TRUE(l.ok());
  const auto deadline = l->local_deadline;
  LeaseKeeper k(f.client, *l, log.options());
  f.store->hang(Op::extend);
  f.clock->advance(10s);
  ASSERT_TRUE(eventually([&] { return f.store->hanging(Op::extend) == 1; }));
  f.clock->advance(19'999ms);  // 1 ms before the deadline: still held
  EXPECT_FALSE(k.lost());
  EXPECT_FALSE(k.cancelled().load());
  f.clock->advance(1ms);  // the deadline; the renewal still hangs
  ASSERT_TRUE(eventually([&] { return log.count() == 1; }));
  EXPECT_EQ(f.store->hanging(Op::extend), 1);
  EXPECT_TRUE(k.cancelled().load());
  EXPECT_TRUE(k.lost());
  {
    std::lock_guard<std::mutex> g(log.mu);
    EXPECT_EQ(log.errors[0].code(), Errc::lock_lost);
    EXPECT_NE(log.errors[0].message().find("local safe deadline"),
              std::string::npos)
        << log.errors[0].message();
    EXPECT_EQ(log.at[0], deadline);  // the clock did not move past it
  }
  // The late renewal succeeds at the store but is not taken: still lost,
  // and noticed once. Then the session gives the lease back.
  f.store->resume(Op::extend);
  ASSERT_TRUE(eventually([&] {
    auto info = f.client.describe("job");
    return info.ok() && info->holders.empty();
  }));
  EXPECT_TRUE(k.lost());
  EXPECT_EQ(log.count(), 1u);
}

TEST(SessionTest, LockLostAnswerIsNoticedOnceAndNotRenewedAgain) {
  Fixture f;
  LostLog log;
  log.clock = f.clock;
  auto l = f.client.try_acquire("job", ttl(30s));
  ASSERT_TRUE(l.ok());
  LeaseKeeper k(f.client, *l, log.options());
  ASSERT_TRUE(*f.client.release(*l));  // behind the keeper's back
  f.clock->advance(10s);
  ASSERT_TRUE(eventually([&] { return log.count() == 1; }));
  {
    std::lock_guard<std::mutex> g(log.mu);
    EXPECT_EQ(log.errors[0].code(), Errc::lock_lost);
  }
  EXPECT_TRUE(k.lost());
  const int extends = f.store->calls(Op::extend);
  f.clock->advance(30s);
  f.clock->advance(30s);
  EXPECT_EQ(f.store->calls(Op::extend), extends);
  EXPECT_EQ(log.count(), 1u);
}

TEST(SessionTest, RetryableRenewalFailuresAreRetriedUntilOneSucceeds) {
  Fixture f;
  LostLog log;
  log.clock = f.clock;
  auto l = f.client.try_acquire("job", ttl(30s));
  ASSERT_TRUE(l.ok());
  LeaseKeeper k(f.client, *l, log.options());
  const auto first = k.safe_deadline();
  f.store->fail(Op::extend, Error(Errc::unavailable, "injected"), 3);
  auto advanced = std::chrono::nanoseconds(10s);
  f.clock->advance(10s);
  ASSERT_TRUE(eventually([&] { return f.store->calls(Op::extend) == 1; }));
  for (int i = 2; i <= 4; ++i) {
    EXPECT_EQ(k.safe_deadline(), first);
    // The fast retry comes 20 ms after the failed attempt *returned*, a
    // moment this thread cannot see: move the clock 20 ms at a time until
    // the next attempt is made (one step, unless the keeper read the clock
    // only after a step: then two).
    bool called = false;
    for (int step = 0; step < 5 && !called; ++step) {
      f.clock->advance(20ms);
      advanced += 20ms;
      called =
          eventually([&] { return f.store->calls(Op::extend) == i; }, 300ms);
    }
    ASSERT_TRUE(called) << "no attempt " << i;
  }
  ASSERT_TRUE(eventually([&] { return k.safe_deadline() > first; }));
  // Renewed by the 4th attempt, sent `advanced` after the acquire.
  EXPECT_EQ(k.safe_deadline(), first + advanced);
  EXPECT_LE(advanced, std::chrono::nanoseconds(10s + 120ms));
  EXPECT_EQ(log.count(), 0u);
}

// With a 30 s lease kept: hangs the store's extend and release, then moves
// the clock to the safe deadline, where the lease is declared lost while
// its renewal still hangs. False if that did not happen.
bool lose_while_the_store_hangs(Fixture& f, LostLog& log) {
  f.store->hang(Op::extend);
  f.store->hang(Op::release);
  f.clock->advance(10s);
  if (!eventually([&] { return f.store->hanging(Op::extend) == 1; })) {
    return false;
  }
  f.clock->advance(20s);
  return eventually([&] { return log.count() == 1; });
}

TEST(SessionTest, ReleasingALostLeaseDoesNotWaitForTheStore) {
  Fixture f;
  LostLog log;
  log.clock = f.clock;
  auto l = f.client.try_acquire("job", ttl(30s));
  ASSERT_TRUE(l.ok());
  LeaseKeeper k(f.client, *l, log.options());
  ASSERT_TRUE(lose_while_the_store_hangs(f, log));
  const auto start = std::chrono::steady_clock::now();
  auto r = k.release();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 1s);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(*r);  // lost, so not released by this call
  EXPECT_EQ(f.store->calls(Op::release), 0);  // the session's comes later
  f.store->resume(Op::extend);
  ASSERT_TRUE(eventually([&] { return f.store->calls(Op::release) == 1; }));
  f.store->resume(Op::release);  // ~LeaseKeeper waits for the give-back
}

// The last owner of a session waits for its threads: the give-back of a
// lost lease still hanging is finished (or timed out) when ~LeaseKeeper
// returns, so no session thread outlives its owners (one that did could
// still be calling the store while the process exits).
TEST(SessionTest, TheLastKeeperWaitsForTheGiveBackOfALostLease) {
  Fixture f;
  LostLog log;
  log.clock = f.clock;
  auto l = f.client.try_acquire("job", ttl(30s));
  ASSERT_TRUE(l.ok());
  std::atomic<bool> resumed{false};
  std::thread resumer;
  {
    LeaseKeeper k(f.client, *l, log.options());
    ASSERT_TRUE(lose_while_the_store_hangs(f, log));
    f.store->resume(Op::extend);
    ASSERT_TRUE(eventually([&] { return f.store->hanging(Op::release) == 1; }));
    resumer = std::thread([&] {
      std::this_thread::sleep_for(200ms);
      resumed.store(true);
      f.store->resume(Op::release);
    });
  }  // ~LeaseKeeper: the last owner of the client's default session
  EXPECT_TRUE(resumed.load());
  EXPECT_EQ(f.store->hanging(Op::release), 0);
  auto info = f.client.describe("job");
  ASSERT_TRUE(info.ok());
  EXPECT_TRUE(info->holders.empty());  // given back before ~LeaseKeeper ended
  resumer.join();
}

TEST(SessionTest, OneSessionKeepsManyLeasesAndReleasesThemWhenClosed) {
  Fixture f;
  std::vector<LeaseKeeper> kept;
  {
    Session s(f.client);
    for (const char* name : {"a", "b", "c"}) {
      auto l = f.client.try_acquire(name, ttl(30s));
      ASSERT_TRUE(l.ok());
      kept.push_back(s.keep(*l));
    }
    EXPECT_EQ(s.size(), 3u);
    const auto first = kept[0].safe_deadline();
    f.clock->advance(10s);
    ASSERT_TRUE(eventually([&] { return f.store->calls(Op::extend) == 3; }));
    for (auto& k : kept) {
      ASSERT_TRUE(eventually([&] { return k.safe_deadline() == first + 10s; }));
    }
    ASSERT_TRUE(*kept[1].release());
    EXPECT_EQ(s.size(), 2u);
  }  // closing the session releases what it still keeps
  for (const char* name : {"a", "b", "c"}) {
    auto info = f.client.describe(name);
    ASSERT_TRUE(info.ok());
    EXPECT_TRUE(info->holders.empty()) << name;
  }
  for (auto& k : kept) EXPECT_TRUE(k.cancelled().load());
  EXPECT_FALSE(*kept[0].release());
}

TEST(SessionTest, ElectorLosesLeadershipAtTheSafeDeadlineWhileRenewalHangs) {
  Fixture f;
  std::atomic<int> lost{0};
  ElectorOptions o;
  o.ttl = 30s;
  o.on_lost = [&](const Error&) { lost.fetch_add(1); };
  Elector e(f.client, "group", o);
  ASSERT_TRUE(e.campaign(5s).ok());
  const auto deadline = e.safe_deadline();
  EXPECT_EQ(deadline, e.lease()->local_deadline);
  f.clock->advance(10s);
  ASSERT_TRUE(eventually([&] { return e.safe_deadline() == deadline + 10s; }));
  f.store->hang(Op::extend);
  f.clock->advance(10s);
  ASSERT_TRUE(eventually([&] { return f.store->hanging(Op::extend) == 1; }));
  f.clock->advance(19'999ms);
  EXPECT_TRUE(e.is_leader());
  f.clock->advance(1ms);
  ASSERT_TRUE(eventually([&] { return lost.load() == 1; }));
  EXPECT_FALSE(e.is_leader());
  EXPECT_TRUE(e.cancelled().load());
  EXPECT_FALSE(e.lease().has_value());
  EXPECT_TRUE(e.resign().ok());
}

// on_renewed: once per successful renewal, with the renewed lease, and
// never after the keeper let go (release waits for a call in progress).
TEST(SessionTest, OnRenewedComesAfterEachRenewalWithTheNewDeadline) {
  Fixture f;
  auto l = f.client.try_acquire("job", ttl(30s));
  ASSERT_TRUE(l.ok());
  std::mutex mu;
  std::vector<Clock::time_point> seen;
  KeeperOptions o;
  o.on_renewed = [&](const Lease& renewed) {
    std::lock_guard<std::mutex> g(mu);
    seen.push_back(renewed.local_deadline);
  };
  LeaseKeeper k(f.client, *l, o);
  auto count = [&] {
    std::lock_guard<std::mutex> g(mu);
    return seen.size();
  };
  for (std::size_t i = 1; i <= 2; ++i) {
    f.clock->advance(10s);
    ASSERT_TRUE(eventually([&] { return count() == i; }));
    std::lock_guard<std::mutex> g(mu);
    EXPECT_EQ(seen.back(), l->local_deadline + static_cast<int>(i) * 10s);
  }
  EXPECT_EQ(k.safe_deadline(), l->local_deadline + 20s);
  // A failed renewal calls nothing.
  f.store->fail(Op::extend, Error(Errc::lock_lost, "injected"));
  f.clock->advance(10s);
  ASSERT_TRUE(eventually([&] { return k.lost(); }));
  EXPECT_EQ(count(), 2u);
  // The lease the store called lost is not renewed again meanwhile.
  EXPECT_EQ(f.store->calls(Op::extend), 3);
}

TEST(SessionTest, ElectorOnRenewedComesWithEachRenewalOfTheTerm) {
  Fixture f;
  std::atomic<int> renewals{0};
  ElectorOptions o;
  o.ttl = 30s;
  o.on_renewed = [&](const Lease&) { renewals.fetch_add(1); };
  Elector e(f.client, "group", o);
  ASSERT_TRUE(e.campaign(5s).ok());
  f.clock->advance(10s);
  ASSERT_TRUE(eventually([&] { return renewals.load() == 1; }));
  EXPECT_TRUE(e.resign().ok());
  f.clock->advance(10s);
  f.clock->advance(10s);
  EXPECT_EQ(renewals.load(), 1);
}

// detach(): renewal stops, the lease stays held in the store for the
// caller to extend; a renewal in flight is answered before detach returns,
// so the caller's extend is the last one the store sees.
TEST(SessionTest, DetachStopsRenewalAndLeavesTheLeaseHeld) {
  Fixture f;
  auto l = f.client.try_acquire("job", ttl(30s));
  ASSERT_TRUE(l.ok());
  LeaseKeeper k(f.client, *l);
  f.store->hang(Op::extend);
  f.clock->advance(10s);
  ASSERT_TRUE(eventually([&] { return f.store->hanging(Op::extend) == 1; }));
  std::atomic<bool> returned{false};
  Result<Lease> detached = Error(Errc::internal, "unset");
  std::thread t([&] {
    detached = k.detach();
    returned.store(true);
  });
  std::this_thread::sleep_for(100ms);
  EXPECT_FALSE(returned.load()) << "detach did not wait for the renewal";
  f.store->resume(Op::extend);
  t.join();
  ASSERT_TRUE(detached.ok()) << detached.error().to_string();
  EXPECT_EQ(detached->fencing_token, l->fencing_token);
  const int extends = f.store->calls(Op::extend);
  f.clock->advance(10s);
  f.clock->advance(10s);
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(f.store->calls(Op::extend), extends) << "renewed after detach";
  auto info = f.client.describe("job");
  ASSERT_TRUE(info.ok());
  ASSERT_EQ(info->holders.size(), 1u) << "detach released the lease";
  auto extended = f.client.extend(*detached, 1h);
  ASSERT_TRUE(extended.ok()) << extended.error().to_string();
  EXPECT_FALSE(*k.release());  // the keeper no longer owns it
  EXPECT_EQ(f.client.describe("job")->holders.size(), 1u);
  EXPECT_EQ(k.detach().error().code(), Errc::lock_lost);
}

TEST(SessionTest, DetachOfALostLeaseSaysSo) {
  Fixture f;
  auto l = f.client.try_acquire("job", ttl(30s));
  ASSERT_TRUE(l.ok());
  LeaseKeeper k(f.client, *l);
  ASSERT_TRUE(*f.client.release(*l));
  f.clock->advance(10s);
  ASSERT_TRUE(eventually([&] { return k.lost(); }));
  auto d = k.detach();
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.error().code(), Errc::lock_lost);
}

// An on_lost runs on the session's notice thread, which no longer knows the
// term: ~Elector itself must wait for it, since on_lost belongs to it.
TEST(SessionTest, DestroyingAnElectorWaitsForItsRunningOnLost) {
  Fixture f;
  std::atomic<bool> started{false};
  std::atomic<bool> finished{false};
  ElectorOptions o;
  o.ttl = 30s;
  o.on_lost = [&](const Error&) {
    started.store(true);
    std::this_thread::sleep_for(200ms);
    finished.store(true);
  };
  auto e = std::make_unique<Elector>(f.client, "group", o);
  ASSERT_TRUE(e->campaign(5s).ok());
  ASSERT_TRUE(f.client.release(*e->lease()).value());
  f.clock->advance(10s);  // the next renewal answers lock_lost
  ASSERT_TRUE(eventually([&] { return started.load(); }));
  e.reset();
  EXPECT_TRUE(finished.load());
}

TEST(SessionTest, AnElectorMayBeDestroyedByItsOwnOnLost) {
  Fixture f;
  auto done = std::make_shared<std::atomic<bool>>(false);
  Elector* elector = nullptr;
  ElectorOptions o;
  o.ttl = 30s;
  o.on_lost = [done, &elector](const Error&) {
    // Only locals after the delete: this closure goes with the elector.
    auto d = done;
    delete elector;
    d->store(true);
  };
  elector = new Elector(f.client, "group", o);
  ASSERT_TRUE(elector->campaign(5s).ok());
  ASSERT_TRUE(f.client.release(*elector->lease()).value());
  f.clock->advance(10s);
  EXPECT_TRUE(eventually([&] { return done->load(); }));
}

}  // namespace
}  // namespace baton
