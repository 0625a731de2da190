// conformance/suite_observer.cc — the observer's events
// (baton/observer.h) are the same on every store: each occurrence fires
// once, in order, naming the lock, the lease's fencing token and its mode;
// a blocking acquire that waits says so first; an observer that throws
// changes no call's result.
#include <algorithm>
#include <atomic>
#include <future>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "baton/conformance.h"
#include "baton/elector.h"
#include "baton/keeper.h"
#include "conformance/suite_helpers.h"

namespace baton::conformance {
namespace {

// One event, copied out of on_event (its views are valid only there).
struct Seen {
  EventKind kind = EventKind::granted;
  std::string lock;
  std::optional<std::uint64_t> fencing;  // of the event's lease
  bool lease_shared = false;
  bool shared = false;
  std::chrono::microseconds waited{0};
  std::chrono::microseconds held{0};
  std::optional<std::uint64_t> queue_position;
  std::optional<Errc> error;
  LostReason lost_reason = LostReason::store_said;
  bool retryable = false;
  std::string leader_label;
};

class RecordingObserver : public Observer {
 public:
  void on_event(const Event& e) override {
    Seen s;
    s.kind = e.kind;
    s.lock = std::string(e.lock);
    if (e.lease) {
      s.fencing = e.lease->fencing_token;
      s.lease_shared = e.lease->shared;
    }
    s.shared = e.shared;
    s.waited = e.waited;
    s.held = e.held;
    s.queue_position = e.queue_position;
    if (e.error) s.error = e.error->code();
    s.lost_reason = e.lost_reason;
    s.retryable = e.retryable;
    s.leader_label = std::string(e.leader_label);
    std::lock_guard<std::mutex> lk(mu_);
    seen_.push_back(std::move(s));
  }
  std::vector<Seen> events() const {
    std::lock_guard<std::mutex> lk(mu_);
    return seen_;
  }
  // The kinds of the events on `lock`, space-separated.
  std::string kinds(const std::string& lock) const {
    std::string out;
    for (const Seen& s : events()) {
      if (s.lock != lock) continue;
      if (!out.empty()) out += ' ';
      out += to_string(s.kind);
    }
    return out;
  }
  std::size_t count(EventKind kind) const {
    const auto all = events();
    return static_cast<std::size_t>(std::count_if(
        all.begin(), all.end(), [&](const Seen& s) { return s.kind == kind; }));
  }

 private:
  mutable std::mutex mu_;
  std::vector<Seen> seen_;
};

// An observer that throws from every event (after counting it).
class ThrowingObserver : public Observer {
 public:
  void on_event(const Event&) override {
    calls.fetch_add(1);
    throw std::runtime_error("observer failure");
  }
  std::atomic<int> calls{0};
};

class Observed {
 public:
  std::shared_ptr<RecordingObserver> observer =
      std::make_shared<RecordingObserver>();
  ClientOptions options() const {
    ClientOptions o;
    o.observer = observer;
    return o;
  }
};

TEST_P(ConformanceTest, Observer_TryFreeIsGrantedHeldIsNotAcquired) {
  const std::string name = lock_name("try");
  Observed h, r;
  Client holder = open_client(h.options());
  Client rival = open_client(r.options());
  auto lease = holder.try_acquire(name, opts(30s));
  ASSERT_TRUE(lease.ok()) << lease.error().to_string();
  EXPECT_NE(lease->granted_at, steady_clock::time_point{});
  auto busy = rival.try_acquire(name, opts(30s));
  ASSERT_FALSE(busy.ok());
  EXPECT_EQ(h.observer->kinds(name), "granted");
  EXPECT_EQ(r.observer->kinds(name), "not_acquired");
  const auto he = h.observer->events();
  ASSERT_EQ(he.size(), 1u);
  EXPECT_EQ(he[0].fencing, lease->fencing_token);
  EXPECT_FALSE(he[0].shared);
  EXPECT_FALSE(he[0].lease_shared);
  const auto re = r.observer->events();
  ASSERT_EQ(re.size(), 1u);
  EXPECT_EQ(re[0].error, Errc::not_acquired);
  EXPECT_FALSE(re[0].fencing.has_value());
  ASSERT_TRUE(*holder.release(*lease));
  EXPECT_EQ(h.observer->kinds(name), "granted released");
}

TEST_P(ConformanceTest, Observer_AWaitStartsThenIsGrantedThenReleased) {
  const std::string name = lock_name("wait");
  Observed h, r;
  Client holder = open_client(h.options());
  Client rival = open_client(r.options());
  auto held = holder.try_acquire(name, opts(30s));
  ASSERT_TRUE(held.ok()) << held.error().to_string();
  auto waiting = std::async(
      std::launch::async, [&] { return rival.acquire(name, 30s, opts(30s)); });
  ASSERT_TRUE(eventually([&] {
    return r.observer->count(EventKind::wait_started) == 1 &&
           waiters_of(holder, name) == 1;
  })) << "events: "
      << r.observer->kinds(name);
  std::this_thread::sleep_for(20ms);  // the wait lasts a while
  ASSERT_TRUE(*holder.release(*held));
  auto got = waiting.get();
  ASSERT_TRUE(got.ok()) << got.error().to_string();
  std::this_thread::sleep_for(5ms);  // held a while
  ASSERT_TRUE(*rival.release(*got));
  EXPECT_EQ(r.observer->kinds(name), "wait_started granted released");
  const auto re = r.observer->events();
  ASSERT_EQ(re.size(), 3u);
  if (re[0].queue_position) {
    EXPECT_EQ(*re[0].queue_position, 0u);
  }
  EXPECT_FALSE(re[0].fencing.has_value());
  EXPECT_GE(re[1].waited, 20ms);
  EXPECT_EQ(re[1].fencing, got->fencing_token);
  EXPECT_GT(got->fencing_token, held->fencing_token);
  EXPECT_EQ(re[2].fencing, got->fencing_token);
  EXPECT_GE(re[2].held, 5ms);
  EXPECT_EQ(h.observer->kinds(name), "granted released");
}

TEST_P(ConformanceTest, Observer_AWaitThatRunsOutStartsThenTimesOut) {
  const std::string name = lock_name("timeout");
  Observed r;
  auto held = client().try_acquire(name, opts(30s));
  ASSERT_TRUE(held.ok()) << held.error().to_string();
  Client rival = open_client(r.options());
  auto late = rival.acquire(name, 300ms, opts(30s));
  ASSERT_FALSE(late.ok());
  EXPECT_EQ(late.error().code(), Errc::timeout) << late.error().to_string();
  EXPECT_EQ(r.observer->kinds(name), "wait_started timed_out");
  const auto re = r.observer->events();
  ASSERT_EQ(re.size(), 2u);
  EXPECT_EQ(re[1].error, Errc::timeout);
  EXPECT_GE(re[1].waited, 300ms);
  EXPECT_TRUE(*client().release(*held));
}

// A client's first wait may not know its place (it tries first, until it
// has seen its store answer `queued`); after that, a store that reports
// places reports the next waiter as 0 and the one behind it as 1.
TEST_P(ConformanceTest, Observer_WaitStartedCarriesThePlaceTheStoreReports) {
  const std::string name = lock_name("place");
  Observed r;
  auto held = client().try_acquire(name, opts(30s));
  ASSERT_TRUE(held.ok()) << held.error().to_string();
  Client rival = open_client(r.options());
  ASSERT_FALSE(rival.acquire(name, 100ms, opts(30s)).ok());
  auto first = std::async(std::launch::async,
                          [&] { return rival.acquire(name, 20s, opts(30s)); });
  ASSERT_TRUE(eventually([&] {
    return r.observer->count(EventKind::wait_started) == 2 &&
           waiters_of(client(), name) == 1;
  }));
  auto second = std::async(std::launch::async,
                           [&] { return rival.acquire(name, 20s, opts(30s)); });
  ASSERT_TRUE(eventually([&] {
    return r.observer->count(EventKind::wait_started) == 3 &&
           waiters_of(client(), name) == 2;
  }));
  ASSERT_TRUE(*client().release(*held));
  auto a = first.get();
  ASSERT_TRUE(a.ok()) << a.error().to_string();
  ASSERT_TRUE(*rival.release(*a));
  auto b = second.get();
  ASSERT_TRUE(b.ok()) << b.error().to_string();
  ASSERT_TRUE(*rival.release(*b));
  std::vector<std::optional<std::uint64_t>> places;
  for (const Seen& s : r.observer->events()) {
    if (s.kind == EventKind::wait_started) places.push_back(s.queue_position);
  }
  ASSERT_EQ(places.size(), 3u);
  RecordProperty("queue_positions", places[2] ? "reported" : "unknown");
  // The client learns from the first `queued` answer it sees. On a slow
  // machine the 100 ms wait above can end before the store answered it, so
  // the first waiter may still try first (place unknown); the second,
  // asked after the first was seen queued, knows its place then. A place
  // once known is never lost.
  if (places[1]) {
    ASSERT_TRUE(places[2].has_value());
    EXPECT_EQ(*places[1], 0u);
  }
  if (places[2]) {
    EXPECT_EQ(*places[2], 1u);
  }
  // The second grant may be seen before the first release's event: the
  // store hands the lock over inside that release, and `released` fires
  // when the call returns.
  const std::string kinds = r.observer->kinds(name);
  EXPECT_TRUE(kinds ==
                  "wait_started timed_out wait_started wait_started granted "
                  "released granted released" ||
              kinds ==
                  "wait_started timed_out wait_started wait_started granted "
                  "granted released released")
      << kinds;
}

TEST_P(ConformanceTest, Observer_AStoppedWaitStartsThenIsCancelled) {
  BATON_REQUIRE("cancel");
  const std::string name = lock_name("cancel");
  Observed r;
  auto held = client().try_acquire(name, opts(30s));
  ASSERT_TRUE(held.ok()) << held.error().to_string();
  Client rival = open_client(r.options());
  std::stop_source stop;
  AcquireOptions o = opts(30s);
  o.stop = stop.get_token();
  auto waiting = std::async(std::launch::async,
                            [&] { return rival.acquire(name, 30s, o); });
  ASSERT_TRUE(eventually([&] {
    return r.observer->count(EventKind::wait_started) == 1 &&
           waiters_of(client(), name) == 1;
  }));
  stop.request_stop();
  auto got = waiting.get();
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.error().code(), Errc::cancelled) << got.error().to_string();
  EXPECT_EQ(r.observer->kinds(name), "wait_started cancelled");
  EXPECT_TRUE(*client().release(*held));
}

TEST_P(ConformanceTest, Observer_ExtendRenewsAndAGoneLeaseIsLostStoreSaid) {
  const std::string name = lock_name("extend");
  Observed h;
  Client holder = open_client(h.options());
  auto lease = holder.try_acquire(name, opts(30s));
  ASSERT_TRUE(lease.ok()) << lease.error().to_string();
  auto renewed = holder.extend(*lease, 20s);
  ASSERT_TRUE(renewed.ok()) << renewed.error().to_string();
  EXPECT_EQ(renewed->granted_at, lease->granted_at);
  ASSERT_TRUE(*client().release(*renewed));  // released behind its back
  std::this_thread::sleep_for(5ms);
  auto gone = holder.extend(*renewed, 20s);
  ASSERT_FALSE(gone.ok());
  EXPECT_EQ(gone.error().code(), Errc::lock_lost) << gone.error().to_string();
  EXPECT_EQ(h.observer->kinds(name), "granted renewed lost");
  const auto he = h.observer->events();
  ASSERT_EQ(he.size(), 3u);
  EXPECT_EQ(he[1].fencing, lease->fencing_token);
  EXPECT_EQ(he[2].fencing, lease->fencing_token);
  EXPECT_EQ(he[2].lost_reason, LostReason::store_said);
  EXPECT_EQ(he[2].error, Errc::lock_lost);
  EXPECT_GE(he[2].held, 5ms);
  // Nothing held: a release answers false and is no event.
  auto again = holder.release(*renewed);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(*again);
  EXPECT_EQ(h.observer->kinds(name), "granted renewed lost");
}

TEST_P(ConformanceTest, Observer_AKeeperReportsItsRenewals) {
  const std::string name = lock_name("keeper");
  Observed h;
  Client holder = open_client(h.options());
  KeeperOptions ko;
  ko.renew_interval = 50ms;
  auto keeper = LeaseKeeper::acquire(holder, name, 0ms, opts(5s), ko);
  ASSERT_TRUE(keeper.ok()) << keeper.error().to_string();
  const std::uint64_t fencing = keeper->fencing_token();
  ASSERT_TRUE(eventually([&] {
    return h.observer->count(EventKind::renewed) >= 3;
  })) << h.observer->kinds(name);
  ASSERT_TRUE(*keeper->release());
  const auto he = h.observer->events();
  ASSERT_GE(he.size(), 5u);
  EXPECT_EQ(he.front().kind, EventKind::granted);
  EXPECT_EQ(he.back().kind, EventKind::released);
  for (std::size_t i = 1; i + 1 < he.size(); ++i) {
    // A renewal may fail and be retried on a loaded machine; never lost.
    EXPECT_TRUE(he[i].kind == EventKind::renewed ||
                he[i].kind == EventKind::renewal_failed)
        << to_string(he[i].kind);
    if (he[i].kind == EventKind::renewal_failed) {
      EXPECT_TRUE(he[i].retryable);
    }
  }
  for (const Seen& s : he) {
    EXPECT_EQ(s.lock, name);
    EXPECT_EQ(s.fencing, fencing);
  }
}

TEST_P(ConformanceTest, Observer_AKeeperPastItsDeadlineIsLostOnce) {
  const std::string name = lock_name("deadline");
  Observed h;
  Client holder = open_client(h.options());
  std::atomic<int> notices{0};
  std::atomic<bool> event_first{false};
  KeeperOptions ko;
  ko.renew_interval = 1h;  // no renewal before the 1 s lease ends locally
  ko.on_lost = [&](const Error&) {
    event_first.store(h.observer->count(EventKind::lost) == 1);
    notices.fetch_add(1);
  };
  auto keeper = LeaseKeeper::acquire(holder, name, 0ms, opts(1s), ko);
  ASSERT_TRUE(keeper.ok()) << keeper.error().to_string();
  const std::uint64_t fencing = keeper->fencing_token();
  ASSERT_TRUE(eventually([&] { return notices.load() == 1; }));
  EXPECT_TRUE(event_first.load()) << "lost fires right before on_lost";
  std::this_thread::sleep_for(100ms);  // no second notice
  EXPECT_EQ(notices.load(), 1);
  EXPECT_EQ(h.observer->kinds(name), "granted lost");
  const auto he = h.observer->events();
  ASSERT_EQ(he.size(), 2u);
  EXPECT_EQ(he[1].lost_reason, LostReason::deadline_passed);
  EXPECT_EQ(he[1].error, Errc::lock_lost);
  EXPECT_EQ(he[1].fencing, fencing);
  EXPECT_GE(he[1].held, 900ms);
  auto r = keeper->release();  // already lost: no store call, no event
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(*r);
  EXPECT_EQ(h.observer->kinds(name), "granted lost");
}

TEST_P(ConformanceTest, Observer_AThrowingObserverChangesNoResult) {
  const std::string name = lock_name("throws");
  auto observer = std::make_shared<ThrowingObserver>();
  ClientOptions o;
  o.observer = observer;
  Client c = open_client(o);
  Client rival = open_client(o);
  auto lease = c.try_acquire(name, opts(30s));
  ASSERT_TRUE(lease.ok()) << lease.error().to_string();
  auto busy = rival.try_acquire(name, opts(30s));
  ASSERT_FALSE(busy.ok());
  EXPECT_EQ(busy.error().code(), Errc::not_acquired);
  auto late = rival.acquire(name, 100ms, opts(30s));
  ASSERT_FALSE(late.ok());
  EXPECT_EQ(late.error().code(), Errc::timeout) << late.error().to_string();
  auto renewed = c.extend(*lease, 30s);
  ASSERT_TRUE(renewed.ok()) << renewed.error().to_string();
  auto released = c.release(*renewed);
  ASSERT_TRUE(released.ok());
  EXPECT_TRUE(*released);
  auto gone = c.extend(*renewed, 30s);
  ASSERT_FALSE(gone.ok());
  EXPECT_EQ(gone.error().code(), Errc::lock_lost);
  // granted, not_acquired, wait_started, timed_out, renewed, released,
  // lost: each thrown and dropped.
  EXPECT_EQ(observer->calls.load(), 7);
}

TEST_P(ConformanceTest, Observer_BadInputIsNoEvent) {
  Observed h;
  Client c = open_client(h.options());
  auto bad = c.try_acquire("", opts(30s));
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code(), Errc::invalid_argument);
  auto zero = c.acquire(lock_name("bad"), 1s, opts(0ms));
  ASSERT_FALSE(zero.ok());
  EXPECT_TRUE(h.observer->events().empty());
}

TEST_P(ConformanceTest, Observer_SharedLeasesAreMarkedShared) {
  if (unsupported_reason("shared")) GTEST_SKIP() << "no shared mode";
  const std::string name = lock_name("shared");
  Observed h;
  Client c = open_client(h.options());
  auto a = c.acquire_shared(name, 0ms, opts(30s));
  ASSERT_TRUE(a.ok()) << a.error().to_string();
  auto b = c.acquire_shared(name, 0ms, opts(30s));
  ASSERT_TRUE(b.ok()) << b.error().to_string();
  auto x = c.try_acquire(name, opts(30s));
  ASSERT_FALSE(x.ok());
  ASSERT_TRUE(*c.release(*a));
  ASSERT_TRUE(*c.release(*b));
  EXPECT_EQ(h.observer->kinds(name),
            "granted granted not_acquired released released");
  const auto he = h.observer->events();
  ASSERT_EQ(he.size(), 5u);
  const bool shared[] = {true, true, false, true, true};
  const std::optional<std::uint64_t> fencing[] = {
      a->fencing_token, b->fencing_token, std::nullopt, a->fencing_token,
      b->fencing_token};
  for (std::size_t i = 0; i < he.size(); ++i) {
    EXPECT_EQ(he[i].shared, shared[i]) << i;
    EXPECT_EQ(he[i].fencing, fencing[i]) << i;
  }
}

TEST_P(ConformanceTest, Observer_AcquireAllFiresOneEventPerName) {
  BATON_REQUIRE("rule11");
  const std::string a = lock_name("all-a");
  const std::string b = lock_name("all-b");
  Observed h;
  Client c = open_client(h.options());
  auto got = c.acquire_all({a, b}, 0ms, opts(30s));
  ASSERT_TRUE(got.ok()) << got.error().to_string();
  ASSERT_EQ(got->size(), 2u);
  EXPECT_EQ(h.observer->kinds(a), "granted");
  EXPECT_EQ(h.observer->kinds(b), "granted");
  for (const Lease& l : *got) {
    EXPECT_NE(l.granted_at, steady_clock::time_point{});
    ASSERT_TRUE(*c.release(l));
  }
  auto rival_lease = client().try_acquire(b, opts(30s));
  ASSERT_TRUE(rival_lease.ok()) << rival_lease.error().to_string();
  auto late = c.acquire_all({a, b}, 200ms, opts(30s));
  ASSERT_FALSE(late.ok());
  EXPECT_EQ(h.observer->kinds(a), "granted released wait_started timed_out");
  EXPECT_EQ(h.observer->kinds(b), "granted released wait_started timed_out");
  EXPECT_TRUE(*client().release(*rival_lease));
}

TEST_P(ConformanceTest, Observer_AnElectorReportsItsTerm) {
  BATON_REQUIRE("election");
  const std::string group = lock_name("election");
  Observed h;
  Client c = open_client(h.options());
  ElectorOptions eo;
  eo.ttl = 10s;
  eo.label = "observed-candidate";
  Elector elector(c, group, eo);
  ASSERT_TRUE(elector.campaign(5s).ok());
  ASSERT_TRUE(eventually(
      [&] { return h.observer->count(EventKind::became_leader) == 1; }));
  std::this_thread::sleep_for(5ms);
  ASSERT_TRUE(elector.resign().ok());
  const auto he = h.observer->events();
  std::vector<Seen> term;
  for (const Seen& s : he) {
    if (s.kind == EventKind::became_leader ||
        s.kind == EventKind::stopped_leading) {
      term.push_back(s);
    }
  }
  ASSERT_EQ(term.size(), 2u) << h.observer->kinds(group);
  EXPECT_EQ(term[0].lock, group);
  EXPECT_EQ(term[1].lock, group);
  EXPECT_EQ(term[0].fencing, term[1].fencing);
  EXPECT_FALSE(term[1].error.has_value()) << "resigned: no error";
  EXPECT_GE(term[1].held, 5ms);
  // The term is a lease of the client: granted once, released on resign.
  EXPECT_EQ(h.observer->count(EventKind::granted), 1u);
  EXPECT_EQ(he.back().kind, EventKind::released);
  EXPECT_EQ(he.back().fencing, term[0].fencing);
}

}  // namespace

int kLinkSuiteObserver = 0;

}  // namespace baton::conformance
