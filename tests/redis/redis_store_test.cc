// tests/redis/redis_store_test.cc — redis://-specific behaviour: seed 003's
// inventory, lost replies, dead waiters, key prefixes, URLs.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <thread>
#include <vector>

#include "baton/counter.h"
#include "redis_process.h"
#include "stores/redis/instance.h"

namespace baton::testing {
namespace {

using namespace std::chrono_literals;

RedisProcess* g_server = nullptr;
RedisProcess& server() {
  if (g_server == nullptr) {
    g_server = new RedisProcess();
    std::atexit([] { delete g_server; });
  }
  return *g_server;
}

std::string unique(const std::string& base) {
  return "redis-test/" + base + "/" + OwnerToken::random().to_string();
}

AcquireOptions opts(std::chrono::milliseconds ttl, std::string label = {}) {
  AcquireOptions o;
  o.ttl = ttl;
  o.label = std::move(label);
  return o;
}

// Seed 003: a Redis inventory of 10 prizes handed out 14 times. The guarded
// take is one script: 50 concurrent takers, exactly 10 winners.
TEST(RedisStore, Seed003TenPrizesFiftyTakersExactlyTenWin) {
  auto c = open_client(server().url());
  ASSERT_TRUE(c.ok()) << c.error().to_string();
  Counter prizes = c->counter(unique("prizes"));
  ASSERT_EQ(*prizes.add(10), 10);
  std::atomic<int> won{0}, refused{0}, other{0};
  std::vector<std::thread> takers;
  for (int i = 0; i < 50; ++i) {
    takers.emplace_back([&] {
      // Each taker has its own client (its own connections).
      auto mine = open_client(server().url());
      if (!mine.ok()) {
        other.fetch_add(1);
        return;
      }
      auto r = mine->counter(prizes.name()).take(1);
      if (r.ok()) {
        won.fetch_add(1);
      } else if (r.error().code() == Errc::not_acquired) {
        refused.fetch_add(1);
      } else {
        other.fetch_add(1);
      }
    });
  }
  for (auto& t : takers) t.join();
  EXPECT_EQ(won.load(), 10);
  EXPECT_EQ(refused.load(), 40);
  EXPECT_EQ(other.load(), 0);
  EXPECT_EQ(*prizes.get(), 0);
}

// Rule 17: the acquire script ran but its reply was lost; the retry with the
// same owner token returns the same lease: one lease, never two.
TEST(RedisStore, LostReplyIsResolvedByTheOwnerToken) {
  auto s = open_store(server().url());
  ASSERT_TRUE(s.ok());
  store::AcquireSpec spec;
  spec.name = unique("lost-reply");
  spec.token = OwnerToken::random();
  spec.ttl = 10s;
  spec.label = "first";
  auto first = (*s)->acquire(spec, 0ms);  // "the reply was lost"
  ASSERT_TRUE(first.ok()) << first.error().to_string();
  auto retry = (*s)->acquire(spec, 5s);
  ASSERT_TRUE(retry.ok()) << retry.error().to_string();
  EXPECT_EQ(retry->fencing_token, first->fencing_token);
  EXPECT_EQ(retry->token, spec.token);
  auto info = (*s)->describe(spec.name);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->holders.size(), 1u);
  EXPECT_TRUE((*s)->release(spec.name, spec.token)->was_held);
  EXPECT_FALSE((*s)->release(spec.name, spec.token)->was_held);
}

// Rule 9: a waiter whose client died (stops refreshing) leaves the queue
// within the heartbeat timeout (2 s), and the lock goes to the next waiter.
TEST(RedisStore, DeadWaiterIsPrunedByItsHeartbeat) {
  auto c = open_client(server().url());
  ASSERT_TRUE(c.ok());
  const std::string name = unique("dead-waiter");
  auto held = c->try_acquire(name, opts(30s, "holder"));
  ASSERT_TRUE(held.ok());
  // A "client" that queues and then dies: one script call, never refreshed.
  store::redis::Notifier notifier;
  store::redis::Target t;
  t.port = server().port();
  store::redis::Instance dead(t, "baton:", notifier);
  store::AcquireSpec spec;
  spec.name = name;
  spec.token = OwnerToken::random();
  spec.ttl = 10s;
  spec.label = "dead";
  auto q = dead.acquire(spec, store::redis::kWait, 600'000);
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q->kind, store::redis::AcqReply::Kind::queued);
  EXPECT_EQ(c->describe(name)->waiters.size(), 1u);
  const auto start = std::chrono::steady_clock::now();
  while (c->describe(name)->waiters.size() == 1u &&
         std::chrono::steady_clock::now() - start < 10s) {
    std::this_thread::sleep_for(50ms);
  }
  const auto gone_after = std::chrono::steady_clock::now() - start;
  EXPECT_LT(gone_after, 5s);
  EXPECT_GE(gone_after, 1s);
  EXPECT_TRUE(c->describe(name)->waiters.empty());
  EXPECT_TRUE(*c->release(*held));
  EXPECT_TRUE(c->describe(name)->holders.empty());
}

TEST(RedisStore, PrefixesScopeTheKeys) {
  auto a = open_client(server().url() + "?prefix=team-a:");
  auto b = open_client(server().url() + "?prefix=team-b:");
  ASSERT_TRUE(a.ok() && b.ok());
  const std::string name = unique("scoped");
  auto la = a->try_acquire(name, opts(10s));
  auto lb = b->try_acquire(name, opts(10s));
  ASSERT_TRUE(la.ok() && lb.ok());
  EXPECT_TRUE(*a->release(*la));
  EXPECT_TRUE(*b->release(*lb));
}

TEST(RedisStore, UrlsAreCheckedAndUnreachableIsUnavailable) {
  auto bad = open_store(server().url() + "?nosuch=1");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code(), Errc::invalid_argument);
  auto two = open_store("redis://127.0.0.1:1,127.0.0.1:2");
  ASSERT_FALSE(two.ok());
  EXPECT_EQ(two.error().code(), Errc::invalid_argument);
  auto down = open_store("redis://127.0.0.1:" + std::to_string(free_port()));
  ASSERT_FALSE(down.ok());
  EXPECT_EQ(down.error().code(), Errc::unavailable);
  EXPECT_NE(down.error().message().find("127.0.0.1"), std::string::npos);
}

}  // namespace
}  // namespace baton::testing
