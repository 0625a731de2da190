// Unit tests of core::LockTable: what the table says about leases
// that ended — a late duplicate of the acquire that created one is refused
// (lock_lost), within a bounded memory (EndedTokens); undo_grant() forgets;
// describe()'s last_fencing of a free lock; a full queue is unavailable.
#include <random>
#include <set>

#include "core/ended_tokens.h"
#include "lock_table_fixture.h"

namespace baton::core {
namespace {

bool refused_as_ended(const Result<AcquireOutcome>& r) {
  return !r.ok() && r.error().code() == Errc::lock_lost &&
         r.error().message().find("lease already ended") != std::string::npos;
}

TEST_F(LockTableTest, ALateDuplicateOfAReleasedLeaseIsRefused) {
  auto t = tok();
  auto g = try_acquire("r", t);
  ASSERT_TRUE(g.ok() && g->granted);
  ASSERT_TRUE(table_.release("r", t)->was_held);
  const auto before = table_.stats();
  auto dup = try_acquire("r", t);
  ASSERT_TRUE(refused_as_ended(dup)) << dup.error().to_string();
  EXPECT_EQ(dup.error().message(),
            "lock \"r\": this request's lease already ended (released or "
            "expired); a late duplicate is not granted again, acquire with a "
            "new owner token");
  // Nothing changed; a waiting duplicate is refused too, and queues nothing.
  EXPECT_EQ(table_.stats().locks, before.locks);
  EXPECT_EQ(table_.stats().grants, before.grants);
  ASSERT_TRUE(try_acquire("other", tok()).ok());  // held by someone else
  EXPECT_TRUE(refused_as_ended(wait_acquire("r", t, Nanos(5s))));
  EXPECT_TRUE(info("r").waiters.empty());
  // Another request (a new token) gets the lock; the same token on another
  // name is another request.
  EXPECT_TRUE(try_acquire("r", tok()).ok());
  EXPECT_TRUE(try_acquire("elsewhere", t).ok());
}

TEST_F(LockTableTest, ExpiredAndSessionFreedLeasesAreRememberedToo) {
  auto expired = tok();
  ASSERT_TRUE(try_acquire("e", expired, Nanos(100ms)).ok());
  clock_.advance(100ms);
  table_.advance();
  EXPECT_TRUE(refused_as_ended(try_acquire("e", expired)));

  auto eph = tok();
  AcquireRequest r = req("s", eph);
  r.session = 7;
  r.ephemeral = true;
  ASSERT_TRUE(table_.acquire(r).ok());
  EXPECT_EQ(table_.release_session_leases(7), 1u);
  EXPECT_TRUE(refused_as_ended(table_.acquire(r)));
}

TEST_F(LockTableTest, ReentrantAliasesOfAnEndedLeaseAreRefused) {
  auto lease_token = tok(), alias = tok();
  AcquireRequest r = req("k", lease_token);
  r.reentrancy_key = "key";
  ASSERT_TRUE(table_.acquire(r).ok());
  r.token = alias;
  ASSERT_EQ(table_.acquire(r)->grant.holds, 2u);
  ASSERT_EQ(table_.release("k", lease_token)->holds_left, 1u);
  ASSERT_EQ(table_.release("k", lease_token)->holds_left, 0u);
  EXPECT_TRUE(refused_as_ended(table_.acquire(r)));  // the alias's request
}

// What is not an ended lease: a grant given back with undo_grant() (its
// reply never reached the client, which may retry with the same token,
// rule 17), a waiter that withdrew or timed out, a token never used.
TEST_F(LockTableTest, UndoneGrantsAndWaitersThatLeftAreNotRemembered) {
  auto t = tok();
  ASSERT_TRUE(try_acquire("u", t).ok());
  ASSERT_TRUE(table_.undo_grant("u", t)->was_held);
  auto retry = try_acquire("u", t, Nanos(60s));
  ASSERT_TRUE(retry.ok());
  EXPECT_TRUE(retry->granted);

  auto w = tok();
  ASSERT_FALSE(wait_acquire("u", w, Nanos(1s))->granted);
  ASSERT_TRUE(table_.release("u", w)->withdrew_waiter);
  EXPECT_FALSE(wait_acquire("u", w, Nanos(1s))->granted);  // queued again
  clock_.advance(1s);
  table_.advance();                                        // timed out
  EXPECT_FALSE(wait_acquire("u", w, Nanos(1s))->granted);  // queued again

  auto never = tok();
  EXPECT_FALSE(table_.release("n", never)->was_held);
  EXPECT_TRUE(try_acquire("n", never).ok());
}

TEST_F(LockTableTest, MultiReservationWithAnEndedLeaseIsRefused) {
  std::vector<std::string_view> ab = {"a", "b"};
  for (bool all : {false, true}) {
    MultiRequest m;
    m.names = ab;
    m.reservation = tok();
    m.ttl = Nanos(1s);
    m.all_or_nothing = all;
    ASSERT_EQ(table_.acquire_multi(m)->granted.size(), 2u);
    ASSERT_TRUE(table_.release("a", m.reservation)->was_held);
    // Asking again for the rest is fine; asking again for "a" is a late
    // duplicate and changes nothing ("b" stays held, nothing is queued).
    auto again = table_.acquire_multi(m);
    ASSERT_FALSE(again.ok());
    EXPECT_EQ(again.error().code(), Errc::lock_lost);
    EXPECT_NE(again.error().message().find("this reservation's lease"),
              std::string::npos);
    EXPECT_TRUE(info("a").holders.empty());
    std::vector<std::string_view> b = {"b"};
    m.names = b;
    ASSERT_EQ(table_.acquire_multi(m)->granted.size(), 1u);
    ASSERT_TRUE(table_.release("b", m.reservation)->was_held);
  }
}

TEST(LockTableEnded, MemoryIsBoundedByCountAndWindow) {
  ManualClock clock;
  Limits limits;
  limits.max_ended_tokens = 3;
  limits.ended_token_window = Nanos(10s);
  LockTable table(clock, limits);
  std::vector<OwnerToken> t;
  for (std::uint64_t i = 1; i <= 4; ++i) {
    t.push_back(OwnerToken{9, i});
    AcquireRequest r;
    r.name = "m";
    r.token = t.back();
    r.ttl = Nanos(1s);
    ASSERT_TRUE(table.acquire(r).ok());
    ASSERT_TRUE(table.release("m", t.back())->was_held);
  }
  auto again = [&](const OwnerToken& token) {
    AcquireRequest r;
    r.name = "m";
    r.token = token;
    r.ttl = Nanos(1s);
    auto out = table.acquire(r);
    if (out.ok()) (void)table.release("m", token);
    return out;
  };
  for (int i = 1; i < 4; ++i) EXPECT_TRUE(refused_as_ended(again(t[i])));
  // (Its release is remembered in turn, which evicts t[1].)
  EXPECT_TRUE(again(t[0]).ok()) << "the oldest of 4 was forgotten (cap 3)";
  EXPECT_TRUE(again(t[1]).ok());
  clock.advance(10s);  // the window passed
  for (int i = 2; i < 4; ++i) EXPECT_TRUE(again(t[i]).ok());
}

// The FIFO ring and its open-addressing index under churn: what is within
// the count is found, what was evicted is not, with other names mixed in.
TEST(EndedTokens, FindsExactlyTheRecentEntries) {
  constexpr std::size_t kCap = 1000;
  EndedTokens ended(kCap, Nanos(std::chrono::hours(1)));
  std::mt19937_64 rng(12);
  std::vector<std::pair<std::string, OwnerToken>> added;
  const Instant now{};
  for (int i = 0; i < 20'000; ++i) {
    std::string name = "n" + std::to_string(rng() % 50);
    OwnerToken t{rng(), rng()};
    ended.add(name, t, now);
    added.emplace_back(name, t);
    if (i % 997 == 0 || i == 19'999) {
      ASSERT_EQ(ended.size(), std::min<std::size_t>(added.size(), kCap));
      const std::size_t first = added.size() > kCap ? added.size() - kCap : 0;
      for (std::size_t k = 0; k < added.size(); ++k) {
        const auto& [n, tok] = added[k];
        ASSERT_EQ(ended.contains(n, tok, now), k >= first) << i << "/" << k;
        ASSERT_FALSE(ended.contains(n + "x", tok, now));
      }
    }
  }
  EXPECT_LE(ended.memory_bytes(), kCap * 32 + 2048 * 4 + 64);
  EndedTokens none(0, Nanos(std::chrono::hours(1)));
  none.add("a", OwnerToken{1, 1}, now);
  EXPECT_FALSE(none.contains("a", OwnerToken{1, 1}, now));
  EXPECT_EQ(none.memory_bytes(), 0u);
}

// describe()'s last_fencing_token is >= every token granted on the name,
// also once the lock is free again (the table-wide high water then).
TEST_F(LockTableTest, LastFencingOfAFreeLockIsTheHighWater) {
  auto a = tok();
  auto g = try_acquire("f", a);
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(info("f").last_fencing_token, g->grant.fencing_token);
  ASSERT_TRUE(try_acquire("other", tok()).ok());  // a larger token elsewhere
  EXPECT_EQ(info("f").last_fencing_token, g->grant.fencing_token);  // held
  ASSERT_TRUE(table_.release("f", a)->was_held);
  const LockInfo free = info("f");
  EXPECT_TRUE(free.holders.empty());
  EXPECT_EQ(free.last_fencing_token, table_.fencing_high_water());
  EXPECT_GT(free.last_fencing_token, g->grant.fencing_token);
  EXPECT_EQ(info("never-used").last_fencing_token, table_.fencing_high_water());
  // A lock with only waiters (acquire_all queues on free "x" while "y" is
  // held): no grant since it was free, so the high water as well.
  auto y = tok();
  ASSERT_TRUE(try_acquire("y", y).ok());
  std::vector<std::string_view> xy = {"x", "y"};
  MultiRequest m;
  m.names = xy;
  m.reservation = tok();
  m.ttl = Nanos(1s);
  m.all_or_nothing = true;
  m.queue_deadline = clock_.now() + Nanos(5s);
  ASSERT_EQ(table_.acquire_multi(m)->pending, 2u);
  ASSERT_EQ(info("x").waiters.size(), 1u);
  EXPECT_EQ(info("x").last_fencing_token, table_.fencing_high_water());
  // The next grant is above what describe reported.
  const std::uint64_t reported = info("f").last_fencing_token;
  auto next = try_acquire("f", tok());
  ASSERT_TRUE(next.ok());
  EXPECT_GT(next->grant.fencing_token, reported);
}

// A semaphore restored from a snapshot: a holder that ended before the
// snapshot may have had a larger token than the restored ones.
TEST_F(LockTableTest, RestoredSemaphoreReportsAtLeastTheRestoreFloor) {
  auto a = tok(), b = tok();
  ASSERT_TRUE(try_acquire("sem", a, Nanos(10s), 2).ok());
  auto gb = try_acquire("sem", b, Nanos(10s), 2);
  ASSERT_TRUE(gb.ok());
  ASSERT_TRUE(table_.release("sem", b)->was_held);
  LockTable fresh(clock_);
  fresh.raise_fencing_floor(table_.fencing_high_water());
  for (const LeaseRecord& r : table_.snapshot_leases()) {
    ASSERT_TRUE(fresh.restore_lease(r).ok());
  }
  EXPECT_GE(fresh.describe("sem")->last_fencing_token, gb->grant.fencing_token);
}

TEST(LockTableLimits, AFullQueueIsUnavailableNamingTheLimit) {
  ManualClock clock;
  Limits limits;
  limits.max_waiters_per_lock = 2;
  LockTable table(clock, limits);
  auto acquire = [&](std::uint64_t i, bool wait) {
    AcquireRequest r;
    r.name = "q";
    r.token = OwnerToken{5, i};
    r.ttl = Nanos(1s);
    if (wait) r.wait_deadline = clock.now() + Nanos(5s);
    return table.acquire(r);
  };
  ASSERT_TRUE(acquire(1, false)->granted);
  ASSERT_FALSE(acquire(2, true)->granted);
  ASSERT_FALSE(acquire(3, true)->granted);
  auto full = acquire(4, true);
  ASSERT_FALSE(full.ok());
  EXPECT_EQ(full.error().code(), Errc::unavailable);
  EXPECT_EQ(full.error().message(),
            "lock \"q\" has 2 waiters, the limit (max_waiters_per_lock 2); "
            "the queue is full, retry later");
  std::vector<std::string_view> q = {"q"};
  MultiRequest m;
  m.names = q;
  m.reservation = OwnerToken{5, 9};
  m.ttl = Nanos(1s);
  m.queue_deadline = clock.now() + Nanos(5s);
  auto multi = table.acquire_multi(m);
  ASSERT_FALSE(multi.ok());
  EXPECT_EQ(multi.error().code(), Errc::unavailable);
  EXPECT_EQ(table.describe("q")->waiters.size(), 2u);
}

}  // namespace
}  // namespace baton::core
