// tests/zookeeper/zookeeper_store_test.cc — zookeeper://-specific behaviour
// on the binary's one private server: the node layout other tools may read,
// URLs, expiry by ZooKeeper's clock (also with client clocks hours off),
// and 50 waiters granted in order without a herd of watches.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <atomic>
#include <cstdio>
#include <regex>

#include "baton/counter.h"
#include "zk_test_util.h"

namespace baton::testing {
namespace {

using Clock = std::chrono::steady_clock;

// The layout of src/stores/zookeeper/zookeeper_store.h: one ephemeral
// sequential child per request, q-<token>-<capacity>-<kind>-<seq>, whose
// data says holding (st=h) or waiting (st=w), the TTL, the holds and the
// label last; the fencing token is the zxid of the write that started the
// lease, which expires at the node's mtime + TTL.
TEST(ZkStore, NodesFollowTheDocumentedLayout) {
  ZkObserver zk(shared_server().hostport());
  ASSERT_TRUE(zk.ok());
  auto c = open_zk_client(shared_server().url());
  auto w = open_zk_client(shared_server().url());
  ASSERT_TRUE(c.ok() && w.ok());
  const std::string name = unique("lay/out") + ".v1";  // '/', '.' escaped
  const std::string dir = lock_dir(name);
  ASSERT_NE(dir.find("%2Flay%2Fout%2F"), std::string::npos);
  // TTL 6 s: a waiter rewrites its node to st=w after TTL/3 (2 s) of
  // waiting; the holders stay well inside their leases meanwhile.
  AcquireOptions o = opts(6s, "layout holder");
  o.capacity = 2;
  auto first = c->try_acquire(name, o);
  auto second = c->try_acquire(name, o);
  ASSERT_TRUE(first.ok() && second.ok());
  Result<Lease> third = Error(Errc::internal, "not run");
  std::thread waiter([&] {
    AcquireOptions wo = o;
    wo.label = "layout waiter";
    third = w->acquire(name, 30s, wo);
  });
  Finally join_waiter([&] {
    (void)c->release(*first);
    if (waiter.joinable()) waiter.join();
  });
  std::vector<std::string> kids;
  ASSERT_TRUE(eventually([&] {
    return zk.children(dir, &kids) == ZOK && kids.size() == 3;
  })) << dir
      << " has " << kids.size() << " children";
  // A request is made as st=h (it may hold at once); a waiter rewrites it
  // to st=w after TTL/3 of waiting.
  ASSERT_TRUE(eventually([&] {
    std::string data;
    Stat st{};
    return zk.get(dir + "/" + kids[2], &data, &st) == ZOK &&
           field(parse_node_data(data), "st") == "w";
  }));
  const std::regex re("q-([0-9a-f]{32})-([0-9]+)-([bsa])-([0-9]{10})");
  const Lease* leases[] = {&*first, &*second};
  for (std::size_t i = 0; i < kids.size(); ++i) {
    SCOPED_TRACE(kids[i]);
    std::smatch m;
    ASSERT_TRUE(std::regex_match(kids[i], m, re));
    EXPECT_EQ(m[2].str(), "2");
    EXPECT_EQ(m[3].str(), "b");
    std::string data;
    Stat st{};
    ASSERT_EQ(zk.get(dir + "/" + kids[i], &data, &st), ZOK);
    EXPECT_NE(st.ephemeralOwner, 0);
    const NodeData d = parse_node_data(data);
    ASSERT_FALSE(d.empty());
    EXPECT_EQ(field(d, "ttl"), "6000");
    EXPECT_EQ(field(d, "rk"), "<absent>");
    EXPECT_EQ(d.back().first, "label");  // last: it may hold anything
    if (i == 2) {                        // the waiter
      EXPECT_EQ(field(d, "st"), "w");
      EXPECT_EQ(d.back().second, "layout waiter");
      continue;
    }
    const Lease& l = *leases[i];
    EXPECT_EQ(m[1].str(), l.token.to_string());
    EXPECT_EQ(field(d, "st"), "h");
    EXPECT_EQ(field(d, "holds"), "1");
    EXPECT_EQ(d.back().second, "layout holder");
    if (field(d, "f") != "<absent>") {
      EXPECT_EQ(field(d, "f"), std::to_string(l.fencing_token));
    }
    EXPECT_GE(l.fencing_token, static_cast<std::uint64_t>(st.czxid));
    EXPECT_LE(l.fencing_token, static_cast<std::uint64_t>(st.mzxid));
    EXPECT_GE(l.store_expires_at_ms, st.ctime + 6000);
    EXPECT_LE(l.store_expires_at_ms, st.mtime + 6000);
  }
  // A waiter's lease starts with a write after its create.
  ASSERT_TRUE(*c->release(*first));
  waiter.join();
  ASSERT_TRUE(third.ok()) << third.error().to_string();
  ASSERT_EQ(zk.children(dir, &kids), ZOK);
  ASSERT_EQ(kids.size(), 2u);
  std::string data;
  Stat st{};
  ASSERT_EQ(zk.get(dir + "/" + kids[1], &data, &st), ZOK);
  EXPECT_NE(kids[1].find(third->token.to_string()), std::string::npos);
  EXPECT_EQ(field(parse_node_data(data), "st"), "h");
  EXPECT_GT(third->fencing_token, static_cast<std::uint64_t>(st.czxid));
  EXPECT_LE(third->fencing_token, static_cast<std::uint64_t>(st.mzxid));
  EXPECT_TRUE(*c->release(*second));
  EXPECT_TRUE(*w->release(*third));
  EXPECT_EQ(zk.count_children(dir), 0);

  // Counters: decimal int64 data; the clock node the store writes.
  const std::string counter = unique("stock.count");
  Counter k = c->counter(counter);
  ASSERT_EQ(k.add(7).value_or(-1), 7);
  ASSERT_EQ(k.take(2).value_or(-1), 5);
  ASSERT_EQ(zk.get(std::string(kTestRoot) + "/counters/" + esc(counter), &data,
                   nullptr),
            ZOK);
  EXPECT_EQ(data, "5");
  EXPECT_EQ(zk.exists(std::string(kTestRoot) + "/clock"), ZOK);
}

// An acquire is one transaction: its request's create and a write of the
// lock's node, whose stat counts the lock's requests. Alone, the create
// started the lease (token czxid, expiry ctime + TTL) and the queue is not
// listed, so an uncontended pair is two requests, the raw recipe's create
// and delete. (Before 2026-11-28 it was three: a getChildren2 after the
// create.) Not alone, it lists the queue as before. A new lock's node is
// made in the transaction of its first request.
TEST(ZkStore, AnUncontendedAcquireIsOneTransactionWithoutAListing) {
  ZkObserver zk(shared_server().hostport());
  ASSERT_TRUE(zk.ok());
  auto c = open_zk_client(shared_server().url());
  auto d = open_zk_client(shared_server().url());
  ASSERT_TRUE(c.ok() && d.ok());
  auto received = [] {
    return four_letter_number(shared_server().four_letter("mntr"),
                              "zk_packets_received");
  };
  const std::string name = unique("alone");
  const std::string dir = lock_dir(name);
  ASSERT_NE(zk.exists(dir), ZOK);
  // A new lock: the create that finds the lock's node missing is sent
  // again with the lock node's create in the same transaction (so no
  // caller that came later can queue ahead meanwhile): two requests.
  const long fresh_before = received();
  auto l = c->try_acquire(name, opts(10s, "alone"));
  ASSERT_TRUE(l.ok()) << l.error().to_string();
  EXPECT_LE(received() - fresh_before, 3) << "requests for a new lock";
  std::vector<std::string> kids;
  ASSERT_EQ(zk.children(dir, &kids), ZOK);
  ASSERT_EQ(kids.size(), 1u);
  std::string data;
  Stat st{};
  Stat lock{};
  ASSERT_EQ(zk.get(dir + "/" + kids[0], &data, &st), ZOK);
  ASSERT_EQ(zk.get(dir, &data, &lock), ZOK);
  EXPECT_EQ(st.mzxid, st.czxid) << "the create alone started the lease";
  EXPECT_EQ(l->fencing_token, static_cast<std::uint64_t>(st.czxid));
  EXPECT_EQ(l->store_expires_at_ms, st.ctime + 10000);
  EXPECT_EQ(lock.mzxid, st.czxid) << "one transaction wrote both";
  EXPECT_GE(lock.version, 1);
  // Not alone: a second request of a semaphore lists the queue and is
  // granted beside the first; a try of the held mutex is refused.
  AcquireOptions two = opts(10s);
  two.capacity = 2;
  const std::string sem = unique("alone-sem");
  auto s1 = c->try_acquire(sem, two);
  auto s2 = d->try_acquire(sem, two);
  ASSERT_TRUE(s1.ok() && s2.ok());
  EXPECT_GT(s2->fencing_token, s1->fencing_token);
  EXPECT_EQ(d->try_acquire(name, opts(10s)).error().code(), Errc::not_acquired);
  ASSERT_TRUE(*c->release(*l));
  ASSERT_TRUE(*c->release(*s1));
  ASSERT_TRUE(*d->release(*s2));

  // Requests per uncontended pair, counted by the server.
  constexpr int kPairs = 30;
  const long before = received();
  ASSERT_GE(before, 0) << "mntr has no zk_packets_received";
  for (int i = 0; i < kPairs; ++i) {
    auto p = c->try_acquire(name, opts(10s));
    ASSERT_TRUE(p.ok()) << p.error().to_string();
    ASSERT_TRUE(*c->release(*p));
  }
  const long sent = received() - before;
  // Slack for pings and the janitor's look at idle locks.
  EXPECT_LE(sent, 2 * kPairs + 8)
      << sent << " requests for " << kPairs << " pairs";
}

// The URL path is the root (default /baton); zk:// is the same store.
TEST(ZkStore, RootIsTheUrlPathAndZkIsAnAlias) {
  ZkObserver zk(shared_server().hostport());
  ASSERT_TRUE(zk.ok());
  auto plain = Client::open("zookeeper://" + shared_server().hostport() +
                            "?session_timeout=4s");
  auto alias = Client::open("zk://" + shared_server().hostport() +
                            "/baton-test?session_timeout=4s");
  auto test_root = open_zk_client(shared_server().url());
  ASSERT_TRUE(plain.ok()) << plain.error().to_string();
  ASSERT_TRUE(alias.ok()) << alias.error().to_string();
  ASSERT_TRUE(test_root.ok());
  const std::string name = unique("root");
  auto in_default = plain->try_acquire(name, opts(30s));
  ASSERT_TRUE(in_default.ok()) << in_default.error().to_string();
  EXPECT_EQ(zk.count_children(lock_dir(name, "/baton")), 1);
  EXPECT_EQ(zk.count_children(lock_dir(name)), 0);
  // Another root, another lock of the same name.
  auto in_test = alias->try_acquire(name, opts(30s));
  ASSERT_TRUE(in_test.ok()) << in_test.error().to_string();
  EXPECT_EQ(zk.count_children(lock_dir(name)), 1);
  // zk:// and zookeeper:// with the same root are one store.
  auto refused = test_root->try_acquire(name, opts(30s));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code(), Errc::not_acquired);
  EXPECT_TRUE(*plain->release(*in_default));
  EXPECT_TRUE(*alias->release(*in_test));
}

// Rule 16 for URLs: unknown keys, bad host lists and session timeouts out
// of range are invalid_argument, naming what is wrong.
TEST(ZkStore, BadUrlsAreRefusedNamingTheProblem) {
  const std::string hp = shared_server().hostport();
  const std::string base = "zookeeper://" + hp + "/baton-test";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {base + "?session_timeout=4s&nosuch=1", "nosuch"},
      {"zk://" + hp + "/baton-test?bogus_key=2", "bogus_key"},
      {"zookeeper://" + hp + ",,127.0.0.1:2181/baton-test", "empty host"},
      {"zookeeper://127.0.0.1:99999/baton-test", "port"},
      {"zookeeper://127.0.0.1:x/baton-test", "port"},
      {"zookeeper:///baton-test", "empty host"},
      {base + "?session_timeout=0s", "session_timeout"},
      {base + "?session_timeout=10ms", "session_timeout"},
      {base + "?session_timeout=30d", "session_timeout"},
      {base + "?session_timeout=4", "session_timeout"},
      {base + "?session_timeout=soon", "session_timeout"},
  };
  for (const auto& [url, must_name] : cases) {
    auto c = Client::open(url);
    ASSERT_FALSE(c.ok()) << url << " was accepted";
    EXPECT_EQ(c.error().code(), Errc::invalid_argument)
        << url << ": " << c.error().to_string();
    EXPECT_NE(c.error().message().find(must_name), std::string::npos)
        << url << ": " << c.error().to_string();
  }
  // In range, it opens.
  auto ok = Client::open(base + "?session_timeout=10s");
  EXPECT_TRUE(ok.ok()) << ok.error().to_string();
}

// Rules 3 and 4 by ZooKeeper's clock: a holder that stops extending (its
// session alive, so its node stays) loses the lock one TTL after its grant,
// not earlier; the waiter gets it then, and the old lease can be neither
// extended nor released.
TEST(ZkStore, SilentHolderExpiresByZooKeepersClockAndTheWaiterGetsIt) {
  auto a = open_zk_client(shared_server().url());
  auto b = open_zk_client(shared_server().url());
  ASSERT_TRUE(a.ok() && b.ok());
  const std::string name = unique("expiry");
  auto held = a->try_acquire(name, opts(3s, "silent"));
  ASSERT_TRUE(held.ok()) << held.error().to_string();
  const auto t0 = Clock::now();
  auto got = b->acquire(name, 30s, opts(10s, "next"));
  const auto took = Clock::now() - t0;
  ASSERT_TRUE(got.ok()) << got.error().to_string();
  EXPECT_GT(got->fencing_token, held->fencing_token);
  // Both expiries are mtime + TTL on the server's clock: the grant's write
  // came no earlier than the holder's expiry.
  EXPECT_GE(got->store_expires_at_ms - 10000, held->store_expires_at_ms);
  EXPECT_GE(took, 2s);
  EXPECT_LT(took, 3s + 4s) << "the waiter was not granted at the expiry";
  auto ext = a->extend(*held, 3s);
  ASSERT_FALSE(ext.ok());
  EXPECT_EQ(ext.error().code(), Errc::lock_lost) << ext.error().to_string();
  auto rel = a->release(*held);
  ASSERT_TRUE(rel.ok()) << rel.error().to_string();
  EXPECT_FALSE(*rel);
  EXPECT_TRUE(*b->release(*got));
}

#ifdef BATON_CLI_PATH
std::int64_t wall_now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string sh(const std::string& cmd, int* status) {
  std::string out;
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  if (p == nullptr) return out;
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  *status = ::pclose(p);
  return out;
}

// libfaketime preloaded with FAKETIME set: one process shifted, no IPC
// (tests/postgres/postgres_cli_test.cc explains why not `faketime`).
std::string faketime(const std::string& shift) {
  return "env LD_PRELOAD=/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1 "
         "FAKETIME_DONT_FAKE_MONOTONIC=1 FAKETIME='" +
         shift + "' ";
}

std::int64_t faked_offset_s(const std::string& shift) {
  int st = 0;
  const std::string faked = sh(faketime(shift) + "date +%s", &st);
  const std::string real = sh("date +%s", &st);
  try {
    return std::stoll(faked) - std::stoll(real);
  } catch (...) {
    return 0;
  }
}

std::int64_t json_int(const std::string& out, const std::string& key) {
  std::smatch m;
  if (!std::regex_search(out, m, std::regex("\"" + key + "\":(-?[0-9]+)"))) {
    return -1;
  }
  return std::stoll(m[1]);
}
#endif

// The store never decides expiry by the client's clock: `baton` processes
// 5 hours ahead and 5 hours behind (libfaketime) see a lease held by this
// process expire when ZooKeeper's clock says so.
TEST(ZkCli, ExpiryFollowsZooKeepersClockWhenClientClocksAreHoursOff) {
#ifndef BATON_CLI_PATH
  GTEST_SKIP() << "needs the baton CLI (configure with BATON_WITH_SERVER=ON)";
#else
  const std::int64_t ahead = faked_offset_s("+5h");
  const std::int64_t behind = faked_offset_s("-5h");
  if (ahead < 4 * 3600 || behind > -4 * 3600) {
    GTEST_SKIP() << "faketime does not shift a process's clock (+5h gave "
                 << ahead << "s, -5h gave " << behind
                 << "s); install Debian's faketime package";
  }
  auto c = open_zk_client(shared_server().url());
  ASSERT_TRUE(c.ok()) << c.error().to_string();
  const std::string name = unique("faketime");
  auto held = c->try_acquire(name, opts(8s, "in-process"));
  ASSERT_TRUE(held.ok()) << held.error().to_string();
  const std::string baton = std::string(BATON_CLI_PATH) + " --store '" +
                            shared_server().url() + "' acquire " + name +
                            " --ttl 2s --json";
  int st = 0;
  // 5 h ahead, the lease looks long expired: still refused.
  std::string out = sh(faketime("+5h") + baton, &st);
  if (wall_now_ms() < held->store_expires_at_ms - 1000) {
    EXPECT_EQ(WEXITSTATUS(st), 75) << out;
  }
  // 5 h behind, it looks far from due: granted once ZooKeeper says it ended.
  out = sh(faketime("-5h") + baton + " --wait 30s", &st);
  ASSERT_EQ(WEXITSTATUS(st), 0) << out;
  const std::int64_t granted_at = json_int(out, "store_expires_at_ms") - 2000;
  EXPECT_GE(granted_at, held->store_expires_at_ms) << out;
  EXPECT_LE(granted_at, wall_now_ms() + 1000) << "not by the server's clock";
  EXPECT_GT(json_int(out, "fencing_token"),
            static_cast<std::int64_t>(held->fencing_token))
      << out;
  auto rel = c->release(*held);
  ASSERT_TRUE(rel.ok()) << rel.error().to_string();
  EXPECT_FALSE(*rel);
#endif
}

// A lease on zookeeper:// is valid for at most the session timeout (4 s
// here) whatever its TTL; `baton run --ttl 30s` (the default TTL) renews
// every third of that window and keeps the lock for a command that runs
// longer than the session timeout, with an automatic grace fitted to the
// window. An explicit --grace the window cannot hold is refused (exit 64)
// and the lock is given back.
TEST(ZkCli, RunKeepsALeaseWhoseTtlIsLongerThanTheSession) {
#ifndef BATON_CLI_PATH
  GTEST_SKIP() << "needs the baton CLI (configure with BATON_WITH_SERVER=ON)";
#else
  auto c = open_zk_client(shared_server().url());
  ASSERT_TRUE(c.ok()) << c.error().to_string();
  const std::string name = unique("long-ttl");
  const std::string run = std::string(BATON_CLI_PATH) + " --store '" +
                          shared_server().url() + "' run " + name +
                          " --ttl 30s ";
  int st = 0;
  std::thread cli([&] { sh(run + "-- sleep 9 2>&1", &st); });
  Finally join([&] {
    if (cli.joinable()) cli.join();
  });
  // At 7 s, past the 4 s session timeout and ~6 renewal intervals, the
  // command's lease still holds the lock.
  std::this_thread::sleep_for(7s);
  auto busy = c->try_acquire(name, opts(2s));
  EXPECT_FALSE(busy.ok()) << "the lock was free while baton run held it";
  cli.join();
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "status " << st;

  std::string out = sh(run + "--grace 5s -- true 2>&1", &st);
  EXPECT_EQ(WEXITSTATUS(st), 64) << out;
  EXPECT_NE(out.find("session timeout"), std::string::npos) << out;
  auto freed = c->try_acquire(name, opts(2s));
  EXPECT_TRUE(freed.ok()) << "refused --grace kept the lock: "
                          << (freed.ok() ? "" : freed.error().to_string());
#endif
}

// Rule 8 and the ephemeral-sequential recipe at scale: 50 waiters, each its own
// client (session), queued one after the other, are granted in that order, and
// while they wait each one watches only a node or two (the one ahead of
// it): `wchp` never shows more than 3 of them on one path, and the server
// holds at most 3 child watches (a getChildren watch per waiter on the
// lock would be the herd woken by every release).
TEST(ZkStore, FiftyWaitersAreGrantedInOrderWithoutAHerd) {
  constexpr int kWaiters = 50;
  ZkObserver zk(shared_server().hostport());
  ASSERT_TRUE(zk.ok());
  auto holder = open_zk_client(shared_server().url());
  ASSERT_TRUE(holder.ok()) << holder.error().to_string();
  const std::string name = unique("fifty");
  const std::string dir = lock_dir(name);
  auto held = holder->try_acquire(name, opts(120s, "holder"));
  ASSERT_TRUE(held.ok()) << held.error().to_string();
  std::vector<Client> clients;
  for (int i = 0; i < kWaiters; ++i) {
    auto c = open_zk_client(shared_server().url());
    ASSERT_TRUE(c.ok()) << c.error().to_string();
    clients.push_back(std::move(*c));
  }
  std::mutex mu;
  std::vector<int> order;
  std::vector<std::uint64_t> fencing;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  Finally joiner([&] {  // on any exit: free the queue, then join
    (void)holder->release(*held);
    for (auto& t : threads) t.join();
  });
  for (int i = 0; i < kWaiters; ++i) {
    threads.emplace_back([&, i] {
      auto l =
          clients[i].acquire(name, 120s, opts(60s, "w" + std::to_string(i)));
      if (!l.ok()) {
        failures.fetch_add(1);
        std::fprintf(stderr, "w%d: %s\n", i, l.error().to_string().c_str());
        return;
      }
      {
        std::lock_guard<std::mutex> lk(mu);
        order.push_back(i);
        fencing.push_back(l->fencing_token);
      }
      if (!clients[i].release(*l).value_or(false)) failures.fetch_add(1);
    });
    ASSERT_TRUE(eventually(
        [&] {
          auto info = holder->describe(name);
          return info.ok() && info->waiters.size() == std::size_t(i) + 1;
        },
        20s, 10ms))
        << "waiter " << i << " never showed up in the queue";
  }
  auto info = holder->describe(name);
  ASSERT_TRUE(info.ok()) << info.error().to_string();
  ASSERT_EQ(info->waiters.size(), std::size_t{kWaiters});
  for (int i = 0; i < kWaiters; ++i) {
    EXPECT_EQ(info->waiters[i].label, "w" + std::to_string(i));
  }

  // The waiters' sessions, from their nodes' owners.
  std::vector<std::string> kids;
  ASSERT_EQ(zk.children(dir, &kids), ZOK);
  ASSERT_EQ(kids.size(), std::size_t{kWaiters} + 1);
  std::set<std::string> waiting;
  for (std::size_t i = 1; i < kids.size(); ++i) {
    Stat st{};
    ASSERT_EQ(zk.exists(dir + "/" + kids[i], &st), ZOK);
    waiting.insert(session_hex(st.ephemeralOwner));
  }
  // Every waiter has set its watch (it is pushed, rule 10); then count
  // the waiters watching each path, anywhere on the server.
  std::map<std::string, std::set<std::string>> by_path;
  std::string wchp;
  EXPECT_TRUE(eventually(
      [&] {
        wchp = shared_server().four_letter("wchp");
        by_path = watchers_by_path(wchp);
        std::set<std::string> watching;
        for (const auto& [path, sessions] : by_path) {
          for (const auto& s : sessions) {
            if (waiting.count(s)) watching.insert(s);
          }
        }
        return watching.size() == waiting.size();
      },
      10s, 100ms))
      << "not every waiter watches a node (polling?):\n"
      << wchp;
  std::map<std::string, int> paths_of;
  std::size_t most = 0;
  std::string busiest;
  for (const auto& [path, sessions] : by_path) {
    std::size_t n = 0;
    for (const auto& s : sessions) {
      if (waiting.count(s)) {
        ++n;
        ++paths_of[s];
      }
    }
    if (n > most) {
      most = n;
      busiest = path;
    }
  }
  EXPECT_LE(most, 3u) << busiest << " is watched by " << most
                      << " waiters: a herd";
  const long child_watches = child_watch_count(shared_server());
  EXPECT_GE(child_watches, 0) << "mntr or wchs gave no count";
  EXPECT_LE(child_watches, 3) << "child watches while 50 wait: a herd";
  for (const auto& [session, n] : paths_of) {
    EXPECT_LE(n, 3) << session << " watches " << n << " paths";
  }

  ASSERT_TRUE(*holder->release(*held));
  for (auto& t : threads) t.join();
  threads.clear();
  EXPECT_EQ(failures.load(), 0);
  std::vector<int> expected(kWaiters);
  for (int i = 0; i < kWaiters; ++i) expected[i] = i;
  EXPECT_EQ(order, expected) << "not granted in arrival order";
  for (std::size_t i = 1; i < fencing.size(); ++i) {
    EXPECT_GT(fencing[i], fencing[i - 1]) << "grant " << i;
  }
  EXPECT_EQ(zk.count_children(dir), 0);
}

}  // namespace
}  // namespace baton::testing
