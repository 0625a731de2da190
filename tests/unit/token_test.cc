#include <gtest/gtest.h>

#include <set>

#include "baton/lease.h"

namespace baton {
namespace {

TEST(OwnerToken, RandomIsUniqueAndNonZero) {
  std::set<OwnerToken> seen;
  for (int i = 0; i < 1000; ++i) {
    OwnerToken t = OwnerToken::random();
    EXPECT_FALSE(t.is_zero());
    EXPECT_TRUE(seen.insert(t).second);
  }
}

TEST(OwnerToken, ParseAndPrint) {
  OwnerToken t{0x0123456789abcdefULL, 0xfedcba9876543210ULL};
  EXPECT_EQ(t.to_string(), "0123456789abcdeffedcba9876543210");
  auto p = OwnerToken::parse("0123456789ABCDEFfedcba9876543210");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(*p, t);
  OwnerToken r = OwnerToken::random();
  EXPECT_EQ(OwnerToken::parse(r.to_string()).value(), r);
  EXPECT_EQ(OwnerToken{}.to_string(), std::string(32, '0'));
}

TEST(OwnerToken, ParseRejectsBadInput) {
  for (const char* bad :
       {"", "abc", "0123456789abcdef0123456789abcde",
        "0123456789abcdef0123456789abcdef0", "0123456789abcdeg0123456789abcdef",
        " 123456789abcdef0123456789abcdef"}) {
    auto p = OwnerToken::parse(bad);
    ASSERT_FALSE(p.ok()) << bad;
    EXPECT_EQ(p.error().code(), Errc::invalid_argument);
    EXPECT_NE(p.error().message().find("owner token"), std::string::npos);
  }
}

TEST(Lease, TimeLeft) {
  Lease l;
  EXPECT_EQ(l.time_left(), std::chrono::milliseconds{0});
  EXPECT_FALSE(l.valid_now());
  l.local_deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(10);
  EXPECT_TRUE(l.valid_now());
  EXPECT_GT(l.time_left(), std::chrono::milliseconds{9000});
  EXPECT_LE(l.time_left(), std::chrono::milliseconds{10000});
}

}  // namespace
}  // namespace baton
