// conformance/suite_cancel.cc — cancellable waits
// (AcquireOptions::stop): a stop request ends a blocking acquire, the
// request leaves no trace in the queue, and nobody is granted behind the
// caller's back.
#include <atomic>
#include <future>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "baton/conformance.h"
#include "baton/elector.h"
#include "conformance/suite_helpers.h"

namespace baton::conformance {
namespace {

// How long a stop may take to end a wait: a few store round trips (the
// withdrawal repeats every 50 ms); far below the 30 s wait.
constexpr auto kStopBound = 5s;

TEST_P(ConformanceTest, Cancel_StopEndsAWaitAndLeavesNoTrace) {
  BATON_REQUIRE("cancel");
  const std::string name = lock_name("cancel");
  auto held = client().try_acquire(name, opts(30s, 1, "holder"));
  ASSERT_TRUE(held.ok()) << held.error().to_string();
  std::stop_source stop;
  AcquireOptions o = opts(10s, 1, "cancelled-waiter");
  o.stop = stop.get_token();
  auto waiting = std::async(std::launch::async,
                            [&] { return client().acquire(name, 30s, o); });
  ASSERT_TRUE(eventually([&] { return waiters_of(client(), name) == 1; }))
      << "the waiter never showed up in describe()";
  const auto t0 = steady_clock::now();
  stop.request_stop();
  ASSERT_EQ(waiting.wait_for(kStopBound), std::future_status::ready)
      << "the wait did not end within " << kStopBound.count() << " s of stop";
  const auto took = steady_clock::now() - t0;
  auto r = waiting.get();
  ASSERT_FALSE(r.ok()) << "granted while the lock was held";
  EXPECT_EQ(r.error().code(), Errc::cancelled) << r.error().to_string();
  EXPECT_LT(took, kStopBound);
  // No trace: the holder alone, nobody queued.
  auto info = client().describe(name);
  ASSERT_TRUE(info.ok()) << info.error().to_string();
  EXPECT_TRUE(info->waiters.empty());
  ASSERT_EQ(info->holders.size(), 1u);
  EXPECT_EQ(info->holders[0].fencing_token, held->fencing_token);
  // Released, the lock is free: the cancelled request was not granted.
  ASSERT_TRUE(client().release(*held).ok());
  auto next = client().try_acquire(name, opts(5s));
  EXPECT_TRUE(next.ok()) << (next.ok() ? "" : next.error().to_string());
  if (next.ok()) {
    EXPECT_TRUE(*client().release(*next));
  }
}

TEST_P(ConformanceTest, Cancel_StopBeforeTheCallSendsNothing) {
  BATON_REQUIRE("cancel");
  const std::string name = lock_name("cancel-early");
  std::stop_source stop;
  stop.request_stop();
  AcquireOptions o = opts(10s);
  o.stop = stop.get_token();
  auto r = client().acquire(name, 30s, o);  // the lock is free
  ASSERT_FALSE(r.ok()) << "a stopped call was granted";
  EXPECT_EQ(r.error().code(), Errc::cancelled) << r.error().to_string();
  auto info = client().describe(name);
  ASSERT_TRUE(info.ok()) << info.error().to_string();
  EXPECT_TRUE(info->holders.empty());
  EXPECT_TRUE(info->waiters.empty());
}

TEST_P(ConformanceTest, Cancel_StopEndsAnAcquireAllAndWithdrawsEveryName) {
  BATON_REQUIRE("cancel");
  BATON_REQUIRE("rule11");
  const std::string a = lock_name("cancel-all-a");
  const std::string b = lock_name("cancel-all-b");
  auto held = client().try_acquire(b, opts(30s, 1, "holder"));
  ASSERT_TRUE(held.ok()) << held.error().to_string();
  std::stop_source stop;
  AcquireOptions o = opts(10s, 1, "cancelled-group");
  o.stop = stop.get_token();
  auto waiting = std::async(std::launch::async, [&] {
    return client().acquire_all({a, b}, 30s, o);
  });
  ASSERT_TRUE(eventually([&] { return waiters_of(client(), b) == 1; }))
      << "the group never queued on the held lock";
  stop.request_stop();
  ASSERT_EQ(waiting.wait_for(kStopBound), std::future_status::ready);
  auto r = waiting.get();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), Errc::cancelled) << r.error().to_string();
  for (const auto& n : {a, b}) {
    auto info = client().describe(n);
    ASSERT_TRUE(info.ok()) << info.error().to_string();
    EXPECT_TRUE(info->waiters.empty()) << n;
    EXPECT_EQ(info->holders.size(), n == b ? 1u : 0u) << n;
  }
  ASSERT_TRUE(client().release(*held).ok());
}

TEST_P(ConformanceTest, Cancel_StopEndsACampaign) {
  BATON_REQUIRE("cancel");
  BATON_REQUIRE("election");
  const std::string group = lock_name("cancel-elect");
  ElectorOptions eo;
  eo.ttl = 20s;
  Elector leader(client(), group, eo);
  ASSERT_TRUE(leader.campaign(5s).ok());
  Elector candidate(open_client(), group, eo);
  std::stop_source stop;
  auto waiting = std::async(std::launch::async, [&] {
    return candidate.campaign(30s, stop.get_token());
  });
  ASSERT_TRUE(eventually([&] { return waiters_of(client(), group) == 1; }));
  stop.request_stop();
  ASSERT_EQ(waiting.wait_for(kStopBound), std::future_status::ready);
  Status st = waiting.get();
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code(), Errc::cancelled) << st.error().to_string();
  EXPECT_EQ(waiters_of(client(), group), 0);
  EXPECT_TRUE(leader.is_leader());
  EXPECT_TRUE(leader.resign().ok());
}

}  // namespace

// Referenced by conformance.cc (see there).
int kLinkSuiteCancel = 0;

}  // namespace baton::conformance
