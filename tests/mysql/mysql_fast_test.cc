// tests/mysql/mysql_fast_test.cc — mysql://'s schema version 3:
// the one-statement fast paths that keep a lock's only lease in its locks
// row (stores/mysql/fast_path.cc), the move of that lease into holders when
// anything else happens on the name, and the migrations of tables made by
// versions 1 and 2, which must keep their leases and shut out a process of
// an older build. On the server of mysql_store_test.cc (one per binary);
// each test has its own table prefix, so it can read the rows.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "baton/client.h"
#include "my_process.h"
#include "stores/mysql/doorbell.h"

namespace baton {
namespace testing {
MyProcess& shared_my_server();
}  // namespace testing

namespace {

using namespace std::chrono_literals;
using testing::MyProcess;

MyProcess& server() { return testing::shared_my_server(); }

std::string fresh_prefix(const std::string& what) {
  static std::atomic<int> n{0};
  return what + std::to_string(::getpid()) + "_" +
         std::to_string(n.fetch_add(1)) + "_";
}

AcquireOptions opts(std::chrono::milliseconds ttl, std::string label = "") {
  AcquireOptions o;
  o.ttl = ttl;
  o.label = std::move(label);
  return o;
}

Client open(const std::string& prefix, const std::string& more = "") {
  auto c = Client::open(server().url("prefix=" + prefix + more));
  EXPECT_TRUE(c.ok()) << c.error().to_string();
  return std::move(*c);
}

// One value of the name's locks row, or of a count over its holders rows.
std::string lock_col(const std::string& prefix, const std::string& name,
                     const std::string& expr) {
  return server().sql("SELECT " + expr + " FROM baton_test." + prefix +
                      "locks WHERE name = '" + name + "'");
}
std::string holder_rows(const std::string& prefix, const std::string& name) {
  return server().sql("SELECT COUNT(*) FROM baton_test." + prefix +
                      "holders WHERE name = '" + name + "'");
}

// A lease the fast path granted (inline in the locks row). The name is
// used once first: its first use is the scheduling transaction's, which
// makes its row.
Result<Lease> inline_lease(Client& c, const std::string& prefix,
                           const std::string& name,
                           std::chrono::milliseconds ttl,
                           const std::string& label = "") {
  auto first = c.try_acquire(name, opts(30s));
  if (!first.ok()) return first;
  auto gone = c.release(*first);
  if (!gone.ok()) return std::move(gone).error();
  auto l = c.try_acquire(name, opts(ttl, label));
  if (l.ok()) {
    EXPECT_EQ(lock_col(prefix, name, "h_token"), l->token.to_string());
  }
  return l;
}

// Turns version-3 tables back into version 2's: inline leases become
// holders rows (slot 0, where version 2 kept a lock's first holder) and
// the locks table loses the columns version 3 added.
void downgrade_to_version_2(const std::string& prefix) {
  const std::string t = "baton_test." + prefix;
  server().sql("INSERT INTO " + t +
               "holders (name, slot, token, fencing, ttl_ms, granted_us, "
               "expires_us, holds, label, rkey, aliases, shared) SELECT name, "
               "0, h_token, h_fencing, h_ttl_ms, h_granted_us, h_expires_us, "
               "1, h_label, '', '', 0 FROM " +
               t + "locks WHERE h_token <> '';ALTER TABLE " + t +
               "locks CHANGE high_fencing last_fencing BIGINT NOT NULL, DROP "
               "COLUMN others, DROP COLUMN h_token, DROP COLUMN h_fencing, "
               "DROP COLUMN h_ttl_ms, DROP COLUMN h_granted_us, DROP COLUMN "
               "h_expires_us, DROP COLUMN h_label;DELETE FROM " +
               t + "schema_version;INSERT INTO " + t +
               "schema_version VALUES (2, UTC_TIMESTAMP(6))");
}

// An idle lock's acquire, extend and release are each one UPDATE of its
// locks row: the lease is there (h_*), no holders row is written, and the
// tokens keep increasing across the paths.
TEST(MyFast, AnIdleLocksLeaseLivesInItsLocksRow) {
  const std::string p = fresh_prefix("fast");
  Client c = open(p);
  const std::string name = "fast/idle";
  // First use: the scheduling transaction makes the row (and a holders
  // row, since there was no row to keep the lease in).
  auto first = c.try_acquire(name, opts(30s));
  ASSERT_TRUE(first.ok()) << first.error().to_string();
  EXPECT_EQ(holder_rows(p, name), "1");
  EXPECT_EQ(lock_col(p, name, "others"), "1");
  ASSERT_TRUE(*c.release(*first));
  EXPECT_EQ(lock_col(p, name, "others"), "0");

  auto l = c.try_acquire(name, opts(30s, "inline"));
  ASSERT_TRUE(l.ok()) << l.error().to_string();
  EXPECT_GT(l->fencing_token, first->fencing_token);
  EXPECT_EQ(holder_rows(p, name), "0");
  EXPECT_EQ(lock_col(p, name, "h_token"), l->token.to_string());
  EXPECT_EQ(lock_col(p, name, "h_fencing"), std::to_string(l->fencing_token));
  EXPECT_EQ(lock_col(p, name, "high_fencing"),
            std::to_string(l->fencing_token));
  const std::int64_t exp1 = std::stoll(lock_col(p, name, "h_expires_us"));
  EXPECT_NEAR(static_cast<double>(exp1) / 1000.0,
              static_cast<double>(l->store_expires_at_ms), 1.0);

  auto info = c.describe(name);
  ASSERT_TRUE(info.ok()) << info.error().to_string();
  ASSERT_EQ(info->holders.size(), 1u);
  EXPECT_EQ(info->holders[0].fencing_token, l->fencing_token);
  EXPECT_EQ(info->holders[0].label, "inline");
  auto listed = c.list("fast/");
  ASSERT_TRUE(listed.ok()) << listed.error().to_string();
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].name, name);

  auto e = c.extend(*l, 60s);
  ASSERT_TRUE(e.ok()) << e.error().to_string();
  EXPECT_EQ(e->fencing_token, l->fencing_token);
  EXPECT_EQ(e->ttl, 60s);
  EXPECT_GT(std::stoll(lock_col(p, name, "h_expires_us")), exp1);
  EXPECT_EQ(holder_rows(p, name), "0");

  // Another client's request is the scheduling transaction's: it refuses,
  // and the lease, moved to holders, is the same lease.
  Client d = open(p);
  auto other = d.try_acquire(name, opts(30s));
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.error().code(), Errc::not_acquired);
  EXPECT_EQ(holder_rows(p, name), "1");
  EXPECT_EQ(lock_col(p, name, "h_token"), "");
  EXPECT_EQ(lock_col(p, name, "others"), "1");

  auto r = c.release(*e);
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_TRUE(*r);
  EXPECT_EQ(holder_rows(p, name), "0");
  EXPECT_EQ(lock_col(p, name, "others"), "0");
  auto again = c.release(*e);
  ASSERT_TRUE(again.ok()) << again.error().to_string();
  EXPECT_FALSE(*again);
  auto next = c.try_acquire(name, opts(30s));
  ASSERT_TRUE(next.ok()) << next.error().to_string();
  EXPECT_EQ(next->fencing_token, l->fencing_token + 1);
  EXPECT_EQ(lock_col(p, name, "h_token"), next->token.to_string());
  auto done = c.release(*next);
  ASSERT_TRUE(done.ok()) << done.error().to_string();
  EXPECT_TRUE(*done);
  EXPECT_EQ(lock_col(p, name, "h_token"), "");
  EXPECT_EQ(holder_rows(p, name), "0");
  // The other client found the name busy a moment ago: for a while its
  // requests go straight to the transaction (no UPDATE that would fail on
  // a contended lock), so its lease is a holders row.
  auto busy = d.try_acquire(name, opts(30s));
  ASSERT_TRUE(busy.ok()) << busy.error().to_string();
  EXPECT_EQ(holder_rows(p, name), "1");
  EXPECT_TRUE(*d.release(*busy));
}

// A waiter's transaction moves the inline lease into holders first (and
// counts it and itself in `others`), so the release is the scheduling
// transaction's and hands the lock over; once the name is idle again the
// next lease is inline again, with a larger token.
TEST(MyFast, AWaiterMovesTheInlineLeaseIntoHolders) {
  const std::string p = fresh_prefix("fast");
  Client a = open(p), b = open(p);
  const std::string name = "fast/queued";
  auto held = inline_lease(a, p, name, 30s);
  ASSERT_TRUE(held.ok()) << held.error().to_string();
  auto waiter = std::async(std::launch::async,
                           [&] { return b.acquire(name, 20s, opts(30s)); });
  const auto end = std::chrono::steady_clock::now() + 10s;
  while (lock_col(p, name, "others") != "2" &&
         std::chrono::steady_clock::now() < end) {
    std::this_thread::sleep_for(5ms);
  }
  EXPECT_EQ(lock_col(p, name, "others"), "2");
  EXPECT_EQ(lock_col(p, name, "h_token"), "");
  EXPECT_EQ(server().sql("SELECT fencing FROM baton_test." + p +
                         "holders WHERE name = '" + name + "'"),
            std::to_string(held->fencing_token));
  // The moved lease is still the caller's.
  auto e = a.extend(*held, 30s);
  ASSERT_TRUE(e.ok()) << e.error().to_string();
  EXPECT_EQ(e->fencing_token, held->fencing_token);
  ASSERT_TRUE(*a.release(*held));
  auto got = waiter.get();
  ASSERT_TRUE(got.ok()) << got.error().to_string();
  EXPECT_GT(got->fencing_token, held->fencing_token);
  EXPECT_EQ(lock_col(p, name, "others"), "1");
  ASSERT_TRUE(*b.release(*got));
  EXPECT_EQ(lock_col(p, name, "others"), "0");
  auto next = a.try_acquire(name, opts(30s));
  ASSERT_TRUE(next.ok()) << next.error().to_string();
  EXPECT_GT(next->fencing_token, got->fencing_token);
  EXPECT_EQ(lock_col(p, name, "h_token"), next->token.to_string());
  EXPECT_EQ(holder_rows(p, name), "0");
  EXPECT_TRUE(*a.release(*next));
}

// An inline lease past its expiry (database time) is replaced by the next
// acquire's UPDATE with the next token; its owner can neither extend nor
// release it any more (those attempts are scheduling transactions, which
// move the new lease to holders), and the new lease is untouched by them.
TEST(MyFast, AnExpiredInlineLeaseIsReplacedAndLost) {
  const std::string p = fresh_prefix("fast");
  Client c = open(p);
  const std::string name = "fast/expired";
  auto old = inline_lease(c, p, name, 200ms);
  ASSERT_TRUE(old.ok()) << old.error().to_string();
  std::this_thread::sleep_for(400ms);
  auto fresh = c.try_acquire(name, opts(30s));
  ASSERT_TRUE(fresh.ok()) << fresh.error().to_string();
  EXPECT_EQ(fresh->fencing_token, old->fencing_token + 1);
  EXPECT_EQ(lock_col(p, name, "h_token"), fresh->token.to_string());
  auto e = c.extend(*old, 30s);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.error().code(), Errc::lock_lost);
  auto r = c.release(*old);
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_FALSE(*r);
  auto info = c.describe(name);
  ASSERT_TRUE(info.ok()) << info.error().to_string();
  ASSERT_EQ(info->holders.size(), 1u);
  EXPECT_EQ(info->holders[0].fencing_token, fresh->fencing_token);
  auto mine = c.extend(*fresh, 30s);
  ASSERT_TRUE(mine.ok()) << mine.error().to_string();
  EXPECT_EQ(mine->fencing_token, fresh->fencing_token);
  ASSERT_TRUE(*c.release(*fresh));
}

// The fast path's lease holds its GET_LOCK doorbell (taken in the UPDATE
// that grants it), so a waiter from another process can block on it, and
// the fast release lets it go.
TEST(MyFast, TheFastPathTakesAndLetsGoTheLeasesDoorbell) {
  const std::string p = fresh_prefix("fast");
  Client c = open(p);
  const std::string name = "fast/bell";
  auto l = inline_lease(c, p, name, 30s);
  ASSERT_TRUE(l.ok()) << l.error().to_string();
  const std::string where =
      "127.0.0.1:" + std::to_string(server().port()) + "/baton_test";
  auto used = [&](const std::string& token) {
    return server().sql("SELECT IS_USED_LOCK('" +
                        store::my::doorbell_name(where, p, name, token) +
                        "') IS NOT NULL");
  };
  EXPECT_EQ(used(l->token.to_string()), "1");
  ASSERT_TRUE(*c.release(*l));
  EXPECT_EQ(lock_col(p, name, "h_token"), "");
  EXPECT_EQ(used(l->token.to_string()), "0");
  // Held: another's try is the scheduling transaction's, and refused.
  auto h = c.try_acquire(name, opts(30s));
  ASSERT_TRUE(h.ok()) << h.error().to_string();
  EXPECT_EQ(used(h->token.to_string()), "1");
  Client other = open(p);
  auto t = other.try_acquire(name, opts(30s));
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.error().code(), Errc::not_acquired);
  ASSERT_TRUE(*c.release(*h));
}

// fast_path=off and serialize=center keep every lease a holders row.
TEST(MyFast, OffAndCenterUseTheSchedulingTransaction) {
  for (const std::string more : {"&fast_path=off", "&serialize=center"}) {
    const std::string p = fresh_prefix("fast");
    Client c = open(p, more);
    const std::string name = "fast/off";
    for (int i = 0; i < 2; ++i) {
      auto l = c.try_acquire(name, opts(30s));
      ASSERT_TRUE(l.ok()) << more << ": " << l.error().to_string();
      EXPECT_EQ(holder_rows(p, name), "1") << more;
      EXPECT_EQ(lock_col(p, name, "h_token"), "") << more;
      ASSERT_TRUE(*c.release(*l));
    }
  }
  auto bad = Client::open(server().url("fast_path=maybe"));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message().find("fast_path"), std::string::npos);
}

// Version-2 tables (a lease in holders, a queued request, an idle name)
// opened by 8 stores at once: one migration, the lease and the queue kept
// and counted (no fast path passes them), and a process of the older build
// fails on its next read instead of writing rows nobody counts.
TEST(MySchema, EightConcurrentStartsMigrateVersion2Tables) {
  const std::string p = fresh_prefix("v2");
  const std::string t = "baton_test." + p;
  const std::string held = "v2/held", idle = "v2/idle";
  std::uint64_t first = 0;
  {
    Client c = open(p);
    auto l = inline_lease(c, p, held, 3600s, "old");  // kept
    ASSERT_TRUE(l.ok()) << l.error().to_string();
    first = l->fencing_token;
    ASSERT_TRUE(*c.release(*c.try_acquire(idle, opts(30s))));
  }
  downgrade_to_version_2(p);
  // What a version-2 process reads first in every transaction.
  const std::string old_read =
      "SELECT name, capacity, last_fencing FROM " + t + "locks LIMIT 1";
  ASSERT_NO_THROW(server().sql(old_read));
  std::atomic<int> refused{0}, idle_ok{0};
  std::vector<std::thread> ts;
  for (int i = 0; i < 8; ++i) {
    ts.emplace_back([&] {
      auto c = Client::open(server().url("prefix=" + p));
      if (!c.ok()) {
        ADD_FAILURE() << c.error().to_string();
        return;
      }
      auto other = c->try_acquire(held, opts(5s));
      if (!other.ok() && other.error().code() == Errc::not_acquired) {
        refused.fetch_add(1);
      }
      auto l = c->acquire(idle, 20s, opts(5s));
      if (l.ok() && *c->release(*l)) idle_ok.fetch_add(1);
    });
  }
  for (auto& th : ts) th.join();
  EXPECT_EQ(refused.load(), 8);
  EXPECT_EQ(idle_ok.load(), 8);
  EXPECT_EQ(server().sql("SELECT GROUP_CONCAT(version ORDER BY version) "
                         "FROM " +
                         t + "schema_version"),
            "2,3");
  EXPECT_THROW(server().sql(old_read), std::runtime_error);
  EXPECT_EQ(lock_col(p, held, "others"), "1");
  EXPECT_EQ(lock_col(p, idle, "others"), "0");
  Client c = open(p);
  auto info = c.describe(held);
  ASSERT_TRUE(info.ok()) << info.error().to_string();
  ASSERT_EQ(info->holders.size(), 1u);
  EXPECT_EQ(info->holders[0].fencing_token, first);
  EXPECT_EQ(info->holders[0].label, "old");
  // The idle name's leases are inline again, their tokens still growing.
  auto l = c.try_acquire(idle, opts(5s));
  ASSERT_TRUE(l.ok()) << l.error().to_string();
  EXPECT_EQ(lock_col(p, idle, "h_token"), l->token.to_string());
  EXPECT_EQ(lock_col(p, idle, "high_fencing"),
            std::to_string(l->fencing_token));
  EXPECT_TRUE(*c.release(*l));
}

// Tables made by schema version 1 (version 2's without the mode column)
// opened by 8 stores at once: one migration through both versions, no
// error, the old lease kept (as exclusive), and shared mode works on them.
TEST(MySchema, EightConcurrentStartsMigrateVersion1Tables) {
  const std::string p = fresh_prefix("v1");
  const std::string t = "baton_test." + p;
  const std::string held = "v1/held";
  std::uint64_t first = 0;
  {
    Client c = open(p);
    auto l = c.try_acquire(held, opts(3600s, "old"));
    ASSERT_TRUE(l.ok()) << l.error().to_string();
    first = l->fencing_token;  // kept: the Client ends holding it
  }
  downgrade_to_version_2(p);
  server().sql("ALTER TABLE " + t + "holders DROP COLUMN shared;ALTER TABLE " +
               t + "queue DROP COLUMN shared;DELETE FROM " + t +
               "schema_version;INSERT INTO " + t +
               "schema_version VALUES (1, UTC_TIMESTAMP(6))");
  const std::string cols =
      "SELECT COUNT(*) FROM information_schema.columns WHERE table_schema = "
      "'baton_test' AND table_name IN ('" +
      p + "holders', '" + p + "queue') AND column_name = 'shared'";
  ASSERT_EQ(server().sql(cols), "0");
  std::atomic<int> ok{0};
  std::vector<std::thread> ts;
  for (int i = 0; i < 8; ++i) {
    ts.emplace_back([&] {
      auto c = Client::open(server().url("prefix=" + p));
      if (!c.ok()) {
        ADD_FAILURE() << c.error().to_string();
        return;
      }
      auto other = c->try_acquire(held, opts(5s));
      if (other.ok() || other.error().code() != Errc::not_acquired) return;
      auto l = c->acquire_shared(held + "/readers", 10s, opts(5s));
      if (l.ok() && l->shared && c->release(*l).ok()) ok.fetch_add(1);
    });
  }
  for (auto& th : ts) th.join();
  EXPECT_EQ(ok.load(), 8);
  EXPECT_EQ(server().sql("SELECT GROUP_CONCAT(version ORDER BY version) "
                         "FROM " +
                         t + "schema_version"),
            "1,3");
  EXPECT_EQ(server().sql(cols), "2");
  Client c = open(p);
  auto info = c.describe(held);
  ASSERT_TRUE(info.ok()) << info.error().to_string();
  ASSERT_EQ(info->holders.size(), 1u);
  EXPECT_EQ(info->holders[0].fencing_token, first);
  EXPECT_EQ(info->holders[0].label, "old");
  EXPECT_FALSE(info->holders[0].shared);
  auto r = c.acquire_shared(held, 0ms, opts(5s));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), Errc::not_acquired);
}

}  // namespace
}  // namespace baton
