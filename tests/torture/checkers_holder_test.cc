// tests/torture/checkers_holder_test.cc — checkers on hand-written logs.
// Checker 8b (rule 13's order: a lost notice must come before any grant
// that needed the lease gone): two shared holds granted together are no
// conflict, a shared hold and an exclusive one are. Checker 9 (rule 18): a
// read during a write is flagged while the writer's lease lasts, not after.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/torture/torture.h"

namespace baton::torture {
namespace {

Op op(int worker, std::string kind, std::int64_t invoke_ms,
      std::int64_t complete_ms, std::string result, std::uint64_t token,
      bool shared = false) {
  Op o;
  o.worker = worker;
  o.kind = std::move(kind);
  o.lock = name_prefix() + "m0";  // a mutex (capacity 1)
  o.invoke_us = invoke_ms * 1000;
  o.complete_us = complete_ms * 1000;
  o.result = std::move(result);
  o.fencing = token;
  o.shared = shared;
  return o;
}

// Worker 1 holds token 5 under a keeper and hears of its loss at 2000 ms;
// worker 2 is granted token 6 at 1000.1 ms, after worker 1's grant.
std::vector<Op> logs(bool first_shared, bool second_shared) {
  std::vector<Op> ops;
  ops.push_back(op(1, "acquire", 900, 1000, "ok", 5, first_shared));
  Op d = op(1, "deadline", 1000, 1900, "grant", 5);  // safe deadline 1.9 s
  ops.push_back(d);
  Op other = op(2, "acquire", 901, 1000, "ok", 6, second_shared);
  other.complete_us += 100;  // its reply arrived 100 µs later
  ops.push_back(other);
  ops.push_back(op(1, "lost", 2000, 2000, "lock_lost", 5));
  return ops;
}

int notice_order_flags(const Judged& j) {
  int n = 0;
  for (const Violation& v : j.violations) n += v.checker == "8b-notice-order";
  return n;
}

TEST(CheckerHolder, TwoSharedHoldsGrantedTogetherAreNoConflict) {
  Options o;
  const Judged j = check_holder(o, logs(true, true), {});
  EXPECT_EQ(notice_order_flags(j), 0);
  EXPECT_EQ(j.counts.at("keeper_notices_judged"), 1);
}

TEST(CheckerHolder, AnExclusiveGrantBeforeTheNoticeIsFlagged) {
  Options o;
  EXPECT_EQ(notice_order_flags(check_holder(o, logs(true, false), {})), 1);
  EXPECT_EQ(notice_order_flags(check_holder(o, logs(false, true), {})), 1);
  EXPECT_EQ(notice_order_flags(check_holder(o, logs(false, false), {})), 1);
}

// Writer 1 holds token 4 until 1000 ms (store expiry) and begins a write at
// 900 ms that the resource still has in progress when reader 2 (token 6)
// reads at `read_ms`. `safe_ms` > 0: the lease's safe deadline (its
// "deadline" line).
int read_during_write_flags(std::int64_t read_ms, std::int64_t safe_ms = 0) {
  std::vector<Op> ops;
  Op g = op(1, "acquire", 800, 850, "ok", 4);
  g.expires_ms = 1000;
  ops.push_back(g);
  if (safe_ms > 0) {
    Op d = op(1, "deadline", 850, safe_ms, "grant", 4);
    d.expires_ms = 1000;
    ops.push_back(d);
  }
  Write w;
  w.worker = 1;
  w.lock = g.lock;
  w.fencing = 4;
  w.accepted = true;
  w.at_us = 900'000;
  Write d;
  d.verb = 'D';
  d.worker = 2;
  d.lock = g.lock;
  d.fencing = 6;
  d.accepted = true;
  d.at_us = read_ms * 1000;
  d.writer = 1;
  d.writer_token = 4;
  d.write_begun_us = 900'000;
  Options o;
  const Judged j = check_all(o, ops, {w, d}, {}, 0, false);
  int n = 0;
  for (const Violation& v : j.violations)
    n += v.checker == "9-read-during-write";
  return n;
}

TEST(CheckerReadWrite, AReadWhileTheWritersLeaseLastsIsFlagged) {
  EXPECT_EQ(read_during_write_flags(950), 1);
}

TEST(CheckerReadWrite, AReadAfterTheWritersLeaseEndedIsFencingsCase) {
  // The write outlived its lease (writer killed before its "E", or held up
  // in the resource's SQL check while the store was frozen).
  EXPECT_EQ(read_during_write_flags(1100), 0);
}

TEST(CheckerReadWrite, AReadAfterTheWritersSafeDeadlineIsFencingsCase) {
  // A late grant left 70 ms of safe time (deadline 920 ms); the write begun
  // at 900 ms outlasted it and the keeper gave the lease back.
  EXPECT_EQ(read_during_write_flags(950, 920), 0);
  // Before the safe deadline the writer still held it: flagged.
  EXPECT_EQ(read_during_write_flags(950, 980), 1);
}

TEST(CheckerHolder, ModeSurvivesTheWorkerLogLine) {
  // read_ops() takes logs written before the mode column (11 fields) too.
  const std::string path =
      ::testing::TempDir() + "/checkers_holder_test_w0.log";
  {
    std::FILE* f = std::fopen(path.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs("3 acquire torture-m0 10 20 ok 7 30 500 0 0 1\n", f);
    std::fputs("3 acquire torture-m0 40 50 ok 8 60 500 0 0\n", f);
    std::fclose(f);
  }
  int bad = 0;
  const auto ops = read_ops(path, &bad);
  ASSERT_EQ(ops.size(), 2u);
  EXPECT_EQ(bad, 0);
  EXPECT_TRUE(ops[0].shared);
  EXPECT_FALSE(ops[1].shared);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace baton::torture
