// tests/torture/checkers_holder_test.cc — checker 8b (rule 13's order: a
// lost notice must come before any grant that needed the lease gone) on
// hand-written logs: two shared holds granted together are no conflict, a
// shared hold and an exclusive one are.
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
