// Unit tests of core::LockTable, continued: acquire_some/acquire_all,
// sessions, counters, bad input, many waiters, the change sink and restore,
// describe/list. Single-lock rules are in lock_table_test.cc.
#include <algorithm>

#include "lock_table_fixture.h"

namespace baton::core {
namespace {

TEST_F(LockTableTest, AcquireSomePartialGrants) {
  auto x = tok();
  ASSERT_TRUE(try_acquire("b", x).ok());
  std::vector<std::string_view> names = {"a", "b", "c"};
  MultiRequest m;
  m.names = names;
  m.reservation = tok();
  m.ttl = Nanos(1s);
  m.queue_deadline = clock_.now() + Nanos(5s);
  auto r = table_.acquire_multi(m);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->granted.size(), 2u);
  EXPECT_EQ(r->granted[0].name, "a");
  EXPECT_EQ(r->granted[1].name, "c");
  EXPECT_EQ(r->pending, 1u);
  ASSERT_TRUE(table_.release("b", x)->was_held);
  std::vector<Event> ev;
  ASSERT_EQ(granted_events(&ev), 1u);
  EXPECT_EQ(ev[0].name, "b");
  EXPECT_EQ(ev[0].token, m.reservation);
  auto r2 = table_.acquire_multi(m);
  ASSERT_TRUE(r2.ok());
  EXPECT_EQ(r2->granted.size(), 3u);
  EXPECT_EQ(r2->pending, 0u);
  for (auto n : names) EXPECT_TRUE(table_.release(n, m.reservation)->was_held);
  EXPECT_EQ(table_.stats().locks, 0u);
  // A try form queues nothing. (A new token: x's lease on "b" ended, so x
  // is refused there for a while, see lock_table_ended_test.cc.)
  ASSERT_TRUE(try_acquire("b", tok()).ok());
  m.reservation = tok();
  m.queue_deadline.reset();
  auto r3 = table_.acquire_multi(m);
  ASSERT_TRUE(r3.ok());
  EXPECT_EQ(r3->granted.size(), 2u);
  EXPECT_EQ(r3->pending, 0u);
  EXPECT_TRUE(info("b").waiters.empty());
}

TEST_F(LockTableTest, AcquireAllIsAllOrNothing) {
  auto x = tok();
  ASSERT_TRUE(try_acquire("b", x).ok());
  std::vector<std::string_view> names = {"a", "b"};
  MultiRequest m;
  m.names = names;
  m.reservation = tok();
  m.ttl = Nanos(1s);
  m.all_or_nothing = true;
  auto t = table_.acquire_multi(m);  // try: nothing changes
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.error().code(), Errc::not_acquired);
  EXPECT_EQ(table_.stats().locks, 1u);
  m.queue_deadline = clock_.now() + Nanos(5s);
  auto q = table_.acquire_multi(m);
  ASSERT_TRUE(q.ok());
  EXPECT_TRUE(q->granted.empty());
  EXPECT_EQ(q->pending, 2u);
  // "a" is free but blocked by the reservation at its head.
  EXPECT_FALSE(try_acquire("a", tok()).ok());
  ASSERT_TRUE(table_.release("b", x)->was_held);
  std::vector<Event> ev;
  ASSERT_EQ(granted_events(&ev), 2u);
  EXPECT_EQ(info("a").holders.size(), 1u);
  EXPECT_EQ(info("b").holders.size(), 1u);
  // Withdrawing via one name withdraws the whole reservation.
  auto y = tok();
  ASSERT_TRUE(table_.release("a", m.reservation)->was_held);
  m.reservation = y;
  names = {"a", "b"};
  m.names = names;
  auto q2 = table_.acquire_multi(m);
  ASSERT_TRUE(q2.ok());
  EXPECT_EQ(q2->pending, 2u);  // "a" is free but "b" is still held
  auto wd = table_.release("b", y);
  EXPECT_TRUE(wd->withdrew_waiter);
  EXPECT_TRUE(info("a").waiters.empty());
  EXPECT_TRUE(info("b").waiters.empty());
}

TEST_F(LockTableTest, OverlappingAcquireAllNeverDeadlocks) {
  // Many reservations over overlapping sets in different orders.
  std::vector<std::vector<std::string_view>> sets = {
      {"a", "b"}, {"b", "a"}, {"b", "c"}, {"c", "a"}, {"a", "b", "c"}, {"c"}};
  std::vector<OwnerToken> res;
  for (int round = 0; round < 3; ++round) {
    for (auto& s : sets) {
      MultiRequest m;
      m.names = s;
      m.reservation = tok();
      m.ttl = Nanos(1s);
      m.all_or_nothing = true;
      m.queue_deadline = clock_.now() + Nanos(1h);
      ASSERT_TRUE(table_.acquire_multi(m).ok());
      res.push_back(m.reservation);
    }
  }
  // Everyone gets everything eventually by releasing after each grant.
  std::size_t done = 0;
  std::map<OwnerToken, int> got;
  // The first one was granted at once.
  for (int guard = 0; guard < 1000 && done < res.size(); ++guard) {
    bool progressed = false;
    for (std::size_t i = 0; i < res.size(); ++i) {
      std::size_t want = sets[i % sets.size()].size();
      std::size_t held = 0;
      for (auto n : sets[i % sets.size()]) {
        for (auto& h : snapshot_holders(n)) held += h == res[i];
      }
      if (held == want && got[res[i]] == 0) {
        got[res[i]] = 1;
        for (auto n : sets[i % sets.size()]) {
          ASSERT_TRUE(table_.release(n, res[i])->was_held);
        }
        ++done;
        progressed = true;
      }
    }
    if (!progressed) break;
  }
  EXPECT_EQ(done, res.size());
  EXPECT_EQ(table_.stats().locks, 0u);
}

TEST_F(LockTableTest, SessionsRemoveWaitersAndEphemeralLeases) {
  auto a = tok(), b = tok(), c = tok();
  AcquireRequest ra = req("s", a);
  ra.session = 1;
  ra.ephemeral = true;
  ASSERT_TRUE(table_.acquire(ra).ok());
  AcquireRequest rb = req("s", b);
  rb.session = 2;
  rb.wait_deadline = clock_.now() + Nanos(1h);
  ASSERT_TRUE(table_.acquire(rb).ok());
  AcquireRequest rc = req("s", c);
  rc.session = 3;
  rc.wait_deadline = clock_.now() + Nanos(1h);
  ASSERT_TRUE(table_.acquire(rc).ok());
  table_.end_session(2);
  auto ev = table_.take_events();
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].kind, Event::Kind::session_ended);
  EXPECT_EQ(ev[0].token, b);
  EXPECT_EQ(info("s").waiters.size(), 1u);
  table_.end_session(1);  // a holds a lease, not a waiter: unchanged
  EXPECT_EQ(info("s").holders.size(), 1u);
  EXPECT_EQ(table_.release_session_leases(1), 1u);
  std::vector<Event> granted;
  ASSERT_EQ(granted_events(&granted), 1u);
  EXPECT_EQ(granted[0].token, c);
  EXPECT_EQ(table_.release_session_leases(1), 0u);
  // A non-ephemeral lease survives its session.
  EXPECT_EQ(table_.release_session_leases(3), 0u);
  EXPECT_EQ(info("s").holders.size(), 1u);
}

TEST_F(LockTableTest, CountersGuardedTake) {
  EXPECT_EQ(table_.counter_get("prizes").value(), 0);
  ASSERT_EQ(table_.counter_add("prizes", 10).value(), 10);
  int won = 0, refused = 0;
  for (int i = 0; i < 50; ++i) {
    auto r = table_.counter_take("prizes", 1);
    if (r.ok()) {
      ++won;
    } else {
      EXPECT_EQ(r.error().code(), Errc::not_acquired);
      ++refused;
    }
  }
  EXPECT_EQ(won, 10);
  EXPECT_EQ(refused, 40);
  EXPECT_EQ(table_.counter_get("prizes").value(), 0);
  EXPECT_EQ(table_.counter_take("prizes", 0).error().code(),
            Errc::invalid_argument);
  ASSERT_TRUE(table_.counter_add("big", INT64_MAX).ok());
  auto over = table_.counter_add("big", 1);
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.error().code(), Errc::invalid_argument);
  EXPECT_EQ(table_.counter_get("big").value(), INT64_MAX);
  ASSERT_TRUE(table_.counter_add("neg", INT64_MIN).ok());
  EXPECT_FALSE(table_.counter_add("neg", -1).ok());
  EXPECT_EQ(table_.counter_get("").error().code(), Errc::invalid_argument);
}

TEST_F(LockTableTest, BadInputChangesNothing) {
  auto a = tok();
  ASSERT_TRUE(try_acquire("held", a, Nanos(1s), 2).ok());
  ASSERT_TRUE(wait_acquire("held", tok(), Nanos(1h), Nanos(1s), 2).ok());
  ASSERT_TRUE(wait_acquire("held", tok(), Nanos(1h), Nanos(1s), 2).ok());
  const LockInfo before = info("held");
  const auto stats_before = table_.stats();
  const std::string long_name(600, 'x');
  const std::string nul_name("a\0b", 3);
  struct Case {
    AcquireRequest r;
    const char* want;
  };
  std::vector<Case> cases;
  cases.push_back({req("", tok()), "lock name is empty"});
  cases.push_back(
      {req(long_name, tok()), "lock name is 600 bytes; the limit is 512"});
  cases.push_back({req(nul_name, tok()), "lock name contains a NUL byte"});
  cases.push_back(
      {req("held", tok(), Nanos(0), 2), "TTL 0ms is out of range (1ms .. 7d)"});
  cases.push_back({req("held", tok(), Nanos(8 * 24h), 2), "out of range"});
  cases.push_back(
      {req("held", tok(), Nanos(1s), 0), "capacity must be at least 1"});
  cases.push_back({req("held", tok(), Nanos(1s), 3), "has capacity 2"});
  AcquireRequest label = req("held", tok(), Nanos(1s), 2);
  std::string long_label(300, 'l');
  label.label = long_label;
  cases.push_back({label, "label"});
  AcquireRequest zero = req("held", OwnerToken{}, Nanos(1s), 2);
  cases.push_back({zero, "zero"});
  for (auto& c : cases) {
    c.r.wait_deadline = clock_.now() + Nanos(1h);
    auto r = table_.acquire(c.r);
    ASSERT_FALSE(r.ok()) << c.want;
    EXPECT_EQ(r.error().code(), Errc::invalid_argument);
    EXPECT_NE(r.error().message().find(c.want), std::string::npos)
        << r.error().message();
  }
  EXPECT_EQ(table_.extend("held", a, Nanos(-1)).error().code(),
            Errc::invalid_argument);
  EXPECT_EQ(table_.release("", a).error().code(), Errc::invalid_argument);
  std::vector<std::string_view> dup = {"held", "held"};
  MultiRequest m;
  m.names = dup;
  m.reservation = tok();
  m.ttl = Nanos(1s);
  m.capacity = 2;
  m.queue_deadline = clock_.now() + Nanos(1h);
  EXPECT_EQ(table_.acquire_multi(m).error().code(), Errc::invalid_argument);
  std::vector<std::string_view> partly_bad = {"fresh", "held", ""};
  m.names = partly_bad;
  EXPECT_EQ(table_.acquire_multi(m).error().code(), Errc::invalid_argument);
  std::vector<std::string_view> mismatch = {"fresh", "held"};
  m.names = mismatch;
  m.capacity = 1;
  EXPECT_EQ(table_.acquire_multi(m).error().code(), Errc::invalid_argument);
  const LockInfo after = info("held");
  EXPECT_EQ(after.holders.size(), before.holders.size());
  EXPECT_EQ(after.waiters.size(), before.waiters.size());
  EXPECT_EQ(after.last_fencing_token, before.last_fencing_token);
  EXPECT_EQ(info("fresh").holders.size(), 0u);
  const auto stats_after = table_.stats();
  EXPECT_EQ(stats_after.locks, stats_before.locks);
  EXPECT_EQ(stats_after.leases, stats_before.leases);
  EXPECT_EQ(stats_after.waiters, stats_before.waiters);
  EXPECT_EQ(stats_after.grants, stats_before.grants);
}

TEST_F(LockTableTest, TenThousandWaitersOnOneLock) {
  const int n = 10'000;
  auto start = std::chrono::steady_clock::now();
  OwnerToken current = tok();
  ASSERT_TRUE(try_acquire("hot", current).ok());
  std::vector<OwnerToken> w;
  w.reserve(n);
  for (int i = 0; i < n; ++i) {
    w.push_back(tok());
    auto r = wait_acquire("hot", w.back(), Nanos(1h));
    ASSERT_TRUE(r.ok());
    ASSERT_EQ(r->position, static_cast<std::size_t>(i + 1));
  }
  // Half leave from the middle of the queue (timeouts via withdrawal).
  for (int i = 1; i < n; i += 2) {
    ASSERT_TRUE(table_.release("hot", w[i])->withdrew_waiter);
  }
  for (int i = 0; i < n; i += 2) {
    ASSERT_TRUE(table_.release("hot", current)->was_held);
    auto ev = table_.take_events();
    ASSERT_EQ(ev.size(), 1u);
    ASSERT_EQ(ev[0].token, w[i]);
    current = w[i];
  }
  auto secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  EXPECT_LT(secs, 5.0);
}

TEST_F(LockTableTest, TenThousandWaitersTimeOutAtOnce) {
  ASSERT_TRUE(try_acquire("hot", tok(), Nanos(2h)).ok());
  const Instant deadline = clock_.now() + Nanos(1s);
  for (int i = 0; i < 10'000; ++i) {
    AcquireRequest r = req("hot", tok());
    r.wait_deadline = deadline;
    ASSERT_TRUE(table_.acquire(r).ok());
  }
  clock_.advance(1s);
  table_.advance();
  EXPECT_EQ(table_.take_events().size(), 10'000u);
  EXPECT_TRUE(info("hot").waiters.empty());
}

class RecordingSink : public ChangeSink {
 public:
  void lease_put(const LeaseRecord& lease) override {
    leases[{lease.name, lease.token}] = lease;
    ++puts;
  }
  void lease_removed(std::string_view name, const OwnerToken& token) override {
    leases.erase({std::string(name), token});
    ++removes;
  }
  void counter_put(std::string_view name, std::int64_t value) override {
    counters[std::string(name)] = value;
  }
  void waiter_left(std::string_view name, std::string_view label, bool,
                   Instant arrival) override {
    left.push_back({std::string(name) + "/" + std::string(label), arrival});
  }
  std::map<std::pair<std::string, OwnerToken>, LeaseRecord> leases;
  std::vector<std::pair<std::string, Instant>> left;  // waiter_left calls
  std::map<std::string, std::int64_t> counters;
  int puts = 0, removes = 0;
};

// Every way out of a queue tells the sink, with the waiter's arrival (what
// batond's history draws as a past wait); a grant at once tells nothing.
TEST_F(LockTableTest, ChangeSinkHearsEveryWaiterLeave) {
  RecordingSink sink;
  table_.set_change_sink(&sink);
  auto a = tok(), b = tok(), c = tok();
  ASSERT_TRUE(try_acquire("w", a, Nanos(1h)).ok());
  EXPECT_TRUE(sink.left.empty());
  const Instant arrival = clock_.now();
  ASSERT_TRUE(wait_acquire("w", b, Nanos(1h), Nanos(1h)).ok());  // queues
  ASSERT_TRUE(wait_acquire("w", c, Nanos(2s), Nanos(1h)).ok());  // times out
  EXPECT_TRUE(sink.left.empty());
  clock_.advance(3s);
  table_.advance();
  ASSERT_EQ(sink.left.size(), 1u);
  EXPECT_EQ(sink.left[0].first, "w/label");
  EXPECT_EQ(sink.left[0].second, arrival);
  ASSERT_TRUE(table_.release("w", a).ok());  // grants b
  EXPECT_EQ(sink.left.size(), 2u);
  auto d = tok();
  ASSERT_TRUE(wait_acquire("w", d, Nanos(1h), Nanos(1h)).ok());
  ASSERT_TRUE(table_.release("w", d).ok());  // withdrawn
  EXPECT_EQ(sink.left.size(), 3u);
  table_.set_change_sink(nullptr);
}

TEST_F(LockTableTest, ChangeSinkAndRestoreRoundTrip) {
  RecordingSink sink;
  table_.set_change_sink(&sink);
  auto a = tok(), b = tok(), c = tok(), d = tok();
  ASSERT_TRUE(try_acquire("one", a, Nanos(10s)).ok());
  ASSERT_TRUE(try_acquire("two", b, Nanos(100ms), 2).ok());
  AcquireRequest re = req("three", c, Nanos(5s));
  re.reentrancy_key = "k";
  ASSERT_TRUE(table_.acquire(re).ok());
  re.token = d;
  ASSERT_TRUE(table_.acquire(re).ok());
  ASSERT_TRUE(table_.extend("one", a, Nanos(20s)).ok());
  ASSERT_TRUE(table_.counter_add("n", 5).ok());
  ASSERT_TRUE(try_acquire("gone", tok()).ok());
  clock_.advance(100ms);  // "two" expires
  table_.advance();
  auto snap = table_.snapshot_leases();
  ASSERT_EQ(snap.size(), 3u);
  ASSERT_EQ(sink.leases.size(), 3u);  // "two" expired and was removed
  ASSERT_EQ(snapshot_holders("gone").size(), 1u);
  ASSERT_TRUE(table_.release("gone", snapshot_holders("gone")[0])->was_held);
  ASSERT_EQ(sink.leases.size(), 2u);
  EXPECT_EQ(sink.leases.at({"three", c}).holds, 2u);
  EXPECT_EQ(sink.leases.at({"three", c}).aliases.size(), 1u);
  EXPECT_EQ(sink.counters.at("n"), 5);
  EXPECT_EQ(sink.leases.at({"one", a}).ttl, Nanos(20s));

  // Restore into a fresh table from what the sink saw.
  LockTable fresh(clock_);
  RecordingSink fresh_sink;
  fresh.set_change_sink(&fresh_sink);
  fresh.raise_fencing_floor(table_.fencing_high_water());
  for (auto& [key, rec] : sink.leases)
    ASSERT_TRUE(fresh.restore_lease(rec).ok());
  for (auto& [name, v] : sink.counters) fresh.restore_counter(name, v);
  EXPECT_EQ(fresh_sink.puts, 0);
  EXPECT_TRUE(fresh.take_events().empty());
  EXPECT_EQ(fresh.counter_get("n").value(), 5);
  EXPECT_EQ(fresh.fencing_high_water(), table_.fencing_high_water());
  auto fi = fresh.describe("three").value();
  ASSERT_EQ(fi.holders.size(), 1u);
  EXPECT_EQ(fi.holders[0].holds, 2u);
  EXPECT_EQ(fi.last_fencing_token, info("three").last_fencing_token);
  // Idempotent retry with the alias works after restore.
  auto retry = fresh.acquire(re);
  ASSERT_TRUE(retry.ok());
  EXPECT_EQ(retry->grant.token, c);
  EXPECT_EQ(retry->grant.holds, 2u);
  // Still exclusive and new grants are above the old high water.
  EXPECT_FALSE(fresh.acquire(req("one", tok())).ok());
  auto g = fresh.acquire(req("new", tok()));
  ASSERT_TRUE(g.ok());
  EXPECT_GT(g->grant.fencing_token, table_.fencing_high_water());
  // Expired records are ignored.
  LeaseRecord old = sink.leases.begin()->second;
  old.name = "old";
  old.token = tok();
  old.expiry = clock_.now();
  EXPECT_TRUE(fresh.restore_lease(old).ok());
  EXPECT_TRUE(fresh.describe("old")->holders.empty());
  auto fsnap = fresh.snapshot_leases();
  EXPECT_EQ(fsnap.size(), 3u);
  EXPECT_EQ(fresh.snapshot_counters().size(), 1u);
}

TEST_F(LockTableTest, DescribeAndList) {
  auto li = info("nothing");
  EXPECT_EQ(li.capacity, 1u);
  EXPECT_TRUE(li.holders.empty());
  EXPECT_TRUE(li.free());
  ASSERT_TRUE(try_acquire("app/a", tok(), Nanos(1500ms)).ok());
  ASSERT_TRUE(try_acquire("app/b", tok(), Nanos(1h)).ok());
  ASSERT_TRUE(try_acquire("zzz", tok(), Nanos(1h)).ok());
  clock_.advance(Nanos(1500ms) - Nanos(1));
  auto a = info("app/a");
  EXPECT_EQ(a.holders[0].time_left, 0ms);
  auto l = table_.list("app/", 10);
  ASSERT_EQ(l.size(), 2u);
  EXPECT_EQ(l[0].name, "app/a");
  EXPECT_EQ(l[1].name, "app/b");
  EXPECT_EQ(table_.list("", 2).size(), 2u);
  EXPECT_EQ(table_.list("", 10).size(), 3u);
  EXPECT_EQ(table_.stats().locks, 3u);
}

// The compact storage keeps the first holder inline and the others aside:
// releasing the inline one and granting again must keep grant order,
// lookups by token and alias, and expiry order.
TEST_F(LockTableTest, SemaphoreSlotsKeepGrantOrderAndLookups) {
  std::vector<OwnerToken> t;
  for (int i = 0; i < 4; ++i) t.push_back(tok());
  std::vector<std::uint64_t> fence;
  for (int i = 0; i < 3; ++i) {
    auto r = try_acquire("sem", t[i], Nanos(10s - i * 1s), 3);
    ASSERT_TRUE(r.ok());
    fence.push_back(r->grant.fencing_token);
  }
  // Release the first (inline) holder, then grant a fourth.
  ASSERT_TRUE(table_.release("sem", t[0])->was_held);
  auto r3 = try_acquire("sem", t[3], Nanos(1s), 3);
  ASSERT_TRUE(r3.ok());
  auto li = info("sem");
  ASSERT_EQ(li.holders.size(), 3u);
  EXPECT_EQ(li.holders[0].fencing_token, fence[1]);
  EXPECT_EQ(li.holders[1].fencing_token, fence[2]);
  EXPECT_EQ(li.holders[2].fencing_token, r3->grant.fencing_token);
  // Every holder is found by its token (idempotent retry, extend).
  for (int i : {1, 2, 3}) {
    auto again = try_acquire("sem", t[i], Nanos(1s), 3);
    ASSERT_TRUE(again.ok());
    EXPECT_TRUE(again->granted);
    EXPECT_TRUE(table_.extend("sem", t[i], Nanos(5s)).ok());
  }
  EXPECT_FALSE(table_.extend("sem", t[0], Nanos(5s)).ok());
  // Shorter TTLs expire first, one at a time.
  ASSERT_TRUE(table_.extend("sem", t[3], Nanos(2s)).ok());
  ASSERT_TRUE(table_.extend("sem", t[1], Nanos(3s)).ok());
  clock_.advance(Nanos(2s));
  EXPECT_EQ(info("sem").holders.size(), 2u);
  clock_.advance(Nanos(1s));
  EXPECT_EQ(info("sem").holders.size(), 1u);
  clock_.advance(Nanos(2s));
  EXPECT_TRUE(info("sem").holders.empty());
  EXPECT_EQ(table_.stats().locks, 0u);
  EXPECT_EQ(table_.stats().leases, 0u);
  EXPECT_FALSE(table_.next_deadline().has_value());
}

TEST_F(LockTableTest, ManyLocksIndexGrowsAndShrinks) {
  std::vector<OwnerToken> t;
  constexpr int kLocks = 5000;
  for (int i = 0; i < kLocks; ++i) {
    t.push_back(tok());
    ASSERT_TRUE(
        try_acquire("n/" + std::to_string(i), t.back(), Nanos(1h)).ok());
  }
  EXPECT_EQ(table_.stats().locks, static_cast<std::size_t>(kLocks));
  // Release every other one; the rest are still found.
  for (int i = 0; i < kLocks; i += 2) {
    ASSERT_TRUE(table_.release("n/" + std::to_string(i), t[i])->was_held);
  }
  for (int i = 1; i < kLocks; i += 2) {
    ASSERT_TRUE(table_.extend("n/" + std::to_string(i), t[i], Nanos(1h)).ok())
        << i;
  }
  EXPECT_EQ(table_.stats().locks, static_cast<std::size_t>(kLocks / 2));
  auto l = table_.list("n/1", 1000);
  ASSERT_FALSE(l.empty());
  EXPECT_EQ(l[0].name, "n/1");
  EXPECT_TRUE(std::is_sorted(
      l.begin(), l.end(),
      [](const LockInfo& a, const LockInfo& b) { return a.name < b.name; }));
  // Labels are interned but reported per holder.
  EXPECT_EQ(info("n/1").holders.at(0).label, "label");
}

}  // namespace
}  // namespace baton::core
