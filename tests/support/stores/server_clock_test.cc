// tests/support/stores/server_clock_test.cc — the servers' wall clocks
// stepped by the test (StoreOptions::server_clocks, libbaton_clockshift.so,
// tests/support/server_clock.h): the fault the torture harness draws as
// server_clock_step, shown here to do what it says on the Redis masters
// of a Redlock, a standalone ZooKeeper and a ZooKeeper ensemble. A lease's
// end, which each of them reckons on its own wall clock, moves with the
// step, and a lease still running by the true time is granted again once
// a step forward has carried the store past its end. One cluster per
// kind, started on first use.
#include "tests/support/server_clock.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <string>

#include "baton/client.h"
#include "tests/support/stores/store_cluster.h"
#include "tests/support/stores/suite_clusters.h"

namespace baton::testing {
namespace {

using namespace std::chrono_literals;

std::int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

class ServerClockStep : public ::testing::TestWithParam<std::string> {
 protected:
  static void TearDownTestSuite() { clusters_.clear(); }
  void SetUp() override {
    if (clockshift_library().empty()) {
      GTEST_SKIP() << "libbaton_clockshift.so was not built";
    }
    StoreOptions o;
    o.kind = GetParam();
    o.proxies = false;
    o.slots = 1;
    o.server_clocks = true;
    o.lease_ttl = 3s;
    std::string why;
    cluster_ = clusters_.get(o, "/tmp/baton-server-clock-XXXXXX", &why);
    ASSERT_NE(cluster_, nullptr) << why;
    auto c = Client::open(cluster_->direct_url(), ClientOptions{});
    ASSERT_TRUE(c.ok()) << c.error().to_string();
    client_ = std::make_unique<Client>(std::move(*c));
  }
  void TearDown() override {
    if (cluster_ != nullptr) step_all(0ms);
  }
  // Every server's clock: a Redlock grant needs a majority, and the
  // leader of an ensemble (whose clock stamps the nodes) may change.
  void step_all(std::chrono::milliseconds by) {
    for (int i = 0; i < cluster_->servers(); ++i) {
      std::string why;
      ASSERT_TRUE(cluster_->step_server_clock(i, by, &why)) << why;
    }
  }
  static inline SuiteClusters clusters_;
  StoreCluster* cluster_ = nullptr;
  std::unique_ptr<Client> client_;
};

// The expiry a grant reports is on the store's clock: 40 s later after a
// step of +40 s, and back after the step is undone.
TEST_P(ServerClockStep, AGrantsStoreExpiryFollowsTheServersClock) {
  AcquireOptions ao;
  ao.ttl = 3s;
  auto before = client_->acquire("clock/before", 20s, ao);
  ASSERT_TRUE(before.ok()) << before.error().to_string();
  EXPECT_NEAR(static_cast<double>(before->store_expires_at_ms),
              static_cast<double>(now_ms() + 3000), 1500.0);
  step_all(40s);
  auto during = client_->acquire("clock/during", 20s, ao);
  ASSERT_TRUE(during.ok()) << during.error().to_string();
  EXPECT_NEAR(static_cast<double>(during->store_expires_at_ms),
              static_cast<double>(now_ms() + 43000), 1500.0);
  step_all(0ms);
  auto after = client_->acquire("clock/after", 20s, ao);
  ASSERT_TRUE(after.ok()) << after.error().to_string();
  EXPECT_NEAR(static_cast<double>(after->store_expires_at_ms),
              static_cast<double>(now_ms() + 3000), 1500.0);
  for (auto* l : {&*before, &*during, &*after}) (void)client_->release(*l);
}

// The fault's point: a lease of 20 s, taken by the true clock, is granted
// to another owner 2 s later once the store's clock has jumped 30 s
// ahead: the store's exclusion rests on its clock. (Fencing still orders
// the two: the newer token is higher.)
TEST_P(ServerClockStep, AStepForwardPastALeasesEndGrantsItAgain) {
  AcquireOptions ao;
  ao.ttl = 20s;
  auto first = client_->acquire("clock/jump", 20s, ao);
  ASSERT_TRUE(first.ok()) << first.error().to_string();
  auto other = Client::open(cluster_->direct_url(), ClientOptions{});
  ASSERT_TRUE(other.ok()) << other.error().to_string();
  auto refused = other->try_acquire("clock/jump", ao);
  EXPECT_FALSE(refused.ok()) << "granted while held, before any step";
  step_all(30s);
  auto second = other->acquire("clock/jump", 5s, ao);
  ASSERT_TRUE(second.ok()) << second.error().to_string();
  EXPECT_GT(second->fencing_token, first->fencing_token);
  (void)other->release(*second);
}

INSTANTIATE_TEST_SUITE_P(Kinds, ServerClockStep,
                         ::testing::Values("redlock", "zookeeper",
                                           "zookeeper3"),
                         [](const auto& kind_info) { return kind_info.param; });

}  // namespace
}  // namespace baton::testing
