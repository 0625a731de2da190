#include "baton/error.h"

#include <gtest/gtest.h>

namespace baton {
namespace {

TEST(Errc, NamesRoundTrip) {
  for (int i = 1; i <= 7; ++i) {
    Errc c = static_cast<Errc>(i);
    Errc back{};
    ASSERT_TRUE(errc_from_name(errc_name(c), &back)) << errc_name(c);
    EXPECT_EQ(back, c);
  }
  EXPECT_EQ(errc_name(Errc::not_acquired), "not_acquired");
  EXPECT_EQ(errc_name(Errc::invalid_argument), "invalid_argument");
  Errc out = Errc::internal;
  EXPECT_FALSE(errc_from_name("nope", &out));
  EXPECT_EQ(out, Errc::internal);
}

TEST(Errc, Retryable) {
  EXPECT_TRUE(errc_retryable(Errc::not_acquired));
  EXPECT_TRUE(errc_retryable(Errc::timeout));
  EXPECT_TRUE(errc_retryable(Errc::unavailable));
  EXPECT_FALSE(errc_retryable(Errc::lock_lost));
  EXPECT_FALSE(errc_retryable(Errc::invalid_argument));
  EXPECT_FALSE(errc_retryable(Errc::permission_denied));
  EXPECT_FALSE(errc_retryable(Errc::internal));
}

TEST(Error, ToStringAndHolders) {
  Error e(Errc::invalid_argument, "lock name is empty");
  EXPECT_EQ(e.to_string(), "invalid_argument: lock name is empty");
  EXPECT_FALSE(e.retryable());
  Error h = Error(Errc::not_acquired, "held").with_holders({{"me", 3, {}, 1}});
  ASSERT_EQ(h.holders().size(), 1u);
  EXPECT_EQ(h.holders()[0].fencing_token, 3u);
}

TEST(Result, ValueAndError) {
  Result<int> ok = 5;
  EXPECT_TRUE(ok.ok());
  EXPECT_EQ(*ok, 5);
  Result<int> bad = Error(Errc::timeout, "late");
  EXPECT_FALSE(bad);
  EXPECT_EQ(bad.error().code(), Errc::timeout);
  EXPECT_EQ(bad.value_or(7), 7);
  Status s;
  EXPECT_TRUE(s.ok());
  s.value();
  Status f = Error(Errc::internal, "x");
  EXPECT_EQ(f.error().message(), "x");
  EXPECT_EQ(std::move(f).error().code(), Errc::internal);
}

TEST(ResultDeathTest, BadAccessAborts) {
  Result<int> bad = Error(Errc::timeout, "late");
  EXPECT_DEATH((void)bad.value(), "timeout: late");
  Status ok;
  EXPECT_DEATH((void)ok.error(), "success");
}

}  // namespace
}  // namespace baton
