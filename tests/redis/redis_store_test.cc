// tests/redis/redis_store_test.cc — redis://-specific behaviour: a guarded
// inventory, lost replies, dead waiters, key prefixes, URLs, wake-ups.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "baton/counter.h"
#include "redis_process.h"
#include "stores/redis/common.h"
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

// An inventory of 10 prizes must not be handed out 14 times: the guarded
// take is one script, so of 50 concurrent takers exactly 10 win.
TEST(RedisStore, TenPrizesFiftyTakersExactlyTenWin) {
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
  auto c = open_client(server().url());
  ASSERT_TRUE(c.ok());
  const std::string name = unique("lost-reply");
  AcquireOptions o = opts(10s, "first");
  o.token = OwnerToken::random();
  auto first = c->try_acquire(name, o);  // "the reply was lost"
  ASSERT_TRUE(first.ok()) << first.error().to_string();
  auto retry = c->acquire(name, 5s, o);
  ASSERT_TRUE(retry.ok()) << retry.error().to_string();
  EXPECT_EQ(retry->fencing_token, first->fencing_token);
  EXPECT_EQ(retry->token, *o.token);
  auto info = c->describe(name);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->holders.size(), 1u);
  EXPECT_TRUE(*c->release(*retry));
  EXPECT_FALSE(*c->release(*retry));
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
  AcquireSpec spec;
  spec.name = name;
  spec.token = OwnerToken::random();
  spec.ttl = 10s;
  spec.label = "dead";
  auto q = dead.acquire(spec, store::redis::kWait, 600'000, CallContext());
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

// The ACL user docs/stores/redis.md ("Security") tells operators to make:
// keys and channels of its prefix only, no @dangerous command but INFO.
// Everything works under its prefix; another prefix is permission_denied,
// a wrong password fails open(); no message shows the password, which may
// also come from a file or REDISCLI_AUTH.
TEST(RedisStore, AnAclUserLimitedToItsPrefixWorksThereOnly) {
  const std::string pw = "baton-redis-secret-acl";
  const std::string setuser =
      "redis-cli -p " + std::to_string(server().port()) +
      " ACL SETUSER baton-acl reset on '>" + pw +
      "' '~team-acl:*' '&team-acl:*' +@all -@dangerous +info >/dev/null";
  ASSERT_EQ(std::system(setuser.c_str()), 0);
  const std::string base =
      "redis://baton-acl:" + pw + "@" + server().hostport();
  auto c = open_client(base + "?prefix=team-acl:");
  ASSERT_TRUE(c.ok()) << c.error().message();
  const std::string name = unique("acl");
  auto l = c->try_acquire(name, opts(10s));
  ASSERT_TRUE(l.ok()) << l.error().message();
  EXPECT_TRUE(c->extend(*l, 20s).ok());
  auto info = c->describe(name);
  ASSERT_TRUE(info.ok()) << info.error().message();
  EXPECT_EQ(info->holders.size(), 1u);
  EXPECT_TRUE(c->counter(name).add(2).ok());
  EXPECT_TRUE(*c->release(*l));

  auto other = open_client(base + "?prefix=other:");
  ASSERT_TRUE(other.ok()) << other.error().message();
  auto denied = other->try_acquire(name, opts(10s));
  ASSERT_FALSE(denied.ok());
  EXPECT_EQ(denied.error().code(), Errc::permission_denied)
      << denied.error().message();
  EXPECT_NE(denied.error().message().find("~<prefix>* &<prefix>*"),
            std::string::npos)
      << denied.error().message();

  auto wrong = open_client("redis://baton-acl:not-it@" + server().hostport());
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.error().code(), Errc::permission_denied);
  EXPECT_NE(wrong.error().message().find("redis " + server().hostport()),
            std::string::npos)
      << wrong.error().message();
  EXPECT_EQ(wrong.error().message().find("not-it"), std::string::npos);

  ::setenv("REDISCLI_AUTH", pw.c_str(), 1);
  auto from_env = open_client("redis://baton-acl@" + server().hostport() +
                              "?prefix=team-acl:");
  ::unsetenv("REDISCLI_AUTH");
  ASSERT_TRUE(from_env.ok()) << from_env.error().message();
  EXPECT_TRUE(from_env->try_acquire(unique("env"), opts(1s)).ok());
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

// Test hooks reset at the end of a test.
struct HooksGuard {
  ~HooksGuard() {
    auto& h = store::redis::test_hooks();
    h.recheck_ms = 0;
    h.drop_messages = false;
  }
};

// Channels with at least one subscriber that match `pattern` (PUBSUB
// CHANNELS), e.g. every inbox under a prefix: "<prefix>in:*".
long long channels(const std::string& pattern) {
  redisContext* c = redisConnect("127.0.0.1", server().port());
  long long n = -1;
  if (c != nullptr && c->err == 0) {
    auto* r = static_cast<redisReply*>(
        redisCommand(c, "PUBSUB CHANNELS %b", pattern.data(), pattern.size()));
    if (r != nullptr && r->type == REDIS_REPLY_ARRAY) {
      n = static_cast<long long>(r->elements);
    }
    if (r != nullptr) freeReplyObject(r);
  }
  if (c != nullptr) redisFree(c);
  return n;
}

template <typename F>
bool eventually(F cond, std::chrono::milliseconds limit = 10s) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (cond()) return true;
    std::this_thread::sleep_for(5ms);
  }
  return cond();
}

// Rule 10: the handoff is pushed. With the re-check period set to 20 s, a
// waiter that gets the lock well before that was woken by its message; the
// message goes to the waiting store's own inbox channel, subscribed only
// while one of its threads waits.
TEST(RedisStore, WaiterIsWokenByPushOnItsInbox) {
  HooksGuard guard;
  auto& hooks = store::redis::test_hooks();
  hooks.recheck_ms = 20'000;
  const std::string prefix = unique("push") + ":";
  auto a = open_client(server().url() + "?prefix=" + prefix);
  auto b = open_client(server().url() + "?prefix=" + prefix);
  ASSERT_TRUE(a.ok() && b.ok());
  const std::string name = "lock";
  // An uncontended blocking acquire subscribes nothing.
  auto free_lease = b->acquire(name, 5s, opts(60s));
  ASSERT_TRUE(free_lease.ok());
  EXPECT_EQ(channels(prefix + "*"), 0);
  ASSERT_TRUE(*b->release(*free_lease));

  auto held = a->try_acquire(name, opts(60s, "holder"));
  ASSERT_TRUE(held.ok());
  std::atomic<bool> done{false};
  Result<Lease> got = Error(Errc::internal, "not run");
  std::thread waiter([&] {
    got = b->acquire(name, 60s, opts(30s, "waiter"));
    done = true;
  });
  ASSERT_TRUE(eventually([&] { return channels(prefix + "in:*") == 1; }));
  EXPECT_EQ(channels(prefix + "*"), 1);  // no per-lock channel
  EXPECT_EQ(a->describe(name)->waiters.size(), 1u);
  const auto delivered = hooks.delivered.load();
  const auto pushed = hooks.pushed_grants.load();
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(*a->release(*held));
  // Far below the 20 s re-check: only the push can have woken it.
  EXPECT_TRUE(eventually([&] { return done.load(); }, 10s));
  const auto took = std::chrono::steady_clock::now() - t0;
  waiter.join();
  ASSERT_TRUE(got.ok()) << got.error().to_string();
  EXPECT_LT(took, 10s);
  EXPECT_GT(hooks.delivered.load(), delivered);
  // The message carried the grant: no re-check script was needed.
  EXPECT_EQ(hooks.pushed_grants.load(), pushed + 1);
  auto info = a->describe(name);
  ASSERT_TRUE(info.ok());
  ASSERT_EQ(info->holders.size(), 1u);
  EXPECT_EQ(info->holders[0].fencing_token, got->fencing_token);
  EXPECT_EQ(info->holders[0].label, "waiter");
  EXPECT_GT(got->fencing_token, held->fencing_token);
  EXPECT_TRUE(*b->release(*got));
  // The inbox is dropped once nobody waits (after the linger).
  EXPECT_TRUE(eventually([&] { return channels(prefix + "*") == 0; }));
}

// "Wake only the next waiter", across clients: four clients (four stores,
// four subscriber connections) wait on one lock; each release delivers
// exactly one message in this process — to the client whose waiter was
// granted — not one per waiting client. The re-check is 20 s, so every
// handoff below is the push.
TEST(RedisStore, EachReleaseWakesOnlyTheGrantedClient) {
  HooksGuard guard;
  auto& hooks = store::redis::test_hooks();
  hooks.recheck_ms = 20'000;
  const std::string prefix = unique("herd") + ":";
  const std::string url = server().url() + "?prefix=" + prefix;
  auto holder = open_client(url);
  ASSERT_TRUE(holder.ok());
  constexpr int kWaiters = 4;
  std::vector<Result<Client>> clients;
  for (int i = 0; i < kWaiters; ++i) clients.push_back(open_client(url));
  for (auto& c : clients) ASSERT_TRUE(c.ok());
  auto first = holder->try_acquire("lock", opts(60s, "holder"));
  ASSERT_TRUE(first.ok());
  std::mutex mu;
  std::vector<std::pair<int, Lease>> granted;  // (waiter, lease) in order
  std::vector<std::thread> threads;
  for (int i = 0; i < kWaiters; ++i) {
    threads.emplace_back([&, i] {
      auto l = clients[i]->acquire("lock", 60s, opts(30s, std::to_string(i)));
      std::lock_guard<std::mutex> lk(mu);
      if (l.ok()) granted.emplace_back(i, *l);
    });
    // One at a time, so the queue order is known.
    ASSERT_TRUE(eventually([&] {
      auto info = holder->describe("lock");
      return info.ok() && info->waiters.size() == static_cast<size_t>(i + 1);
    }));
  }
  ASSERT_TRUE(
      eventually([&] { return channels(prefix + "in:*") == kWaiters; }));
  auto count = [&] {
    std::lock_guard<std::mutex> lk(mu);
    return granted.size();
  };
  std::uint64_t before = hooks.delivered.load();
  ASSERT_TRUE(*holder->release(*first));
  for (int i = 0; i < kWaiters; ++i) {
    ASSERT_TRUE(eventually([&] { return count() == size_t(i + 1); }))
        << "handoff " << i;
    std::this_thread::sleep_for(100ms);  // let any stray message arrive
    EXPECT_EQ(hooks.delivered.load() - before, 1u) << "handoff " << i;
    before = hooks.delivered.load();
    std::pair<int, Lease> g;
    {
      std::lock_guard<std::mutex> lk(mu);
      g = granted.back();
    }
    EXPECT_EQ(g.first, i);  // FIFO
    ASSERT_TRUE(*clients[g.first]->release(g.second));
  }
  for (auto& t : threads) t.join();
}

// A lock value as a baton before packed waiters wrote it (waiters as
// MessagePack maps under `q`, no inbox): the current scripts read it, keep
// its queue order, grant its waiter (told on the lock's channel, as that
// client listens there) and write the packed form back.
TEST(RedisStore, LockValueOfAnOlderBatonIsReadAndUpgraded) {
  const std::string prefix = unique("old") + ":";
  const std::string holder = "0123456789abcdef0123456789abcdef";
  const std::string waiter = "fedcba9876543210fedcba9876543210";
  redisContext* admin = redisConnect("127.0.0.1", server().port());
  ASSERT_TRUE(admin != nullptr && admin->err == 0);
  auto* r = static_cast<redisReply*>(redisCommand(
      admin, "EVAL %s 0 %s %s %s",
      "local tm = redis.call('TIME') "
      "local now = tonumber(tm[1]) * 1000000 + tonumber(tm[2]) "
      "local far = now + 60000000 "
      "redis.call('SET', ARGV[1] .. 'f:lock', '1') "
      "redis.call('SET', ARGV[1] .. 'l:lock', cmsgpack.pack({c = 1, "
      "h = {{t = ARGV[2], f = 1, ttl = 60000, e = far, n = 1, l = 'old', "
      "k = '', a = {}}}, q = {{t = ARGV[3], ttl = 30000, l = 'w', k = '', "
      "ar = now, d = far, hb = far}}})) return 1",
      prefix.c_str(), holder.c_str(), waiter.c_str()));
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->type, REDIS_REPLY_INTEGER);
  freeReplyObject(r);
  auto c = open_client(server().url() + "?prefix=" + prefix);
  ASSERT_TRUE(c.ok());
  auto info = c->describe("lock");
  ASSERT_TRUE(info.ok());
  ASSERT_EQ(info->holders.size(), 1u);
  EXPECT_EQ(info->holders[0].label, "old");
  ASSERT_EQ(info->waiters.size(), 1u);
  EXPECT_EQ(info->waiters[0].label, "w");
  // A new request queues behind the old waiter.
  Result<Lease> got = Error(Errc::internal, "not run");
  std::thread t([&] { got = c->acquire("lock", 30s, opts(30s, "new")); });
  ASSERT_TRUE(
      eventually([&] { return c->describe("lock")->waiters.size() == 2; }));
  auto as_lease = [](const std::string& hex) {
    Lease l;
    l.name = "lock";
    l.token = *OwnerToken::parse(hex);
    return l;
  };
  ASSERT_TRUE(*c->release(as_lease(holder)));
  info = c->describe("lock");
  ASSERT_TRUE(info.ok());
  ASSERT_EQ(info->holders.size(), 1u);
  EXPECT_EQ(info->holders[0].label, "w");  // FIFO kept
  EXPECT_EQ(info->holders[0].fencing_token, 2u);
  // Written back packed: the new request is one string under Q, no q.
  r = static_cast<redisReply*>(redisCommand(
      admin, "EVAL %s 1 %s",
      "local s = cmsgpack.unpack(redis.call('GET', KEYS[1])) "
      "return {s.Q and #s.Q or -1, s.q and #s.q or -1, type(s.Q[1])}",
      (prefix + "l:lock").c_str()));
  ASSERT_TRUE(r != nullptr && r->type == REDIS_REPLY_ARRAY && r->elements == 3);
  EXPECT_EQ(r->element[0]->integer, 1);
  EXPECT_EQ(r->element[1]->integer, -1);
  EXPECT_EQ(std::string(r->element[2]->str), "string");
  freeReplyObject(r);
  redisFree(admin);
  ASSERT_TRUE(*c->release(as_lease(waiter)));
  t.join();
  ASSERT_TRUE(got.ok()) << got.error().to_string();
  EXPECT_EQ(got->fencing_token, 3u);
  EXPECT_TRUE(*c->release(*got));
}

// The acquire fast path writes a lone lock (one holder, no queue) as
// MessagePack built by concatenation: every baton (and cmsgpack) reads it,
// extend rewrites it the usual way, release deletes it only for its owner,
// and list() finds the locks by SCAN without the sorted-set index that
// each acquire and release used to update.
TEST(RedisStore, LoneLockIsReadByEveryPathAndListedByScan) {
  const std::string prefix = unique("lone") + ":";
  auto c = open_client(server().url() + "?prefix=" + prefix);
  ASSERT_TRUE(c.ok());
  auto lease = c->try_acquire("lone", opts(30s, "L"));
  ASSERT_TRUE(lease.ok()) << lease.error().to_string();
  redisContext* admin = redisConnect("127.0.0.1", server().port());
  ASSERT_TRUE(admin != nullptr && admin->err == 0);
  auto* r = static_cast<redisReply*>(redisCommand(
      admin, "EVAL %s 1 %s",
      "local v = redis.call('GET', KEYS[1]) "
      "local s = cmsgpack.unpack(v) "
      "return {string.byte(v, 4), s.h[1].t, s.h[1].f, s.h[1].n, s.h[1].l, "
      "#s.h, #s.q}",
      (prefix + "l:lone").c_str()));
  ASSERT_TRUE(r != nullptr && r->type == REDIS_REPLY_ARRAY && r->elements == 7)
      << (r != nullptr && r->type == REDIS_REPLY_ERROR ? r->str : "");
  EXPECT_EQ(r->element[0]->integer, 0xcb);  // the capacity as a float64
  EXPECT_EQ(std::string(r->element[1]->str), lease->token.to_string());
  EXPECT_EQ(r->element[2]->integer,
            static_cast<long long>(lease->fencing_token));
  EXPECT_EQ(r->element[3]->integer, 1);
  EXPECT_EQ(std::string(r->element[4]->str), "L");
  EXPECT_EQ(r->element[5]->integer, 1);
  EXPECT_EQ(r->element[6]->integer, 0);
  freeReplyObject(r);
  auto info = c->describe("lone");
  ASSERT_TRUE(info.ok());
  ASSERT_EQ(info->holders.size(), 1u);
  EXPECT_EQ(info->holders[0].label, "L");
  EXPECT_EQ(info->holders[0].fencing_token, lease->fencing_token);
  EXPECT_EQ(info->last_fencing_token, lease->fencing_token);
  // Another token's release changes nothing; extend rewrites the value.
  Lease other = *lease;
  other.token = OwnerToken::random();
  EXPECT_FALSE(*c->release(other));
  ASSERT_TRUE(c->extend(*lease, 20s).ok());
  EXPECT_TRUE(*c->release(*lease));
  EXPECT_FALSE(*c->release(*lease));
  auto again = c->try_acquire("lone", opts(30s));
  ASSERT_TRUE(again.ok());
  EXPECT_GT(again->fencing_token, lease->fencing_token);
  EXPECT_TRUE(*c->release(*again));

  // Names with SCAN's pattern characters are matched literally.
  const std::vector<std::string> names = {"a*b",  "a?c", "a[x]",
                                          "a\\d", "ab",  "b"};
  std::vector<Lease> held;
  for (const std::string& n : names) {
    auto l = c->try_acquire(n, opts(30s));
    ASSERT_TRUE(l.ok()) << n << ": " << l.error().to_string();
    held.push_back(*l);
  }
  auto listed = [&](std::string_view pre, std::size_t limit) {
    std::vector<std::string> out;
    auto l = c->list(pre, limit);
    EXPECT_TRUE(l.ok());
    if (l.ok()) {
      for (const LockInfo& i : *l) out.push_back(i.name);
    }
    return out;
  };
  using V = std::vector<std::string>;
  EXPECT_EQ(listed("a", 100), (V{"a*b", "a?c", "a[x]", "a\\d", "ab"}));
  EXPECT_EQ(listed("a*", 100), V{"a*b"});
  EXPECT_EQ(listed("a[", 100), V{"a[x]"});
  EXPECT_EQ(listed("", 2), (V{"a*b", "a?c"}));
  EXPECT_TRUE(*c->release(held[0]));
  EXPECT_EQ(listed("a*", 100), V{});
  r = static_cast<redisReply*>(
      redisCommand(admin, "EXISTS %s", (prefix + "index").c_str()));
  ASSERT_TRUE(r != nullptr && r->type == REDIS_REPLY_INTEGER);
  EXPECT_EQ(r->integer, 0);
  freeReplyObject(r);
  redisFree(admin);
  for (std::size_t i = 1; i < held.size(); ++i) {
    EXPECT_TRUE(*c->release(held[i]));
  }
}

// Rule 10's fallback: the wake-up message is lost, the jittered re-check
// (50–200 ms) still hands the lock over.
TEST(RedisStore, LostWakeUpIsRecoveredByTheRecheck) {
  HooksGuard guard;
  auto& hooks = store::redis::test_hooks();
  auto a = open_client(server().url());
  auto b = open_client(server().url());
  ASSERT_TRUE(a.ok() && b.ok());
  const std::string name = unique("lost-push");
  auto held = a->try_acquire(name, opts(60s, "holder"));
  ASSERT_TRUE(held.ok());
  Result<Lease> got = Error(Errc::internal, "not run");
  std::thread waiter([&] { got = b->acquire(name, 60s, opts(30s)); });
  ASSERT_TRUE(eventually([&] { return channels("baton:in:*") >= 1; }));
  ASSERT_TRUE(
      eventually([&] { return a->describe(name)->waiters.size() == 1; }));
  hooks.drop_messages = true;
  const auto dropped = hooks.dropped.load();
  ASSERT_TRUE(*a->release(*held));
  waiter.join();
  ASSERT_TRUE(got.ok()) << got.error().to_string();
  EXPECT_GT(hooks.dropped.load(), dropped);  // the push was really lost
  EXPECT_GT(got->fencing_token, held->fencing_token);
  EXPECT_TRUE(*b->release(*got));
}

// The scripts run as functions (FCALL); a user whose ACL forbids functions
// still gets every operation, through EVALSHA.
TEST(RedisStore, ScriptsFallBackToEvalshaWhenFunctionsAreForbidden) {
  redisContext* admin = redisConnect("127.0.0.1", server().port());
  ASSERT_TRUE(admin != nullptr && admin->err == 0);
  auto* r = static_cast<redisReply*>(
      redisCommand(admin,
                   "ACL SETUSER evalonly on >pw ~* &* +@all -fcall "
                   "-fcall_ro -function"));
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->type, REDIS_REPLY_STATUS);
  freeReplyObject(r);
  redisFree(admin);
  auto url = server().url();
  url.insert(std::string("redis://").size(), "evalonly:pw@");
  auto c = open_client(url);
  ASSERT_TRUE(c.ok()) << c.error().to_string();
  const std::string name = unique("evalonly");
  auto l = c->try_acquire(name, opts(10s, "evalonly"));
  ASSERT_TRUE(l.ok()) << l.error().to_string();
  auto info = c->describe(name);
  ASSERT_TRUE(info.ok()) << info.error().to_string();
  EXPECT_EQ(info->holders.size(), 1u);
  EXPECT_TRUE(*c->release(*l));
}

// acquire_all: one reservation is queued on one set of locks at a time (as
// core::LockTable); a second arrival elsewhere is refused, and a release()
// that withdraws the queued reservation stops its waiting call.
TEST(RedisStore, AcquireAllReservationQueuesOnOneSetOfLocks) {
  ClientOptions no_retry;
  no_retry.max_retries = 0;
  auto s = open_client(server().url(), no_retry);
  ASSERT_TRUE(s.ok());
  const std::string a = unique("all-a"), b = unique("all-b"),
                    c = unique("all-c"), d = unique("all-d");
  AcquireOptions hold = opts(60s);
  hold.token = OwnerToken::random();
  for (const auto& n : {a, c}) ASSERT_TRUE(s->try_acquire(n, hold).ok());
  const OwnerToken r = OwnerToken::random();
  AcquireOptions all = opts(30s);
  all.token = r;
  using Names = std::vector<std::string>;
  Result<std::vector<Lease>> first = Error(Errc::internal, "not run");
  std::thread waiting([&] { first = s->acquire_all(Names{a, b}, 20s, all); });
  ASSERT_TRUE(eventually([&] { return s->describe(b)->waiters.size() == 1; }));

  // The same reservation on other locks: refused, nothing changes.
  auto other = s->acquire_all(Names{c, d}, 2s, all);
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.error().code(), Errc::invalid_argument)
      << other.error().to_string();
  EXPECT_NE(other.error().message().find("already queued on other locks"),
            std::string::npos)
      << other.error().to_string();
  EXPECT_TRUE(s->describe(c)->waiters.empty());
  EXPECT_TRUE(s->describe(d)->waiters.empty());

  // The holder of a leaves: the reservation gets {a, b} at once.
  ASSERT_TRUE(*s->release(lease_of(a, *hold.token)));
  waiting.join();
  ASSERT_TRUE(first.ok()) << first.error().to_string();
  EXPECT_EQ(first->size(), 2u);
  for (const auto& n : {a, b}) EXPECT_TRUE(*s->release(lease_of(n, r)));

  // Granted and released: the reservation may queue elsewhere again.
  auto again = s->acquire_all(Names{c, d}, 300ms, all);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.error().code(), Errc::timeout) << again.error().to_string();
  EXPECT_TRUE(s->describe(c)->waiters.empty());

  // Queued again, then withdrawn by release(): the waiting call stops
  // (not_acquired) instead of queueing again at the tail.
  Result<std::vector<Lease>> third = Error(Errc::internal, "not run");
  std::thread withdrawn([&] { third = s->acquire_all(Names{c, d}, 20s, all); });
  ASSERT_TRUE(eventually([&] { return s->describe(d)->waiters.size() == 1; }));
  EXPECT_FALSE(*s->release(lease_of(c, r)));
  withdrawn.join();
  ASSERT_FALSE(third.ok());
  EXPECT_EQ(third.error().code(), Errc::not_acquired)
      << third.error().to_string();
  EXPECT_TRUE(s->describe(c)->waiters.empty());
  EXPECT_TRUE(s->describe(d)->waiters.empty());
  EXPECT_TRUE(*s->release(lease_of(c, *hold.token)));
}

}  // namespace
}  // namespace baton::testing
