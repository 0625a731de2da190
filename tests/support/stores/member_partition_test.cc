// tests/support/stores/member_partition_test.cc — partitions between the
// members of a 3-member etcd cluster and of a 3-member ZooKeeper ensemble,
// each member in a network namespace of its own (netns.h), clients
// reaching every member: the faults the torture harness draws
// (partition_leader, partition_bridge, partition_flap), shown here to do
// what they say. Needs root and nftables; skipped, saying why, without
// them. One cluster per kind, started on first use.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>

#include "baton/client.h"
#include "tests/support/stores/store_cluster.h"
#include "tests/support/stores/suite_clusters.h"

namespace baton::testing {
namespace {

using namespace std::chrono_literals;

class MemberPartition : public ::testing::TestWithParam<std::string> {
 protected:
  static void TearDownTestSuite() { clusters_.clear(); }
  void SetUp() override {
    if (::geteuid() != 0 || ::access("/usr/sbin/nft", X_OK) != 0) {
      GTEST_SKIP() << "needs root and /usr/sbin/nft (Debian nftables)";
    }
    StoreOptions o;
    o.kind = GetParam();
    o.proxies = false;
    o.slots = 1;
    o.member_namespaces = true;
    o.lease_ttl = 2s;
    std::string why;
    cluster_ = clusters_.get(o, "/tmp/baton-member-partition-XXXXXX", &why);
    ASSERT_NE(cluster_, nullptr) << why;
  }
  // A member other than `other_than` that calls itself leader within
  // `limit`, or -1.
  int leader_within(std::chrono::milliseconds limit, int other_than) const {
    const auto until = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < until) {
      const int l = cluster_->leader();
      if (l >= 0 && l != other_than) return l;
      std::this_thread::sleep_for(50ms);
    }
    return -1;
  }

  static inline SuiteClusters clusters_;
  StoreCluster* cluster_ = nullptr;
};

// The leader cut from both followers while clients reach all three: the
// followers elect another leader (etcd within half a second; ZooKeeper
// once its followers miss the leader for syncLimit, 2.5 s), and a client
// whose URL lists every member still takes and releases a lock; healed,
// there is one leader again.
TEST_P(MemberPartition, LeaderCutFromTheFollowersIsReplacedAndClientsGoOn) {
  const int old = leader_within(10s, -1);
  ASSERT_GE(old, 0) << "no leader";
  for (int j = 0; j < 3; ++j) {
    if (j != old) {
      ASSERT_TRUE(cluster_->cut_members(old, j, true, nullptr));
    }
  }
  EXPECT_FALSE(cluster_->member_cuts().empty());
  const int fresh = leader_within(15s, old);
  EXPECT_GE(fresh, 0) << "the followers elected no other leader";
  EXPECT_NE(fresh, old);
  ClientOptions co;
  auto c = Client::open(cluster_->direct_url(), co);
  ASSERT_TRUE(c.ok()) << c.error().to_string();
  AcquireOptions ao;
  ao.ttl = 2s;
  auto l = c->acquire("partition/one", 20s, ao);
  EXPECT_TRUE(l.ok()) << l.error().to_string();
  if (l.ok()) {
    EXPECT_TRUE(*c->release(*l));
  }
  for (int j = 0; j < 3; ++j) {
    if (j != old) {
      ASSERT_TRUE(cluster_->cut_members(old, j, false, nullptr));
    }
  }
  EXPECT_EQ(cluster_->member_cuts(), "");
  EXPECT_GE(leader_within(15s, -1), 0) << "no leader after the heal";
}

// One link cut (a bridge: the third member reaches both): the cluster
// keeps a leader and serves.
TEST_P(MemberPartition, OneLinkCutKeepsALeaderAndServes) {
  ASSERT_TRUE(cluster_->cut_members(0, 1, true, nullptr));
  EXPECT_EQ(cluster_->member_cuts(), "0-1");
  std::this_thread::sleep_for(1s);
  EXPECT_GE(leader_within(10s, -1), 0);
  auto c = Client::open(cluster_->direct_url(), ClientOptions{});
  ASSERT_TRUE(c.ok()) << c.error().to_string();
  AcquireOptions ao;
  ao.ttl = 2s;
  auto l = c->acquire("partition/bridge", 20s, ao);
  EXPECT_TRUE(l.ok()) << l.error().to_string();
  if (l.ok()) {
    EXPECT_TRUE(*c->release(*l));
  }
  ASSERT_TRUE(cluster_->cut_members(0, 1, false, nullptr));
}

// Bad input is refused and changes nothing.
TEST_P(MemberPartition, ACutOfAMemberWithItselfIsRefused) {
  std::string why;
  EXPECT_FALSE(cluster_->cut_members(1, 1, true, &why));
  EXPECT_NE(why.find("no link"), std::string::npos) << why;
  EXPECT_EQ(cluster_->member_cuts(), "");
}

INSTANTIATE_TEST_SUITE_P(Kinds, MemberPartition,
                         ::testing::Values("etcd", "zookeeper3"),
                         [](const auto& kind_info) { return kind_info.param; });

}  // namespace
}  // namespace baton::testing
