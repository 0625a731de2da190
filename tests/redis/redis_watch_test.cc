// tests/redis/redis_watch_test.cc — the keyspace-notification change feed
// of redis:// and redlock:// (src/stores/redis/watch.h) beyond the
// conformance suite's Watch_* tests: servers without notifications give no
// feed (and are left as they were), a Redlock feed needs a majority of
// masters with them, and lock names with glob characters are matched
// literally.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "feed_wait.h"
#include "redis_process.h"
#include "stores/redis/watch.h"

namespace baton::testing {
namespace {

using namespace std::chrono_literals;
namespace redis = baton::store::redis;

std::string unique(const std::string& base) {
  return "watch-test/" + base + "/" + OwnerToken::random().to_string() + "/";
}

AcquireOptions opts(std::chrono::milliseconds ttl) {
  AcquireOptions o;
  o.ttl = ttl;
  return o;
}

// The value a server reports for notify-keyspace-events.
std::string notify_events(const RedisProcess& p) {
  redis::Target t;
  t.port = p.port();
  auto c = redis::connect(t, CallContext());
  EXPECT_TRUE(c.ok());
  if (!c.ok()) return "?";
  auto r = redis::command(
      c->get(), t, {"CONFIG", "GET", "notify-keyspace-events"}, CallContext());
  EXPECT_TRUE(r.ok());
  if (!r.ok() || (*r)->elements < 2) return "?";
  return std::string((*r)->element[1]->str, (*r)->element[1]->len);
}

TEST(RedisWatch, TheClassesTheFeedNeeds) {
  EXPECT_TRUE(redis::notifications_on("K$gx"));
  EXPECT_TRUE(redis::notifications_on("xg$K"));
  EXPECT_TRUE(redis::notifications_on("AK"));
  EXPECT_TRUE(redis::notifications_on("AKE"));
  EXPECT_FALSE(redis::notifications_on(""));
  EXPECT_FALSE(redis::notifications_on("AE"));   // keyevent channels only
  EXPECT_FALSE(redis::notifications_on("K$g"));  // no expiry
  EXPECT_FALSE(redis::notifications_on("Kgx"));  // no SET
}

TEST(RedisWatch, GlobCharactersAreEscaped) {
  EXPECT_EQ(redis::glob_escape("a*b?c[d]e\\f"), "a\\*b\\?c\\[d\\]e\\\\f");
  EXPECT_EQ(redis::keyspace_pattern(3, "p*:", "x["),
            "__keyspace@3__:p\\*:l:x\\[*");
}

TEST(RedisWatch, AServerWithoutNotificationsGivesNoFeedAndKeepsItsConfig) {
  RedisProcess quiet(false, nullptr, false);
  auto c = open_client(quiet.url());
  ASSERT_TRUE(c.ok()) << c.error().to_string();
  auto feed = c->watch(unique("quiet"));
  ASSERT_TRUE(feed.ok()) << feed.error().to_string();
  EXPECT_EQ(*feed, nullptr);
  EXPECT_EQ(notify_events(quiet), "");
}

TEST(RedisWatch, AnUnreachableServerIsAnError) {
  RedisProcess gone;
  auto c = open_client(gone.url());
  ASSERT_TRUE(c.ok()) << c.error().to_string();
  gone.stop();
  auto feed = c->watch("x/");
  ASSERT_FALSE(feed.ok());
  EXPECT_EQ(feed.error().code(), Errc::unavailable);
}

// A prefix with * ? [ ] \ watches the names that start with it literally:
// the names a glob would also have matched do not wake the feed.
TEST(RedisWatch, APrefixWithGlobCharactersMatchesLiterally) {
  RedisProcess server;
  auto c = open_client(server.url());
  ASSERT_TRUE(c.ok()) << c.error().to_string();
  const std::string base = unique("glob");
  const std::string prefix = base + "a*[bc]?\\";
  auto feed = c->watch(prefix);
  ASSERT_TRUE(feed.ok()) << feed.error().to_string();
  ASSERT_NE(*feed, nullptr);
  // Each of these matches the unescaped pattern ("a" then anything, one of
  // b or c, one character, then "\*" a literal "*"), none the prefix.
  for (const std::string& name :
       {base + "a-b-*", base + "axxc?*", base + "a*b?*", base + "a*[bc]?x"}) {
    auto l = c->try_acquire(name, opts(30s));
    ASSERT_TRUE(l.ok()) << l.error().to_string();
    EXPECT_GE(wait_once(**feed, 400ms), 350ms) << name << " woke the feed";
    ASSERT_TRUE(*c->release(*l));
    EXPECT_GE(wait_once(**feed, 200ms), 150ms) << name << " woke the feed";
  }
  auto mine = c->try_acquire(prefix + "x", opts(30s));
  ASSERT_TRUE(mine.ok()) << mine.error().to_string();
  EXPECT_LT(wait_once(**feed, 10s), 5s) << "a name under the prefix";
  ASSERT_TRUE(*c->release(*mine));
  EXPECT_LT(wait_once(**feed, 10s), 5s) << "its release";
}

// A semaphore holder whose lease runs out while another holds on writes
// nothing (the key lives on): the feed returns when it is due, from the
// expiry it read when it was (re-)armed.
TEST(RedisWatch, ASemaphoreHoldersExpiryWakesTheFeedWhenDue) {
  RedisProcess server;
  auto c = open_client(server.url());
  ASSERT_TRUE(c.ok()) << c.error().to_string();
  const std::string base = unique("expiry");
  AcquireOptions brief = opts(1500ms), long_ = opts(30s);
  brief.capacity = long_.capacity = 2;
  auto stays = c->try_acquire(base + "s", long_);
  ASSERT_TRUE(stays.ok()) << stays.error().to_string();
  // The lease runs from its script's instant: between these two.
  const auto asked = std::chrono::steady_clock::now();
  auto goes = c->try_acquire(base + "s", brief);
  ASSERT_TRUE(goes.ok()) << goes.error().to_string();
  const auto granted = std::chrono::steady_clock::now();
  auto feed = c->watch(base);
  ASSERT_TRUE(feed.ok()) << feed.error().to_string();
  ASSERT_NE(*feed, nullptr);
  (void)wait_once(**feed, 10s);
  const auto now = std::chrono::steady_clock::now();
  EXPECT_GE(now - asked, 1500ms);
  EXPECT_LT(now - granted, 2500ms);
  // The feed's own read of list() at that return wrote the lock (scripts
  // advance what they read): at most one more return for it.
  (void)wait_once(**feed, 300ms);
  auto info = c->describe(base + "s");
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->holders.size(), 1u);
  // Nothing else is due for 28 s: the next wait waits.
  EXPECT_GE(wait_once(**feed, 300ms), 250ms);
}

// redlock://: a feed once a majority of the masters has notifications on
// (over those), none with fewer.
TEST(RedlockWatch, AFeedNeedsAMajorityWithNotifications) {
  std::vector<std::unique_ptr<RedisProcess>> two_on, one_on;
  two_on.push_back(std::make_unique<RedisProcess>());
  two_on.push_back(std::make_unique<RedisProcess>(false, nullptr, false));
  two_on.push_back(std::make_unique<RedisProcess>());
  one_on.push_back(std::make_unique<RedisProcess>(false, nullptr, false));
  one_on.push_back(std::make_unique<RedisProcess>());
  one_on.push_back(std::make_unique<RedisProcess>(false, nullptr, false));

  auto quiet = open_client(redlock_url(one_on));
  ASSERT_TRUE(quiet.ok()) << quiet.error().to_string();
  auto none = quiet->watch("x/");
  ASSERT_TRUE(none.ok()) << none.error().to_string();
  EXPECT_EQ(*none, nullptr);

  auto c = open_client(redlock_url(two_on));
  ASSERT_TRUE(c.ok()) << c.error().to_string();
  const std::string base = unique("majority");
  auto feed = c->watch(base);
  ASSERT_TRUE(feed.ok()) << feed.error().to_string();
  ASSERT_NE(*feed, nullptr);
  auto l = c->try_acquire(base + "a", opts(30s));
  ASSERT_TRUE(l.ok()) << l.error().to_string();
  EXPECT_LT(wait_once(**feed, 10s), 5s) << "a grant";
  ASSERT_TRUE(*c->release(*l));
  EXPECT_LT(wait_once(**feed, 10s), 5s) << "a release";
  for (const auto& p : one_on) {
    if (p != one_on[1]) {
      EXPECT_EQ(notify_events(*p), "");
    }
  }
}

}  // namespace
}  // namespace baton::testing
