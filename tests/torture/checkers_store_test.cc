// tests/torture/checkers_store_test.cc — checker 10 (the store's own
// exclusion) on hand-written logs: two leases of a mutex the store surely
// held at one instant are an overlap, counted under the faults of the time;
// a release or a lease's end before the next grant is none; shared holds do
// not conflict; a semaphore of 3 takes three holders; the overlap is a
// violation only when the resource accepted the older holder after the
// newer. And checker 6's first-call rule.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "tests/torture/torture.h"

namespace baton::torture {
namespace {

Op op(int worker, std::string kind, std::int64_t invoke_ms,
      std::int64_t complete_ms, std::uint64_t token, std::string lock = "m0") {
  Op o;
  o.worker = worker;
  o.kind = std::move(kind);
  o.lock = name_prefix() + lock;
  o.invoke_us = invoke_ms * 1000;
  o.complete_us = complete_ms * 1000;
  o.result = "ok";
  o.fencing = token;
  return o;
}

Write write(int worker, std::uint64_t token, std::int64_t at_ms,
            bool accepted) {
  Write w;
  w.worker = worker;
  w.lock = name_prefix() + "m0";
  w.fencing = token;
  w.at_us = at_ms * 1000;
  w.accepted = accepted;
  return w;
}

std::int64_t count(const Judged& j, const std::string& k) {
  const auto it = j.counts.find(k);
  return it == j.counts.end() ? 0 : it->second;
}

// TTL 1 s: worker 1's lease (granted at 10 ms, invoked at 0) is surely held
// to ~0.988 s; worker 2 is granted the lock at 500 ms.
std::vector<Op> two_grants() {
  return {op(1, "acquire", 0, 10, 5), op(2, "acquire", 400, 500, 6)};
}

TEST(CheckerStore, AGrantWhileAnotherLeaseSurelyLivesIsAnOverlap) {
  Options o;
  Fault f{"kill_store", -1, 300'000, 350'000, ""};
  const Judged j = check_store_exclusion(o, two_grants(), {}, {f});
  EXPECT_EQ(count(j, "store_overlaps"), 1);
  EXPECT_EQ(count(j, "store_overlaps_under_kill_store"), 1);
  EXPECT_TRUE(j.violations.empty());
  ASSERT_EQ(j.findings.size(), 1u);
  EXPECT_NE(j.findings[0].what.find("faults: kill_store"), std::string::npos)
      << j.findings[0].what;
}

TEST(CheckerStore, AReleaseOrTheLeasesEndBeforeTheGrantIsNoOverlap) {
  Options o;
  auto ops = two_grants();
  ops.push_back(op(1, "release", 450, 460, 5));
  EXPECT_EQ(count(check_store_exclusion(o, ops, {}, {}), "store_overlaps"), 0);
  // Granted again only after the first lease's TTL from its invoke.
  const std::vector<Op> late = {op(1, "acquire", 0, 10, 5),
                                op(2, "acquire", 900, 1000, 6)};
  EXPECT_EQ(count(check_store_exclusion(o, late, {}, {}), "store_overlaps"), 0);
  // An extend (invoked at 600 ms) keeps the first lease to ~1.59 s.
  auto extended = late;
  extended.push_back(op(1, "extend", 600, 610, 5));
  EXPECT_EQ(count(check_store_exclusion(o, extended, {}, {}), "store_overlaps"),
            1);
}

// A grant whose store expiry is earlier than its invoke + TTL (etcd's
// shared lease, granted before the call) is held only to that expiry.
TEST(CheckerStore, AGrantIsHeldToItsOwnStoreExpiryWhenThatIsEarlier) {
  Options o;
  auto ops = two_grants();
  ops[0].expires_ms = 450;  // the lease was granted 550 ms before the call
  EXPECT_EQ(count(check_store_exclusion(o, ops, {}, {}), "store_overlaps"), 0);
  ops[0].expires_ms = 2000;  // later than invoke + TTL: the TTL bound holds
  EXPECT_EQ(count(check_store_exclusion(o, ops, {}, {}), "store_overlaps"), 1);
  // A server's clock stepped then: the store's expiry is not compared.
  ops[0].expires_ms = 450;
  Fault step{"server_clock_step", -1, 0, 100'000, ""};
  EXPECT_EQ(count(check_store_exclusion(o, ops, {}, {step}), "store_overlaps"),
            1);
}

// A worker's clean exit ends what it held (its client's close), and so
// does a release it sent (logged before the call).
TEST(CheckerStore, AWorkersCleanExitOrASentReleaseEndsItsLease) {
  Options o;
  auto ops = two_grants();
  EXPECT_EQ(count(check_store_exclusion(o, ops, {}, {}), "store_overlaps"), 1);
  Op exit = op(1, "exit", 450, 450, 0, "-");
  ops.push_back(exit);
  EXPECT_EQ(count(check_store_exclusion(o, ops, {}, {}), "store_overlaps"), 0);
  // A release sent by a worker killed before it could log the reply.
  ops = two_grants();
  ops.push_back(op(1, "release_begin", 450, 450, 5));
  EXPECT_EQ(count(check_store_exclusion(o, ops, {}, {}), "store_overlaps"), 0);
}

TEST(CheckerStore, SharedHoldsDoNotConflictAndASemaphoreTakesItsCapacity) {
  Options o;
  auto ops = two_grants();
  for (Op& x : ops) x.shared = true;
  EXPECT_EQ(count(check_store_exclusion(o, ops, {}, {}), "store_overlaps"), 0);
  ops[1].shared = false;
  EXPECT_EQ(count(check_store_exclusion(o, ops, {}, {}), "store_overlaps"), 1);
  std::vector<Op> sem;
  for (int w = 1; w <= 3; ++w)
    sem.push_back(op(w, "acquire", 0, 10 * w, w, "s0"));
  EXPECT_EQ(count(check_store_exclusion(o, sem, {}, {}), "store_overlaps"), 0);
  sem.push_back(op(4, "acquire", 100, 200, 4, "s0"));
  EXPECT_EQ(count(check_store_exclusion(o, sem, {}, {}), "store_overlaps"), 1);
}

// An overlap whose older holders over capacity had been told of their loss
// before the newer grant completed is "after notice"; one with a holder
// still unaware (told only later, or never) is "before notice".
TEST(CheckerStore, AnOverlapIsClassedByWhetherTheOlderHolderWasToldFirst) {
  Options o;
  auto ops = two_grants();  // worker 2 completes its grant at 500 ms
  ops.push_back(op(1, "lost", 450, 450, 5));
  Judged j = check_store_exclusion(o, ops, {}, {});
  EXPECT_EQ(count(j, "store_overlaps"), 1);
  EXPECT_EQ(count(j, "store_overlaps_after_notice"), 1);
  EXPECT_EQ(count(j, "store_overlaps_before_notice"), 0);
  ASSERT_EQ(j.findings.size(), 1u);
  EXPECT_NE(j.findings[0].what.find("told 50 ms before"), std::string::npos)
      << j.findings[0].what;
  ops.back().invoke_us = 550'000;  // told after the newer grant
  j = check_store_exclusion(o, ops, {}, {});
  EXPECT_EQ(count(j, "store_overlaps_after_notice"), 0);
  EXPECT_EQ(count(j, "store_overlaps_before_notice"), 1);
  // A semaphore of 3 with four holders: one told before, so the other
  // three fit its capacity (after notice); unless that notice is another
  // lease's.
  std::vector<Op> sem;
  for (int w = 1; w <= 3; ++w)
    sem.push_back(op(w, "acquire", 0, 10 * w, w, "s0"));
  sem.push_back(op(4, "acquire", 100, 200, 4, "s0"));
  sem.push_back(op(2, "lost", 150, 150, 2, "s0"));
  j = check_store_exclusion(o, sem, {}, {});
  EXPECT_EQ(count(j, "store_overlaps_after_notice"), 1);
  sem.back().fencing = 9;
  j = check_store_exclusion(o, sem, {}, {});
  EXPECT_EQ(count(j, "store_overlaps_before_notice"), 1);
}

TEST(CheckerStore, AnOverlapIsAViolationOnlyIfTheResourceLetTheOlderActLast) {
  Options o;
  // Fencing caught it: the older holder's write after the newer's was
  // rejected.
  const std::vector<Write> fenced = {
      write(1, 5, 300, true), write(2, 6, 600, true), write(1, 5, 700, false)};
  Judged j = check_store_exclusion(o, two_grants(), fenced, {});
  EXPECT_EQ(count(j, "store_overlaps"), 1);
  EXPECT_TRUE(j.violations.empty());
  // No fencing: the resource accepted it.
  const std::vector<Write> open = {
      write(1, 5, 300, true), write(2, 6, 600, true), write(1, 5, 700, true)};
  j = check_store_exclusion(o, two_grants(), open, {});
  ASSERT_EQ(j.violations.size(), 1u);
  EXPECT_EQ(j.violations[0].checker, "10-store-exclusion");
}

// Checker 6 (FIFO): a waiter overtaken by a grant to a request made
// 200 ms after it is flagged — unless the wait was the worker's first
// call, whose request reached the store only after the client's setup.
TEST(CheckerFifo, AnOvertakenWaiterIsFlaggedUnlessItWasItsFirstCall) {
  Options o;
  auto fifo_flags = [&](const std::vector<Op>& ops) {
    const Judged j = check_all(o, ops, {}, {}, 0, true);
    return std::count_if(j.violations.begin(), j.violations.end(),
                         [](const auto& v) { return v.checker == "6-fifo"; });
  };
  Op waiter = op(1, "acquire", 100, 1000, 7);
  waiter.wait_ms = 5000;
  const Op later = op(2, "acquire", 300, 400, 6);
  const Op earlier_call = op(1, "try", 0, 5, 0);
  EXPECT_EQ(fifo_flags({earlier_call, waiter, later}), 1);
  EXPECT_EQ(fifo_flags({waiter, later}), 0);
}

}  // namespace
}  // namespace baton::torture
