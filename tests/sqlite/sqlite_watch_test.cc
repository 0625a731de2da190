// tests/sqlite/sqlite_watch_test.cc — sqlite://'s change feed
// (src/stores/sqlite/watch.cc) beyond the conformance suite's Watch_*
// tests: a quiet database does not wake it, another client's commit does
// at once, and an expiry (no write at all) wakes it when it is due.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "baton/client.h"
#include "baton/store.h"
#include "feed_wait.h"
#include "sqlite_dir.h"

namespace baton {
namespace {

using namespace std::chrono_literals;
using testing::SqliteDir;

SqliteDir& dir() {
  // On tmpfs where there is one (the feed does not depend on the disk, and
  // a slow fsync would only blur the timings); removed at exit.
  static SqliteDir d(testing::memory_backed_dir());
  return d;
}

std::string unique(const std::string& what) {
  static std::atomic<int> n{0};
  return "sqwatch/" + what + "/" + std::to_string(n.fetch_add(1)) + "/";
}

AcquireOptions opts(std::chrono::milliseconds ttl) {
  AcquireOptions o;
  o.ttl = ttl;
  return o;
}

Client open() {
  auto c = Client::open(dir().url("watch.db"));
  EXPECT_TRUE(c.ok()) << c.error().to_string();
  return std::move(*c);
}

TEST(SqliteWatch, AQuietDatabaseDoesNotWakeTheFeed) {
  Client c = open();
  auto feed = c.watch(unique("quiet"));
  ASSERT_TRUE(feed.ok()) << feed.error().to_string();
  ASSERT_NE(*feed, nullptr);
  EXPECT_GE(testing::wait_once(**feed, 600ms), 550ms);
  EXPECT_GE(testing::wait_once(**feed, 300ms), 250ms);
}

// A checkpoint writes the database file and truncates the -wal, and
// commits nothing; restarting the -wal moves data_version, so the feed may
// return once for it, and then waits again.
TEST(SqliteWatch, ACheckpointWakesTheFeedAtMostOnce) {
  Client c = open();
  const std::string base = unique("checkpoint");
  auto l = c.try_acquire(base + "a", opts(30s));  // frames in the -wal
  ASSERT_TRUE(l.ok()) << l.error().to_string();
  auto feed = c.watch(base);
  ASSERT_TRUE(feed.ok()) << feed.error().to_string();
  ASSERT_NE(*feed, nullptr);
  std::thread t([&] {
    std::this_thread::sleep_for(200ms);
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(dir().file("watch.db").c_str(), &db), SQLITE_OK);
    EXPECT_EQ(sqlite3_exec(db, "PRAGMA wal_checkpoint(TRUNCATE)", nullptr,
                           nullptr, nullptr),
              SQLITE_OK);
    sqlite3_close(db);
  });
  (void)testing::wait_once(**feed, 1000ms);
  t.join();
  EXPECT_GE(testing::wait_once(**feed, 500ms), 450ms);
  ASSERT_TRUE(*c.release(*l));
}

TEST(SqliteWatch, AnotherClientsCommitWakesItAtOnce) {
  Client c = open();
  Client other = open();  // its own connections, as another process's
  const std::string base = unique("commit");
  auto feed = c.watch(base);
  ASSERT_TRUE(feed.ok()) << feed.error().to_string();
  ASSERT_NE(*feed, nullptr);
  std::optional<Lease> l;
  std::thread t([&] {
    std::this_thread::sleep_for(200ms);
    auto r = other.try_acquire(base + "a", opts(30s));
    ASSERT_TRUE(r.ok()) << r.error().to_string();
    l = *r;
  });
  const auto took = testing::wait_once(**feed, 10s);
  t.join();
  EXPECT_GE(took, 150ms);
  EXPECT_LT(took, 1500ms);
  ASSERT_TRUE(l.has_value());
  // Seen once: the next wait waits.
  EXPECT_GE(testing::wait_once(**feed, 300ms), 250ms);
  ASSERT_TRUE(*other.release(*l));
  EXPECT_LT(testing::wait_once(**feed, 10s), 1500ms);
}

// A lease running out writes nothing: the feed returns when it is due,
// from the expiry it read when it was (re-)armed.
TEST(SqliteWatch, AnExpiryWakesTheFeedWhenItIsDue) {
  Client c = open();
  const std::string base = unique("expiry");
  // The lease runs from its transaction's start: between these two.
  const auto asked = std::chrono::steady_clock::now();
  auto l = c.try_acquire(base + "a", opts(1500ms));
  ASSERT_TRUE(l.ok()) << l.error().to_string();
  const auto granted = std::chrono::steady_clock::now();
  auto feed = c.watch(base);
  ASSERT_TRUE(feed.ok()) << feed.error().to_string();
  ASSERT_NE(*feed, nullptr);
  (void)testing::wait_once(**feed, 10s);
  const auto now = std::chrono::steady_clock::now();
  EXPECT_GE(now - asked, 1500ms);
  EXPECT_LT(now - granted, 2500ms);
  auto info = c.describe(base + "a");
  ASSERT_TRUE(info.ok());
  EXPECT_TRUE(info->holders.empty());
  // Nothing else is due: the next wait waits.
  EXPECT_GE(testing::wait_once(**feed, 300ms), 250ms);
}

}  // namespace
}  // namespace baton
