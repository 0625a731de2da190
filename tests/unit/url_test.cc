#include "core/url.h"

#include <gtest/gtest.h>

namespace baton::core {
namespace {

TEST(Url, Full) {
  auto u = parse_url(
      "Postgres://bob:s%40cret@db.example:5432/"
      "locks?sslmode=require&password=pw");
  ASSERT_TRUE(u.ok()) << u.error().message();
  EXPECT_EQ(u->scheme, "postgres");
  EXPECT_EQ(u->user, "bob");
  EXPECT_EQ(u->password, "s@cret");
  ASSERT_EQ(u->hosts.size(), 1u);
  EXPECT_EQ(u->hosts[0].host, "db.example");
  EXPECT_EQ(u->hosts[0].port, 5432);
  EXPECT_EQ(u->path, "locks");
  EXPECT_EQ(u->query.at("sslmode"), "require");
  std::string safe = u->safe();
  EXPECT_EQ(safe.find("s%40cret"), std::string::npos);
  EXPECT_EQ(safe.find("pw"), std::string::npos);
  EXPECT_NE(safe.find("bob:***@db.example:5432/locks"), std::string::npos);
}

TEST(Url, HostsIpv6DefaultPort) {
  auto u = parse_url("redlock://h1:7001,[::1]:7002,h3", 6379);
  ASSERT_TRUE(u.ok()) << u.error().message();
  ASSERT_EQ(u->hosts.size(), 3u);
  EXPECT_EQ(u->hosts[1].host, "::1");
  EXPECT_EQ(u->hosts[1].port, 7002);
  EXPECT_EQ(u->hosts[2].port, 6379);
  EXPECT_EQ(u->safe(), "redlock://h1:7001,[::1]:7002,h3:6379");
  auto v = parse_url("baton://[::1]:7420");
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->hosts[0].host, "::1");
  EXPECT_EQ(v->hosts[0].port, 7420);
}

TEST(Url, Opaque) {
  auto m = parse_url("memory:");
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->scheme, "memory");
  EXPECT_TRUE(m->hosts.empty());
  EXPECT_EQ(m->opaque, "");
  auto s = parse_url("sqlite:/tmp/x.db");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->opaque, "/tmp/x.db");
  EXPECT_EQ(s->safe(), "sqlite:/tmp/x.db");
}

TEST(Url, Errors) {
  struct Case {
    const char* url;
    const char* want;
  } cases[] = {
      {"", "is empty"},
      {"localhost", "no scheme"},
      {"redis://", "empty host"},
      {"redis://:6379", "empty host"},
      {"redis://h:x", "bad port \"x\""},
      {"redis://h:0", "out of range"},
      {"redis://h:65536", "out of range"},
      {"redis://h", "no port"},
      {"redis://h:1,", "empty host"},
      {"redis://h o:1", "unexpected character"},
      {"redis://[::1:1", "closing"},
      {"redis://h:1/%zz", "percent-escape"},
      {"1redis://h:1", "bad scheme"},
  };
  for (const Case& c : cases) {
    auto u = parse_url(c.url);
    ASSERT_FALSE(u.ok()) << c.url;
    EXPECT_EQ(u.error().code(), Errc::invalid_argument);
    EXPECT_NE(u.error().message().find(c.want), std::string::npos)
        << c.url << " -> " << u.error().message();
  }
  auto masked = parse_url("redis://u:topsecret@h:x");
  ASSERT_FALSE(masked.ok());
  EXPECT_EQ(masked.error().message().find("topsecret"), std::string::npos);
  EXPECT_NE(masked.error().message().find("u:***@h:x"), std::string::npos);
}

}  // namespace
}  // namespace baton::core
