// tests/unit/store_url_test.cc — the one parser of store URLs and options
// (baton/store_descriptor.h): one vocabulary, unknown keys refused by name,
// every value checked against its type, defaults filled in.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include "baton/store_descriptor.h"

namespace baton {
namespace {

using namespace std::chrono_literals;

StoreDescriptor descriptor() {
  StoreDescriptor d;
  d.name = "demo";
  d.schemes = {"demo"};
  d.url_form = "demo://host[:port]/db";
  d.default_port = 4000;
  OptionSpec timeout = request_timeout_option();
  timeout.aliases = {"timeout_ms"};
  d.options = {timeout,
               count_option("max_open_connections", "16", 1, "pool size"),
               flag_option("tls", "0", "use TLS"),
               choice_option("mode", "name", {"name", "global"}, "serialize"),
               secret_option("password", "the password"),
               text_option("prefix", "baton:", "key prefix")};
  d.open = [](const StoreUrl&) -> Result<std::unique_ptr<Store>> {
    return Error(Errc::unsupported, "not opened in this test");
  };
  return d;
}

TEST(StoreUrlTest, DefaultsFillEveryDeclaredOption) {
  auto u = parse_store_url("demo://h/db", descriptor());
  ASSERT_TRUE(u.ok()) << u.error().to_string();
  EXPECT_EQ(u->hosts.size(), 1u);
  EXPECT_EQ(u->hosts[0].port, 4000);
  EXPECT_EQ(u->path, "db");
  EXPECT_EQ(u->options.duration("request_timeout"), 5s);
  EXPECT_FALSE(u->options.given("request_timeout"));
  EXPECT_EQ(u->options.count("max_open_connections"), 16);
  EXPECT_FALSE(u->options.flag("tls"));
  EXPECT_EQ(u->options.text("mode"), "name");
  EXPECT_EQ(u->options.text("prefix"), "baton:");
}

TEST(StoreUrlTest, KeysMatchIgnoringCaseUnderscoresAndDashes) {
  for (const char* key : {"request_timeout", "RequestTimeout",
                          "request-timeout", "REQUESTTIMEOUT"}) {
    auto u = parse_store_url(std::string("demo://h/db?") + key + "=250ms",
                             descriptor());
    ASSERT_TRUE(u.ok()) << key << ": " << u.error().to_string();
    EXPECT_EQ(u->options.duration("request_timeout"), 250ms) << key;
    EXPECT_TRUE(u->options.given("request_timeout"));
  }
  auto pool = parse_store_url("demo://h/db?MaxOpenConnections=3", descriptor());
  ASSERT_TRUE(pool.ok());
  EXPECT_EQ(pool->options.count("max_open_connections"), 3);
}

TEST(StoreUrlTest, AnOlderSpellingIsAnAliasAndABareNumberIsMilliseconds) {
  auto u = parse_store_url("demo://h/db?timeout_ms=1500", descriptor());
  ASSERT_TRUE(u.ok()) << u.error().to_string();
  EXPECT_EQ(u->options.duration("request_timeout"), 1500ms);
  auto twice = parse_store_url("demo://h/db?timeout_ms=1&request_timeout=2s",
                               descriptor());
  ASSERT_FALSE(twice.ok());
  EXPECT_NE(twice.error().message().find("given twice"), std::string::npos)
      << twice.error().message();
}

TEST(StoreUrlTest, AnUnknownKeyIsRefusedByName) {
  auto u = parse_store_url("demo://h/db?colour=blue", descriptor());
  ASSERT_FALSE(u.ok());
  EXPECT_EQ(u.error().code(), Errc::invalid_argument);
  EXPECT_NE(u.error().message().find("unknown option \"colour\" for demo"),
            std::string::npos)
      << u.error().message();
  EXPECT_NE(u.error().message().find("request_timeout"), std::string::npos);
}

TEST(StoreUrlTest, EveryValueIsCheckedAgainstItsType) {
  struct Case {
    const char* query;
    const char* says;
  } cases[] = {
      {"request_timeout=soon", "request_timeout:"},
      {"request_timeout=0s", "must be positive"},
      {"max_open_connections=0", "at least 1"},
      {"max_open_connections=many", "not a whole number"},
      {"tls=maybe", "not a flag"},
      {"mode=sometimes", "must be one of name, global"},
  };
  for (const auto& c : cases) {
    auto u =
        parse_store_url(std::string("demo://h/db?") + c.query, descriptor());
    ASSERT_FALSE(u.ok()) << c.query;
    EXPECT_EQ(u.error().code(), Errc::invalid_argument);
    EXPECT_NE(u.error().message().find(c.says), std::string::npos)
        << c.query << ": " << u.error().message();
  }
  auto on = parse_store_url("demo://h/db?tls=yes", descriptor());
  ASSERT_TRUE(on.ok());
  EXPECT_TRUE(on->options.flag("tls"));
}

TEST(StoreUrlTest, SecretsAndPasswordsAreMaskedInMessages) {
  auto u = parse_store_url("demo://u:pw@h/db?password=s3cret&colour=1",
                           descriptor());
  ASSERT_FALSE(u.ok());
  EXPECT_EQ(u.error().message().find("s3cret"), std::string::npos)
      << u.error().message();
  EXPECT_EQ(u.error().message().find(":pw@"), std::string::npos)
      << u.error().message();
  auto ok = parse_store_url("demo://u:pw@h/db?password=s3cret", descriptor());
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->options.text("password"), "s3cret");
  EXPECT_EQ(ok->safe.find("s3cret"), std::string::npos) << ok->safe;
}

TEST(StoreUrlTest, AHostIsRequiredUnlessTheStoreSaysOtherwise) {
  auto none = parse_store_url("demo:opaque", descriptor());
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.error().message().find("demo needs a host (demo://"),
            std::string::npos)
      << none.error().message();
  auto empty = parse_store_url("demo:///db", descriptor());
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.error().message().find("empty host"), std::string::npos)
      << empty.error().message();
  StoreDescriptor d = descriptor();
  d.hosts_required = false;
  auto named = parse_store_url("demo:opaque", d);
  ASSERT_TRUE(named.ok()) << named.error().to_string();
  EXPECT_EQ(named->opaque, "opaque");
}

TEST(StoreUrlTest, AFileUrlNamesAPathNeverAnAuthority) {
  StoreDescriptor d = descriptor();
  d.file_url = true;
  auto abs = parse_store_url("demo:///var/lib/x/locks.db?tls=1", d);
  ASSERT_TRUE(abs.ok()) << abs.error().to_string();
  EXPECT_EQ(abs->path, "/var/lib/x/locks.db");
  EXPECT_TRUE(abs->hosts.empty());
  auto rel = parse_store_url("demo://./sub/locks.db", d);
  ASSERT_TRUE(rel.ok()) << rel.error().to_string();
  char cwd[4096];
  ASSERT_NE(::getcwd(cwd, sizeof cwd), nullptr);
  EXPECT_EQ(rel->path, std::string(cwd) + "/sub/locks.db");
  auto host = parse_store_url("demo://user:pw@host/locks.db", d);
  ASSERT_FALSE(host.ok());
  EXPECT_EQ(host.error().message().find("pw"), std::string::npos);
  auto dir = parse_store_url("demo:///var/lib/x/", d);
  EXPECT_FALSE(dir.ok());
}

StoreDescriptor password_descriptor() {
  StoreDescriptor d = descriptor();
  d.options = password_options("BATON_TEST_PASSWORD_ENV");
  return d;
}

std::string write_file(const std::string& text, mode_t mode) {
  char path[] = "/tmp/baton-password-XXXXXX";
  const int fd = ::mkstemp(path);
  EXPECT_GE(fd, 0);
  EXPECT_EQ(::write(fd, text.data(), text.size()),
            static_cast<ssize_t>(text.size()));
  ::fchmod(fd, mode);
  ::close(fd);
  return path;
}

TEST(StoreUrlTest, PasswordComesFromTheOptionTheUrlTheFileOrTheEnvironment) {
  const StoreDescriptor d = password_descriptor();
  ::unsetenv("BATON_TEST_PASSWORD_ENV");
  auto none = parse_store_url("demo://h/db", d);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(*store_password(*none, "BATON_TEST_PASSWORD_ENV"), "");

  auto in_url = parse_store_url("demo://u:p1@h/db", d);
  ASSERT_TRUE(in_url.ok());
  EXPECT_EQ(*store_password(*in_url, "BATON_TEST_PASSWORD_ENV"), "p1");
  auto option = parse_store_url("demo://u:p1@h/db?password=p2", d);
  ASSERT_TRUE(option.ok());
  EXPECT_EQ(*store_password(*option, "BATON_TEST_PASSWORD_ENV"), "p2");
  EXPECT_EQ(option->safe.find("p2"), std::string::npos) << option->safe;

  const std::string file = write_file("from-file\nsecond line\n", 0600);
  auto from_file = parse_store_url("demo://u@h/db?password_file=" + file, d);
  ASSERT_TRUE(from_file.ok());
  EXPECT_EQ(*store_password(*from_file, "BATON_TEST_PASSWORD_ENV"),
            "from-file");

  ::setenv("BATON_TEST_PASSWORD_ENV", "from-env", 1);
  EXPECT_EQ(*store_password(*none, "BATON_TEST_PASSWORD_ENV"), "from-env");
  EXPECT_EQ(*store_password(*none, ""), "");
  EXPECT_EQ(*store_password(*in_url, "BATON_TEST_PASSWORD_ENV"), "p1");
  ::unsetenv("BATON_TEST_PASSWORD_ENV");
  ::unlink(file.c_str());
}

TEST(StoreUrlTest, APasswordFileOthersMayReadIsRefusedWithoutItsContent) {
  const StoreDescriptor d = password_descriptor();
  const std::string open_file = write_file("s3cret-in-file\n", 0644);
  auto u = parse_store_url("demo://h/db?password_file=" + open_file, d);
  ASSERT_TRUE(u.ok());
  auto p = store_password(*u, "");
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.error().code(), Errc::invalid_argument);
  EXPECT_NE(p.error().message().find(open_file), std::string::npos);
  EXPECT_NE(p.error().message().find("0644"), std::string::npos);
  EXPECT_EQ(p.error().message().find("s3cret"), std::string::npos);

  const std::string empty = write_file("\n", 0600);
  auto e = parse_store_url("demo://h/db?password_file=" + empty, d);
  ASSERT_TRUE(e.ok());
  EXPECT_FALSE(store_password(*e, "").ok());

  const std::string good = write_file("x\n", 0400);
  auto both = parse_store_url("demo://u:p@h/db?password_file=" + good, d);
  ASSERT_TRUE(both.ok());
  auto b = store_password(*both, "");
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.error().message().find("not both"), std::string::npos);
  for (const auto& f : {open_file, empty, good}) ::unlink(f.c_str());
}

}  // namespace
}  // namespace baton
