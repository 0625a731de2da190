// tests/client/client_test.cc — the client layer on the memory: store.
#include "baton/client.h"

#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <thread>

#include "baton/clock.h"
#include "baton/counter.h"
#include "baton/elector.h"
#include "baton/keeper.h"
#include "baton/store_descriptor.h"
#include "stores/memory/memory_store.h"
#include "stores/registry.h"
#include "support/eventually.h"

namespace baton {
namespace {

using namespace std::chrono_literals;
using std::chrono::steady_clock;
using testing::eventually;

Client memory() {
  auto c = Client::open("memory:");
  EXPECT_TRUE(c.ok());
  return *c;
}

AcquireOptions ttl(std::chrono::milliseconds t) {
  AcquireOptions o;
  o.ttl = t;
  return o;
}

TEST(ClientOptionsTest, BadOptionsAreRefused) {
  ClientOptions o;
  o.drift_factor = 0.9;
  auto c = Client::open("memory:", o);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().code(), Errc::invalid_argument);
  o = {};
  o.max_retries = -1;
  EXPECT_FALSE(Client::open("memory:", o).ok());
  o = {};
  o.request_timeout = 0ms;
  EXPECT_FALSE(Client::open("memory:", o).ok());
  o = {};
  o.label = std::string(300, 'x');
  EXPECT_FALSE(Client::open("memory:", o).ok());
  // wrap() cannot fail: every call then reports the bad option.
  o = {};
  o.drift_floor = -1ms;
  Client w =
      Client::wrap(std::shared_ptr<Store>(store::make_memory_store()), o);
  auto r = w.try_acquire("x", ttl(1s));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), Errc::invalid_argument);
}

TEST(ClientTest, DefaultLabelIsHostPidProgram) {
  Client c = memory();
  const std::string& label = c.label();
  EXPECT_EQ(std::count(label.begin(), label.end(), ':'), 2) << label;
  EXPECT_NE(label.find(std::to_string(getpid())), std::string::npos);
  ClientOptions o;
  o.label = "custom";
  EXPECT_EQ(Client::open("memory:", o)->label(), "custom");
  EXPECT_EQ(c.url(), "memory:");
}

TEST(ClientTest, SqliteWithAHostIsRefusedAndHidesThePassword) {
  // sqlite:// takes a file path; with the store built out, the answer names
  // the build option. Either way the password stays hidden.
  auto c = Client::open("sqlite://u:secret@db:3306/x");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().code(), Errc::invalid_argument);
  EXPECT_EQ(c.error().message().find("secret"), std::string::npos)
      << c.error().message();
  auto u = Client::open("nosuch://x:1");
  ASSERT_FALSE(u.ok());
  EXPECT_NE(u.error().message().find("unknown scheme"), std::string::npos)
      << u.error().message();
}

TEST(ClientTest, UnreachableStoreIsUnavailableAndHidesThePassword) {
#if BATON_WITH_POSTGRES
  // Port 1 on loopback: nothing listens there.
  auto c = Client::open("postgres://u:secret@127.0.0.1:1/x");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().code(), Errc::unavailable) << c.error().to_string();
  EXPECT_EQ(c.error().message().find("secret"), std::string::npos)
      << c.error().message();
#else
  GTEST_SKIP() << "built without BATON_WITH_POSTGRES";
#endif
}

TEST(ClientTest, RegisteredFactoryWins) {
  std::atomic<int> opened{0};
  StoreDescriptor fake;
  fake.name = "fakemem";
  fake.schemes = {"fakemem"};
  fake.hosts_required = false;
  fake.open = [&](const StoreUrl&) -> Result<std::unique_ptr<Store>> {
    opened.fetch_add(1);
    return store::make_memory_store("fakemem:");
  };
  ASSERT_TRUE(register_store(std::move(fake)));
  auto c = Client::open("fakemem:");
  ASSERT_TRUE(c.ok()) << c.error().to_string();
  EXPECT_EQ(opened.load(), 1);
  EXPECT_TRUE(c->try_acquire("a", ttl(1s)).ok());
}

TEST(ClientTest, MemoryNameSharesOneStore) {
  auto a = Client::open("memory:shared-test");
  auto b = Client::open("memory:shared-test");
  auto solo = Client::open("memory:");
  ASSERT_TRUE(a.ok() && b.ok() && solo.ok());
  auto l = a->try_acquire("x", ttl(5s));
  ASSERT_TRUE(l.ok());
  EXPECT_FALSE(b->try_acquire("x", ttl(5s)).ok());
  EXPECT_TRUE(solo->try_acquire("x", ttl(5s)).ok());
}

TEST(ClientTest, LeaseCarriesSafeDeadline) {
  ClientOptions o;
  o.drift_floor = 10ms;
  o.drift_factor = 0.1;
  auto c = Client::open("memory:", o);
  ASSERT_TRUE(c.ok());
  const auto before = steady_clock::now();
  auto l = c->try_acquire("x", ttl(1000ms));
  ASSERT_TRUE(l.ok());
  // 1000ms - (100ms + 10ms) from no earlier than `before`.
  EXPECT_LE(l->local_deadline, steady_clock::now() + 890ms);
  EXPECT_GE(l->local_deadline, before + 880ms);
  EXPECT_TRUE(l->valid_now());
  EXPECT_GT(l->time_left(), 0ms);
  EXPECT_GT(l->store_expires_at_ms, 0);
}

// A client and a memory store that share a manual clock, with no drift
// allowance: time moves only by hand, so nothing here sleeps.
struct ManualWorld {
  std::shared_ptr<ManualClock> clock = std::make_shared<ManualClock>();
  Client client = make();
  Client make() {
    ClientOptions o;
    o.clock = clock;
    o.drift_factor = 0;
    o.drift_floor = 0ms;
    return Client::wrap(
        std::shared_ptr<Store>(store::make_memory_store("memory:", clock)), o);
  }
};

TEST(KeeperTest, RenewalKeepsTheLeaseAlivePastItsTtl) {
  ManualWorld w;
  Client& c = w.client;
  std::atomic<int> lost{0};
  KeeperOptions ko;
  ko.on_lost = [&](const Error&) { lost.fetch_add(1); };
  auto k = LeaseKeeper::acquire(c, "job", 0ms, ttl(300ms), ko);
  ASSERT_TRUE(k.ok()) << k.error().to_string();
  const auto token = k->fencing_token();
  for (int i = 0; i < 12; ++i) {  // 1200 ms of store time, 4 TTLs
    w.clock->advance(100ms);      // the renew interval, TTL/3
    ASSERT_TRUE(eventually([&] {
      return k->safe_deadline() == w.clock->now() + 300ms;
    })) << "renewal "
        << i;
  }
  EXPECT_FALSE(k->lost());
  EXPECT_EQ(lost.load(), 0);
  auto info = c.describe("job");
  ASSERT_TRUE(info.ok());
  ASSERT_EQ(info->holders.size(), 1u);
  EXPECT_EQ(info->holders[0].fencing_token, token);
  EXPECT_EQ(info->holders[0].time_left, 300ms);
}

TEST(KeeperTest, DestructorReleasesAndMoveKeepsOneOwner) {
  Client c = memory();
  {
    auto k = LeaseKeeper::acquire(c, "job", 0ms, ttl(10s));
    ASSERT_TRUE(k.ok());
    LeaseKeeper moved = std::move(*k);
    EXPECT_FALSE(moved.lost());
    EXPECT_FALSE(c.try_acquire("job", ttl(1s)).ok());
  }
  auto info = c.describe("job");
  ASSERT_TRUE(info.ok());
  EXPECT_TRUE(info->holders.empty());
}

TEST(KeeperTest, ExplicitReleaseStopsAndReports) {
  Client c = memory();
  std::atomic<int> lost{0};
  KeeperOptions ko;
  ko.on_lost = [&](const Error&) { lost.fetch_add(1); };
  auto k = LeaseKeeper::acquire(c, "job", 0ms, ttl(10s), ko);
  ASSERT_TRUE(k.ok());
  auto r = k->release();
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(*r);
  EXPECT_TRUE(k->cancelled().load());
  EXPECT_FALSE(*k->release());
  EXPECT_EQ(lost.load(), 0);  // a release is not a loss
}

TEST(KeeperTest, BadRenewIntervalIsRefused) {
  Client c = memory();
  KeeperOptions ko;
  ko.renew_interval = -1ms;
  auto k = LeaseKeeper::acquire(c, "job", 0ms, ttl(10s), ko);
  ASSERT_FALSE(k.ok());
  EXPECT_EQ(k.error().code(), Errc::invalid_argument);
}

TEST(ElectorTest, CallbacksAndObserve) {
  ManualWorld w;
  Client& c = w.client;
  std::atomic<int> elected{0}, lost{0};
  ElectorOptions o;
  o.ttl = 200ms;
  o.retry_interval = 70ms;
  o.label = "me";
  o.on_elected = [&](const Lease&) { elected.fetch_add(1); };
  o.on_lost = [&](const Error&) { lost.fetch_add(1); };
  Elector e(c, "group", o);
  auto none = e.observe();
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error().code(), Errc::not_acquired);
  ASSERT_TRUE(e.campaign(5s).ok());
  EXPECT_EQ(elected.load(), 1);
  ASSERT_TRUE(e.campaign(5s).ok());  // already leader: no new term
  EXPECT_EQ(elected.load(), 1);
  for (int i = 0; i < 10; ++i) {  // 700 ms of store time; renewals keep it
    w.clock->advance(70ms);
    ASSERT_TRUE(eventually(
        [&] { return e.safe_deadline() == w.clock->now() + 200ms; }));
  }
  EXPECT_TRUE(e.is_leader());
  EXPECT_FALSE(e.cancelled().load());
  auto info = e.observe();
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->label, "me");
  ASSERT_TRUE(e.resign().ok());
  ASSERT_TRUE(e.resign().ok());  // idempotent
  EXPECT_FALSE(e.is_leader());
  EXPECT_EQ(lost.load(), 0);
  EXPECT_FALSE(e.observe().ok());
}

TEST(ElectorTest, CampaignTimesOutAndResignStopsCampaign) {
  Client c = memory();
  auto held = c.try_acquire("group", ttl(30s));
  ASSERT_TRUE(held.ok());
  ElectorOptions eo;
  eo.ttl = 1s;
  Elector e(c, "group", eo);
  auto st = e.campaign(100ms);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code(), Errc::timeout);
  std::atomic<bool> done{false};
  std::thread t([&] {
    (void)e.campaign();  // forever, until resign()
    done = true;
  });
  for (int i = 0; i < 2000 && c.describe("group")->waiters.empty(); ++i) {
    std::this_thread::sleep_for(5ms);
  }
  ASSERT_EQ(c.describe("group")->waiters.size(), 1u);
  const auto start = steady_clock::now();
  ASSERT_TRUE(e.resign().ok());
  t.join();
  EXPECT_LT(steady_clock::now() - start, 5s);
  EXPECT_FALSE(e.is_leader());
  EXPECT_TRUE(c.describe("group")->waiters.empty());
}

TEST(CounterTest, AddOverflowIsRefused) {
  Client c = memory();
  Counter n = c.counter("n");
  ASSERT_TRUE(n.add(INT64_MAX).ok());
  auto r = n.add(1);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), Errc::invalid_argument);
  EXPECT_EQ(*n.get(), INT64_MAX);
  EXPECT_EQ(n.name(), "n");
}

}  // namespace
}  // namespace baton
