// tests/unit/lock_table_shared_test.cc — rule 18 (read-write locks) in
// core::LockTable on a manual clock: one FIFO queue across both kinds,
// consecutive readers granted together, expiry, restore of shared leases.
#include "lock_table_fixture.h"

namespace baton::core {
namespace {

AcquireRequest shared_req(AcquireRequest r) {
  r.shared = true;
  return r;
}

TEST_F(LockTableTest, SharedReadersTogetherAndOneQueueAcrossKinds) {
  const OwnerToken r1 = tok(), r2 = tok(), w = tok(), r3 = tok(), r4 = tok();
  auto a = table_.acquire(shared_req(req("rw", r1)));
  auto b = table_.acquire(shared_req(req("rw", r2)));
  ASSERT_TRUE(a.ok() && a->granted && b.ok() && b->granted);
  EXPECT_TRUE(a->grant.shared && b->grant.shared);
  EXPECT_GT(b->grant.fencing_token, a->grant.fencing_token);
  // A writer queues behind the readers; a reader behind the writer too.
  AcquireRequest wr = req("rw", w);
  wr.wait_deadline = clock_.now() + 10s;
  auto wq = table_.acquire(wr);
  ASSERT_TRUE(wq.ok());
  EXPECT_FALSE(wq->granted);
  AcquireRequest late = shared_req(req("rw", r3));
  late.wait_deadline = clock_.now() + 10s;
  auto lq = table_.acquire(late);
  ASSERT_TRUE(lq.ok());
  EXPECT_FALSE(lq->granted) << "a reader overtook a waiting writer";
  EXPECT_EQ(lq->position, 2u);
  AcquireRequest late2 = shared_req(req("rw", r4));
  late2.wait_deadline = clock_.now() + 10s;
  ASSERT_FALSE(table_.acquire(late2)->granted);
  // A try, of either kind, does not overtake.
  auto t = table_.acquire(shared_req(req("rw", tok())));
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.error().code(), Errc::not_acquired);
  auto li = info("rw");
  ASSERT_EQ(li.holders.size(), 2u);
  EXPECT_TRUE(li.holders[0].shared && li.holders[1].shared);
  ASSERT_EQ(li.waiters.size(), 3u);
  EXPECT_FALSE(li.waiters[0].shared);
  EXPECT_TRUE(li.waiters[1].shared && li.waiters[2].shared);
  // One reader leaves: nothing is granted; both leave: the writer alone.
  ASSERT_TRUE(table_.release("rw", r1)->was_held);
  EXPECT_EQ(granted_events(), 0u);
  ASSERT_TRUE(table_.release("rw", r2)->was_held);
  std::vector<Event> got;
  ASSERT_EQ(granted_events(&got), 1u);
  EXPECT_EQ(got[0].token, w);
  EXPECT_FALSE(got[0].grant.shared);
  // The writer leaves: both readers behind it are granted together.
  ASSERT_TRUE(table_.release("rw", w)->was_held);
  got.clear();
  ASSERT_EQ(granted_events(&got), 2u);
  EXPECT_EQ(got[0].token, r3);
  EXPECT_EQ(got[1].token, r4);
  EXPECT_TRUE(got[0].grant.shared && got[1].grant.shared);
  EXPECT_GT(got[1].grant.fencing_token, got[0].grant.fencing_token);
  EXPECT_TRUE(info("rw").waiters.empty());
}

TEST_F(LockTableTest, SharedExpiryHandsTheLockToTheWriterAfterTheLastReader) {
  const OwnerToken r1 = tok(), r2 = tok(), w = tok();
  ASSERT_TRUE(table_.acquire(shared_req(req("e", r1, Nanos(1s))))->granted);
  ASSERT_TRUE(table_.acquire(shared_req(req("e", r2, Nanos(3s))))->granted);
  ASSERT_FALSE(wait_acquire("e", w, Nanos(10s))->granted);
  clock_.advance(1500ms);
  table_.advance();
  EXPECT_EQ(granted_events(), 0u) << "the writer was granted beside r2";
  clock_.advance(2s);
  table_.advance();
  std::vector<Event> got;
  ASSERT_EQ(granted_events(&got), 1u);
  EXPECT_EQ(got[0].token, w);
}

TEST_F(LockTableTest, SharedBadInputIsRefused) {
  AcquireRequest r = shared_req(req("bad", tok(), Nanos(1s), 2));
  auto a = table_.acquire(r);
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.error().code(), Errc::invalid_argument);
  EXPECT_NE(a.error().message().find("capacity 1"), std::string::npos);
  r = shared_req(req("bad", tok()));
  r.reentrancy_key = "k";
  a = table_.acquire(r);
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.error().code(), Errc::invalid_argument);
  EXPECT_TRUE(table_.list("", 10).empty());
}

TEST_F(LockTableTest, SharedLeasesAreRestoredWithTheirMode) {
  const OwnerToken r1 = tok(), r2 = tok();
  ASSERT_TRUE(table_.acquire(shared_req(req("s", r1, Nanos(30s))))->granted);
  ASSERT_TRUE(table_.acquire(shared_req(req("s", r2, Nanos(30s))))->granted);
  auto snap = table_.snapshot_leases();
  ASSERT_EQ(snap.size(), 2u);
  EXPECT_TRUE(snap[0].shared && snap[1].shared);
  LockTable fresh(clock_);
  fresh.raise_fencing_floor(table_.fencing_high_water());
  for (const LeaseRecord& r : snap) ASSERT_TRUE(fresh.restore_lease(r).ok());
  // An exclusive record beside them breaks the invariant: refused.
  LeaseRecord x = snap[0];
  x.token = tok();
  x.shared = false;
  EXPECT_FALSE(fresh.restore_lease(x).ok());
  auto w = fresh.acquire(req("s", tok()));
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.error().message().find("held shared by 2 holders"),
            std::string::npos)
      << w.error().to_string();
  auto r3 = fresh.acquire(shared_req(req("s", tok())));
  ASSERT_TRUE(r3.ok() && r3->granted);
  EXPECT_GT(r3->grant.fencing_token, table_.fencing_high_water());
}

}  // namespace
}  // namespace baton::core
