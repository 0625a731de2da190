// conformance/suite_ended.cc — EndedLeaseTest (see conformance.h):
// what a store says about a lease that ended. docs/design.md, "A late
// duplicate of an ended lease is refused" and docs/protocol.md
// (last_fencing).
#include <thread>

#include "baton/conformance.h"
#include "conformance/suite_helpers.h"

namespace baton::conformance {

// Stores that do not keep these rules yet link this suite without
// instantiating it.
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(EndedLeaseTest);

namespace {

// A fenced resource configured with describe()'s last_fencing refuses every
// earlier holder and accepts every later one, also when the lock is free.
TEST_P(EndedLeaseTest, LastFencingOfAFreeLockCoversEveryEarlierGrant) {
  const std::string name = lock_name("fence-free");
  auto first = client().try_acquire(name, opts(10s));
  ASSERT_TRUE(first.ok()) << first.error().to_string();
  auto held = client().describe(name);
  ASSERT_TRUE(held.ok());
  EXPECT_EQ(held->last_fencing_token, first->fencing_token);
  ASSERT_TRUE(*client().release(*first));
  auto free = client().describe(name);
  ASSERT_TRUE(free.ok());
  EXPECT_TRUE(free->holders.empty());
  EXPECT_GE(free->last_fencing_token, first->fencing_token)
      << "a free lock hides the tokens it granted";
  auto second = client().try_acquire(name, opts(10s));
  ASSERT_TRUE(second.ok()) << second.error().to_string();
  EXPECT_GT(second->fencing_token, free->last_fencing_token);
  EXPECT_TRUE(*client().release(*second));
  auto unused = client().describe(lock_name("never-used"));
  ASSERT_TRUE(unused.ok());
  EXPECT_GE(unused->last_fencing_token, second->fencing_token);
}

// A late duplicate of an acquire (same owner token) after its lease ended
// is refused with lock_lost instead of creating a new lease for a TTL.
TEST_P(EndedLeaseTest, ALateDuplicateOfAReleasedLeaseIsRefused) {
  const std::string name = lock_name("late-duplicate");
  AcquireOptions o = opts(30s);
  o.token = OwnerToken::random();
  auto lease = client().try_acquire(name, o);
  ASSERT_TRUE(lease.ok()) << lease.error().to_string();
  ASSERT_TRUE(*client().release(*lease));
  for (auto wait : {0ms, 500ms}) {
    auto dup = open_client().acquire(name, wait, o);
    ASSERT_FALSE(dup.ok()) << "a released lease came back";
    EXPECT_EQ(dup.error().code(), Errc::lock_lost) << dup.error().to_string();
    EXPECT_NE(dup.error().message().find("lease already ended"),
              std::string::npos)
        << dup.error().message();
  }
  auto info = client().describe(name);
  ASSERT_TRUE(info.ok());
  EXPECT_TRUE(info->holders.empty());
  EXPECT_TRUE(info->waiters.empty());
  auto fresh = client().try_acquire(name, opts(30s));  // a new request
  ASSERT_TRUE(fresh.ok()) << fresh.error().to_string();
  EXPECT_TRUE(*client().release(*fresh));
}

TEST_P(EndedLeaseTest, ALateDuplicateOfAnExpiredLeaseIsRefused) {
  const std::string name = lock_name("late-after-expiry");
  AcquireOptions o = opts(100ms);
  o.token = OwnerToken::random();
  auto lease = client().try_acquire(name, o);
  ASSERT_TRUE(lease.ok()) << lease.error().to_string();
  ASSERT_TRUE(eventually([&] {
    auto info = client().describe(name);
    return info.ok() && info->holders.empty();
  }));
  auto dup = client().try_acquire(name, o);
  ASSERT_FALSE(dup.ok()) << "an expired lease came back";
  EXPECT_EQ(dup.error().code(), Errc::lock_lost) << dup.error().to_string();
}

TEST_P(EndedLeaseTest, AReservationsEndedLeaseIsNotGrantedAgain) {
  const std::string a = lock_name("a"), b = lock_name("b");
  const OwnerToken reservation = OwnerToken::random();
  auto got = client().acquire_some({a, b}, reservation, 0ms, opts(30s));
  ASSERT_TRUE(got.ok()) << got.error().to_string();
  ASSERT_EQ(got->size(), 2u);
  for (const Lease& l : *got) ASSERT_TRUE(*client().release(l));
  auto again = client().acquire_some({a, b}, reservation, 0ms, opts(30s));
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.error().code(), Errc::lock_lost);
  auto info = client().describe(a);
  ASSERT_TRUE(info.ok());
  EXPECT_TRUE(info->holders.empty());
}

}  // namespace

// Referenced by conformance.cc (see there).
int kLinkSuiteEnded = 0;

}  // namespace baton::conformance
