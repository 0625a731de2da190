// tests/zookeeper/zookeeper_shared_test.cc — shared mode (rule 18) on
// zookeeper://, beyond what the conformance suite checks, on the binary's
// one private server: a shared request's node is of kind `r`, a waiting
// reader watches only the nearest exclusive request ahead of it and a
// waiting writer only the request just ahead (no herd); multi-lock calls
// (exclusive) wait for shared holders and keep the queue's order.
#include <gtest/gtest.h>

#include <future>
#include <regex>

#include "zk_test_util.h"

namespace baton::testing {
namespace {

// Queue W(holding) r1 r2 w2 r3, each waiter its own session. The nodes'
// kinds are b r r b r. While they wait, r1 and r2 watch W (the nearest
// exclusive request ahead), w2 watches r2 (just ahead) and r3 watches w2;
// each also watches its own node (a release by its token withdraws it) and
// nothing else. W's release grants r1 and r2 together; w2 waits for both.
TEST(ZkShared, ReadersWatchTheNearestWriterAndWritersTheNodeAhead) {
  ZkObserver zk(shared_server().hostport());
  ASSERT_TRUE(zk.ok());
  const std::string name = unique("rw-watch");
  const std::string dir = lock_dir(name);
  auto holder = open_zk_client(shared_server().url());
  ASSERT_TRUE(holder.ok()) << holder.error().to_string();
  auto w1 = holder->try_acquire(name, opts(60s, "W"));
  ASSERT_TRUE(w1.ok()) << w1.error().to_string();

  const char* order[] = {"r1", "r2", "w2", "r3"};
  std::vector<Client> clients;
  for (int i = 0; i < 4; ++i) {
    auto c = open_zk_client(shared_server().url());
    ASSERT_TRUE(c.ok()) << c.error().to_string();
    clients.push_back(std::move(*c));
  }
  // TTL 60 s: no waiter rewrites its node (st=w, after TTL/3) meanwhile.
  std::vector<std::future<Result<Lease>>> f;
  Finally cleanup([&] {
    (void)holder->release(*w1);
    for (std::size_t i = 0; i < f.size(); ++i) {
      auto l = f[i].get();
      if (l.ok()) (void)clients[i].release(*l);
    }
  });
  for (int i = 0; i < 4; ++i) {
    const std::string label = order[i];
    f.push_back(std::async(std::launch::async, [&, i, label] {
      return label[0] == 'r'
                 ? clients[i].acquire_shared(name, 30s, opts(60s, label))
                 : clients[i].acquire(name, 30s, opts(60s, label));
    }));
    ASSERT_TRUE(eventually([&] {
      return zk.count_children(dir) == static_cast<long>(i) + 2;
    })) << label
        << " never queued";
  }
  std::vector<std::string> kids;
  ASSERT_EQ(zk.children(dir, &kids), ZOK);
  ASSERT_EQ(kids.size(), 5u);
  const std::regex re("q-[0-9a-f]{32}-1-([bsar])-[0-9]{10}");
  std::string kinds;
  std::vector<std::string> session(5);
  for (std::size_t i = 0; i < kids.size(); ++i) {
    std::smatch m;
    ASSERT_TRUE(std::regex_match(kids[i], m, re)) << kids[i];
    kinds += m[1].str();
    Stat st{};
    ASSERT_EQ(zk.exists(dir + "/" + kids[i], &st), ZOK);
    session[i] = session_hex(st.ephemeralOwner);
  }
  EXPECT_EQ(kinds, "brrbr");
  // The paths each waiter (nodes 1..4) must watch, and nothing else.
  auto path = [&](int i) { return dir + "/" + kids[i]; };
  const std::map<std::string, std::set<std::string>> expected = {
      {session[1], {path(1), path(0)}},
      {session[2], {path(2), path(0)}},
      {session[3], {path(3), path(2)}},
      {session[4], {path(4), path(3)}},
  };
  std::map<std::string, std::set<std::string>> seen;
  std::string wchp;
  EXPECT_TRUE(eventually(
      [&] {
        wchp = shared_server().four_letter("wchp");
        seen.clear();
        for (const auto& [p, sessions] : watchers_by_path(wchp)) {
          for (const auto& s : sessions) {
            if (expected.count(s) != 0) seen[s].insert(p);
          }
        }
        return seen == expected;
      },
      10s, 50ms))
      << "watches are not the recipe's:\n"
      << wchp;

  ASSERT_TRUE(*holder->release(*w1));
  auto r1 = f[0].get();
  auto r2 = f[1].get();
  ASSERT_TRUE(r1.ok()) << r1.error().to_string();
  ASSERT_TRUE(r2.ok()) << r2.error().to_string();
  EXPECT_TRUE(r1->shared && r2->shared);
  EXPECT_GT(r1->fencing_token, w1->fencing_token);
  EXPECT_GT(r2->fencing_token, w1->fencing_token);
  EXPECT_EQ(f[2].wait_for(200ms), std::future_status::timeout)
      << "the writer was granted beside two readers";
  EXPECT_TRUE(*clients[0].release(*r1));
  EXPECT_TRUE(*clients[1].release(*r2));
  auto w2 = f[2].get();
  ASSERT_TRUE(w2.ok()) << w2.error().to_string();
  EXPECT_FALSE(w2->shared);
  EXPECT_GT(w2->fencing_token, std::max(r1->fencing_token, r2->fencing_token));
  EXPECT_TRUE(*clients[2].release(*w2));
  auto r3 = f[3].get();
  ASSERT_TRUE(r3.ok()) << r3.error().to_string();
  EXPECT_GT(r3->fencing_token, w2->fencing_token);
  EXPECT_TRUE(*clients[3].release(*r3));
  f.clear();
  EXPECT_EQ(zk.count_children(dir), 0);
}

// acquire_all and acquire_some are exclusive: they wait for shared
// holders, and a reader that comes after a waiting all-or-nothing request
// queues behind it (FIFO across kinds, rule 18).
TEST(ZkShared, MultiLockCallsWaitForSharedHolders) {
  auto a = open_zk_client(shared_server().url());
  auto b = open_zk_client(shared_server().url());
  ASSERT_TRUE(a.ok() && b.ok());
  const std::string x = unique("multi-x");
  const std::string y = unique("multi-y");
  auto s1 = a->acquire_shared(x, 0ms, opts(30s, "s1"));
  auto s2 = a->acquire_shared(x, 0ms, opts(30s, "s2"));
  ASSERT_TRUE(s1.ok() && s2.ok());

  auto tried = b->acquire_all({x, y}, 0ms, opts(30s, "all"));
  ASSERT_FALSE(tried.ok()) << "acquire_all was granted beside readers";
  EXPECT_EQ(tried.error().code(), Errc::not_acquired);
  const OwnerToken reservation = OwnerToken::random();
  auto some = b->acquire_some({x}, reservation, 0ms, opts(30s, "some"));
  ASSERT_TRUE(some.ok()) << some.error().to_string();
  EXPECT_TRUE(some->empty()) << "acquire_some was granted beside readers";
  // Its request stays queued (rule 11) until withdrawn by its token.
  Lease queued;
  queued.name = x;
  queued.token = reservation;
  auto withdrawn = b->release(queued);
  ASSERT_TRUE(withdrawn.ok()) << withdrawn.error().to_string();
  EXPECT_FALSE(*withdrawn);
  auto after = a->describe(x);
  ASSERT_TRUE(after.ok()) << after.error().to_string();
  EXPECT_TRUE(after->waiters.empty()) << "the acquire_some request stayed";

  auto all = std::async(std::launch::async, [&] {
    return b->acquire_all({x, y}, 20s, opts(30s));
  });
  ASSERT_TRUE(eventually([&] {
    auto info = a->describe(x);
    return info.ok() && info->waiters.size() == 1 &&
           info->waiters[0].all_or_nothing && !info->waiters[0].shared;
  }));
  auto late = a->acquire_shared(x, 0ms, opts(30s, "late"));
  ASSERT_FALSE(late.ok()) << "a reader overtook a waiting acquire_all";
  EXPECT_EQ(late.error().code(), Errc::not_acquired);
  EXPECT_NE(late.error().message().find("exclusive request waiting ahead"),
            std::string::npos)
      << late.error().to_string();
  EXPECT_EQ(late.error().holders().size(), 2u);
  EXPECT_TRUE(*a->release(*s1));
  EXPECT_EQ(all.wait_for(200ms), std::future_status::timeout)
      << "acquire_all was granted beside a reader";
  EXPECT_TRUE(*a->release(*s2));
  auto got = all.get();
  ASSERT_TRUE(got.ok()) << got.error().to_string();
  ASSERT_EQ(got->size(), 2u);
  EXPECT_FALSE((*got)[0].shared);
  EXPECT_GT((*got)[0].fencing_token,
            std::max(s1->fencing_token, s2->fencing_token));
  for (const auto& l : *got) EXPECT_TRUE(*b->release(l));
}

}  // namespace
}  // namespace baton::testing
