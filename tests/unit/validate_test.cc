#include "core/validate.h"

#include <gtest/gtest.h>

namespace baton::core {
namespace {

using namespace std::chrono_literals;

std::string msg(const Status& s) { return s.ok() ? "" : s.error().message(); }

TEST(Validate, Names) {
  EXPECT_TRUE(validate_name("a").ok());
  EXPECT_TRUE(validate_name(std::string(512, 'x')).ok());
  EXPECT_EQ(msg(validate_name("")), "lock name is empty");
  EXPECT_EQ(msg(validate_name(std::string(600, 'x'))),
            "lock name is 600 bytes; the limit is 512");
  EXPECT_EQ(msg(validate_name(std::string("a\0b", 3))),
            "lock name contains a NUL byte: \"a\\0b\"");
  EXPECT_EQ(msg(validate_name("", "counter name")), "counter name is empty");
  EXPECT_EQ(validate_name("").error().code(), Errc::invalid_argument);
}

TEST(Validate, Ttl) {
  EXPECT_TRUE(validate_ttl(1ms).ok());
  EXPECT_TRUE(validate_ttl(7 * 24h).ok());
  EXPECT_EQ(msg(validate_ttl(0ms)), "TTL 0ms is out of range (1ms .. 7d)");
  EXPECT_EQ(msg(validate_ttl(500us)), "TTL 500us is out of range (1ms .. 7d)");
  EXPECT_EQ(msg(validate_ttl(7 * 24h + 1ms)),
            "TTL 604800001ms is out of range (1ms .. 7d)");
  EXPECT_FALSE(validate_ttl(-5s).ok());
}

// The wire form (whole milliseconds, any int64) reports the same range in
// the same words.
TEST(Validate, TtlInMillisecondsUsesTheSameWords) {
  EXPECT_TRUE(validate_ttl_ms(1).ok());
  EXPECT_TRUE(validate_ttl_ms(604'800'000).ok());
  EXPECT_EQ(msg(validate_ttl_ms(0)), msg(validate_ttl(0ms)));
  EXPECT_EQ(msg(validate_ttl_ms(604'800'001)),
            msg(validate_ttl(7 * 24h + 1ms)));
  EXPECT_EQ(msg(validate_ttl_ms(-1)), "TTL -1ms is out of range (1ms .. 7d)");
  EXPECT_EQ(msg(validate_ttl_ms(INT64_MIN)),
            "TTL -9223372036854775808ms is out of range (1ms .. 7d)");
  EXPECT_EQ(validate_ttl_ms(0).error().code(), Errc::invalid_argument);
}

TEST(Validate, CapacityLabelKeyWait) {
  EXPECT_TRUE(validate_capacity(1).ok());
  EXPECT_NE(msg(validate_capacity(0)).find("capacity must be at least 1"),
            std::string::npos);
  EXPECT_FALSE(validate_capacity(1ULL << 40).ok());
  EXPECT_TRUE(validate_label("").ok());
  EXPECT_FALSE(validate_label(std::string(257, 'l')).ok());
  EXPECT_FALSE(validate_label(std::string("\0", 1)).ok());
  EXPECT_TRUE(validate_reentrancy_key("").ok());
  EXPECT_FALSE(validate_reentrancy_key(std::string(513, 'k')).ok());
  EXPECT_TRUE(validate_wait(0ms).ok());
  EXPECT_TRUE(validate_wait(std::chrono::milliseconds::max()).ok());
  EXPECT_FALSE(validate_wait(-1ms).ok());
  EXPECT_FALSE(validate_wait(8 * 24h).ok());
}

TEST(Validate, NameLists) {
  EXPECT_TRUE(validate_names({"a", "b"}).ok());
  EXPECT_FALSE(validate_names({}).ok());
  EXPECT_NE(msg(validate_names({"a", "a"})).find("more than once"),
            std::string::npos);
  EXPECT_FALSE(validate_names({"a", ""}).ok());
  std::vector<std::string> many(1025);
  std::vector<std::string_view> views;
  for (std::size_t i = 0; i < many.size(); ++i) {
    many[i] = "n" + std::to_string(i);
    views.push_back(many[i]);
  }
  EXPECT_FALSE(validate_names(views).ok());
  views.pop_back();
  EXPECT_TRUE(validate_names(views).ok());
}

TEST(Validate, QuoteName) {
  EXPECT_EQ(quote_name("abc"), "\"abc\"");
  EXPECT_EQ(quote_name(std::string("a\0", 2)), "\"a\\0\"");
  EXPECT_EQ(quote_name(std::string(100, 'x')),
            "\"" + std::string(64, 'x') + "\"...");
}

}  // namespace
}  // namespace baton::core
