// conformance/suite_watch.cc — the change feed (Store::watch, what
// `baton status --serve` waits on): a store that has one wakes its watcher
// on a grant, a queued request, a release and an expiry under the watched
// prefix, loses no change made between two waits, and ends a wait on
// interrupt(). A store without one says so (StoreTraits key "watch") and
// answers a null feed.
#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "baton/conformance.h"
#include "conformance/suite_helpers.h"

namespace baton::conformance {
namespace {

// A feed that returns this often with nothing changed is not a feed.
constexpr int kMaxSpurious = 50;

// Runs `change` 300 ms from now on another thread, and checks that a
// wait on `feed` that began before it returns because of it, well within
// 20 s. Returns before the change began are spurious (allowed, but at most
// kMaxSpurious of them).
void expect_wake(Waitable& feed, const std::function<void()>& change,
                 const char* what) {
  std::atomic<bool> started{false};
  std::thread t([&] {
    std::this_thread::sleep_for(300ms);
    started = true;
    change();
  });
  const auto start = steady_clock::now();
  const auto until = Clock::steady()->now() + 20s;
  const CallContext ctx(until + 5s, {}, Clock::steady());
  int spurious = 0;
  bool woke = false;
  while (Clock::steady()->now() < until && spurious <= kMaxSpurious) {
    (void)feed.wait_change(until, ctx);
    if (started.load()) {
      woke = Clock::steady()->now() < until;
      break;
    }
    ++spurious;
  }
  t.join();
  EXPECT_TRUE(woke) << what << ": no wake-up within 20 s (" << spurious
                    << " returns before the change)";
  EXPECT_LT(steady_clock::now() - start, 15s) << what;
}

}  // namespace

TEST_P(ConformanceTest, Watch_AStoreWithoutAFeedAnswersNone) {
  auto feed = client().watch(prefix());
  ASSERT_TRUE(feed.ok()) << feed.error().to_string();
  if (const std::string* why = unsupported_reason("watch")) {
    EXPECT_EQ(*feed, nullptr) << "the store says it has no change feed ("
                              << *why << ") but answered one";
    GTEST_SKIP() << "watch is not kept by this store: " << *why;
  }
  EXPECT_NE(*feed, nullptr) << "no change feed, and the store's traits do "
                               "not say why (key \"watch\")";
}

TEST_P(ConformanceTest, Watch_ABadPrefixIsRefused) {
  auto feed = client().watch(std::string("bad\0name", 8));
  ASSERT_FALSE(feed.ok());
  EXPECT_EQ(feed.error().code(), Errc::invalid_argument);
}

TEST_P(ConformanceTest, Watch_GrantQueueReleaseAndExpiryWakeTheFeed) {
  BATON_REQUIRE("watch");
  const std::string base = lock_name("w/");
  auto feed = client().watch(base);
  ASSERT_TRUE(feed.ok()) << feed.error().to_string();
  ASSERT_NE(*feed, nullptr);
  Client other = open_client();
  std::optional<Lease> held;
  expect_wake(
      **feed,
      [&] {
        auto l = other.try_acquire(base + "a", opts(30s));
        ASSERT_TRUE(l.ok()) << l.error().to_string();
        held = *l;
      },
      "a grant");
  ASSERT_TRUE(held.has_value());

  // A queued request (a waiter appears in list()).
  Client waiter = open_client();
  std::optional<std::jthread> queued;
  expect_wake(
      **feed,
      [&] {
        queued.emplace([&] {
          auto l = waiter.acquire(base + "a", 6s, opts(30s));
          if (l.ok()) (void)waiter.release(*l);
        });
        EXPECT_TRUE(
            eventually([&] { return waiters_of(other, base + "a") == 1; }));
      },
      "a queued request");

  expect_wake(
      **feed, [&] { ASSERT_TRUE(*other.release(*held)); },
      "a release (that grants the waiter)");
  queued.reset();

  // An expiry: a lease of 1 s left to run out.
  auto brief = other.try_acquire(base + "b", opts(1s));
  ASSERT_TRUE(brief.ok()) << brief.error().to_string();
  (void)(*feed)->wait_change(
      Clock::steady()->now() + 100ms,
      CallContext(Clock::steady()->now() + 5s, {}, Clock::steady()));
  expect_wake(
      **feed,
      [&] {
        EXPECT_TRUE(eventually(
            [&] {
              auto info = other.describe(base + "b");
              return info.ok() && info->holders.empty();
            },
            15s));
      },
      "an expiry");
}

TEST_P(ConformanceTest, Watch_AChangeBetweenTwoWaitsIsNotLost) {
  BATON_REQUIRE("watch");
  const std::string base = lock_name("w/");
  auto feed = client().watch(base);
  ASSERT_TRUE(feed.ok()) << feed.error().to_string();
  ASSERT_NE(*feed, nullptr);
  Client other = open_client();
  auto a = other.try_acquire(base + "a", opts(30s));
  ASSERT_TRUE(a.ok()) << a.error().to_string();
  const auto now = [] { return Clock::steady()->now(); };
  const CallContext ctx(now() + 60s, {}, Clock::steady());
  (void)(*feed)->wait_change(now() + 20s, ctx);
  // Nobody waits now: this change happens while no wait_change runs.
  auto b = other.try_acquire(base + "b", opts(30s));
  ASSERT_TRUE(b.ok()) << b.error().to_string();
  const auto start = steady_clock::now();
  (void)(*feed)->wait_change(now() + 20s, ctx);
  EXPECT_LT(steady_clock::now() - start, 15s)
      << "the grant made between two waits did not wake the second";
  (void)other.release(*a);
  (void)other.release(*b);
}

TEST_P(ConformanceTest, Watch_InterruptEndsAWait) {
  BATON_REQUIRE("watch");
  auto feed = client().watch(lock_name("quiet/"));
  ASSERT_TRUE(feed.ok()) << feed.error().to_string();
  ASSERT_NE(*feed, nullptr);
  std::thread t([&] {
    std::this_thread::sleep_for(300ms);
    (*feed)->interrupt();
  });
  const auto start = steady_clock::now();
  const auto now = Clock::steady()->now();
  // Wakes from the interrupt (or spuriously): never the 30 s limit.
  for (int i = 0; i < kMaxSpurious && steady_clock::now() - start < 30s; ++i) {
    (void)(*feed)->wait_change(now + 30s,
                               CallContext(now + 60s, {}, Clock::steady()));
    if (steady_clock::now() - start >= 300ms) break;
  }
  t.join();
  EXPECT_LT(steady_clock::now() - start, 10s);
}

// Referenced by conformance.cc so that the linker keeps this file.
int kLinkSuiteWatch = 0;

}  // namespace baton::conformance
