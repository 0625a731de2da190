#include "core/duration.h"

#include <gtest/gtest.h>

namespace baton::core {
namespace {

using std::chrono::milliseconds;

TEST(Duration, Parse) {
  EXPECT_EQ(parse_duration("500ms").value(), milliseconds(500));
  EXPECT_EQ(parse_duration("30s").value(), milliseconds(30'000));
  EXPECT_EQ(parse_duration("2m").value(), milliseconds(120'000));
  EXPECT_EQ(parse_duration("1h").value(), milliseconds(3'600'000));
  EXPECT_EQ(parse_duration("7d").value(), milliseconds(604'800'000));
  EXPECT_EQ(parse_duration("1m30s").value(), milliseconds(90'000));
  EXPECT_EQ(parse_duration("0").value(), milliseconds(0));
  EXPECT_EQ(parse_duration("0s").value(), milliseconds(0));
  EXPECT_EQ(parse_duration("2000us").value(), milliseconds(2));
  EXPECT_EQ(parse_duration("1ms500us").error().code(), Errc::invalid_argument);
}

TEST(Duration, ParseErrors) {
  for (const char* bad :
       {"", "-5s", "5x", "s", "1m30", "250us", "ms", "99999999999999999999ms",
        "9999999999999d", "1.5s", " 1s"}) {
    auto r = parse_duration(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.error().code(), Errc::invalid_argument);
    EXPECT_NE(r.error().message().find("duration \""), std::string::npos);
  }
}

// A number without a unit is ambiguous (seconds for etcdctl --ttl=10,
// milliseconds for Redis PX): refused, except 0, with the accepted forms.
TEST(Duration, BareNumbersOtherThanZeroAreRefused) {
  for (const char* bare : {"10", "250", "1", "007", "30000"}) {
    auto r = parse_duration(bare);
    ASSERT_FALSE(r.ok()) << bare;
    EXPECT_EQ(r.error().code(), Errc::invalid_argument);
    const std::string& m = r.error().message();
    EXPECT_NE(m.find("has no unit"), std::string::npos) << m;
    EXPECT_NE(m.find(std::string(bare) + "s"), std::string::npos) << m;
    EXPECT_NE(m.find("ms"), std::string::npos) << m;
    EXPECT_NE(m.find("1m30s"), std::string::npos) << m;
  }
  EXPECT_EQ(parse_duration("00").value(), milliseconds(0));
  // Still a mix error, not a bare number.
  EXPECT_NE(parse_duration("1m30").error().message().find("mixes"),
            std::string::npos);
}

TEST(Duration, Format) {
  EXPECT_EQ(format_duration(milliseconds(90'000)), "90s");
  EXPECT_EQ(format_duration(milliseconds(120'000)), "2m");
  EXPECT_EQ(format_duration(milliseconds(1500)), "1500ms");
  EXPECT_EQ(format_duration(milliseconds(0)), "0ms");
  EXPECT_EQ(format_duration(milliseconds(604'800'000)), "7d");
  EXPECT_EQ(format_duration(milliseconds(3'600'000)), "1h");
  EXPECT_EQ(format_duration(milliseconds(-2000)), "-2s");
  for (long long v : {1LL, 999LL, 1000LL, 61'000LL, 86'400'000LL}) {
    EXPECT_EQ(parse_duration(format_duration(milliseconds(v))).value(),
              milliseconds(v));
  }
}

}  // namespace
}  // namespace baton::core
