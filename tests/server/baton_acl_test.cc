// tests/server/baton_acl_test.cc — batond's users and per-prefix rules,
// against the conformance_baton binary's batond (baton_test_server.h): the
// user "jobs" may read, lock and count under "jobs/" only.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <string>

#include "baton/client.h"
#include "baton/lease.h"
#include "baton_test_server.h"
#include "direct_store.h"
#include "raw_resp.h"

namespace baton::testing {
namespace {

using std::chrono::milliseconds;

std::unique_ptr<DirectStore> open_as(const std::string& user,
                                     const std::string& password) {
  auto s = DirectStore::open(baton_url(user, password));
  if (!s) throw std::runtime_error(s.error().to_string());
  return std::move(*s);
}

AcquireSpec spec(const std::string& name, const OwnerToken& token) {
  AcquireSpec a;
  a.name = name;
  a.token = token;
  a.ttl = milliseconds(30'000);
  return a;
}

// The error is permission_denied and names the command and the name.
void expect_denied(const Error& e, const std::string& cmd,
                   const std::string& name) {
  EXPECT_EQ(e.code(), Errc::permission_denied) << e.to_string();
  EXPECT_NE(e.message().find("user \"jobs\" may not run " + cmd + " on \"" +
                             name + "\""),
            std::string::npos)
      << e.message();
  EXPECT_NE(e.message().find("rules: \"jobs/\" (read lock counter)"),
            std::string::npos)
      << e.message();
}

std::int64_t denied_count() {
  Raw c(test_server().port());
  EXPECT_EQ(c.call({"AUTH", "admin", kAdminPassword}).str, "OK");
  return info_field(c, "permission_denied_total");
}

TEST(BatonAcl, UserLimitedToJobsLocksOnlyThere) {
  auto admin = open_as("admin", kAdminPassword);
  auto jobs = open_as("jobs", kJobsPassword);
  const OwnerToken mine = OwnerToken::random();
  const OwnerToken theirs = OwnerToken::random();

  // jobs/a: every lock operation works.
  auto g = jobs->acquire(spec("jobs/a", mine), milliseconds(0));
  ASSERT_TRUE(g) << g.error().to_string();
  EXPECT_TRUE(jobs->extend("jobs/a", mine, milliseconds(20'000)));
  auto d = jobs->describe("jobs/a");
  ASSERT_TRUE(d) << d.error().to_string();
  EXPECT_EQ(d->holders.size(), 1u);
  EXPECT_TRUE(jobs->counter_add("jobs/c", 2));

  // other/a, held by admin: jobs may do nothing with it.
  auto ga = admin->acquire(spec("other/a", theirs), milliseconds(0));
  ASSERT_TRUE(ga) << ga.error().to_string();
  const auto before = admin->describe("other/a");
  ASSERT_TRUE(before);
  const std::int64_t denied_before = denied_count();

  auto r1 = jobs->acquire(spec("other/a", mine), milliseconds(0));
  ASSERT_FALSE(r1);
  expect_denied(r1.error(), "LOCK.ACQUIRE", "other/a");
  auto r2 = jobs->release("other/a", theirs);
  ASSERT_FALSE(r2);
  expect_denied(r2.error(), "LOCK.RELEASE", "other/a");
  auto r3 = jobs->extend("other/a", theirs, milliseconds(1000));
  ASSERT_FALSE(r3);
  expect_denied(r3.error(), "LOCK.EXTEND", "other/a");
  auto r4 = jobs->describe("other/a");
  ASSERT_FALSE(r4);
  expect_denied(r4.error(), "LOCK.DESCRIBE", "other/a");
  auto r5 = jobs->list("other/", 100);
  ASSERT_FALSE(r5);
  expect_denied(r5.error(), "LOCK.LIST", "other/");
  auto r6 = jobs->counter_add("other/c", 1);
  ASSERT_FALSE(r6);
  expect_denied(r6.error(), "COUNTER.ADD", "other/c");
  MultiSpec m;
  m.names = {"jobs/b", "other/b"};
  m.reservation = OwnerToken::random();
  m.ttl = milliseconds(10'000);
  m.all_or_nothing = true;
  auto r7 = jobs->acquire_multi(m, milliseconds(0));
  ASSERT_FALSE(r7);
  expect_denied(r7.error(), "LOCK.ACQUIRE_ALL", "other/b");

  // Nothing changed, and every refusal was counted.
  auto after = admin->describe("other/a");
  ASSERT_TRUE(after);
  ASSERT_EQ(after->holders.size(), 1u);
  EXPECT_EQ(after->holders[0].fencing_token, before->holders[0].fencing_token);
  // Not extended by the refused LOCK.EXTEND (1 s would be far less).
  EXPECT_GT(after->holders[0].time_left, milliseconds(20'000));
  EXPECT_LE(after->holders[0].time_left, before->holders[0].time_left);
  auto b = admin->describe("jobs/b");
  ASSERT_TRUE(b);
  EXPECT_TRUE(b->holders.empty());
  auto c = admin->counter_get("other/c");
  ASSERT_TRUE(c);
  EXPECT_EQ(*c, 0);
  EXPECT_EQ(denied_count(), denied_before + 7);

  EXPECT_TRUE(jobs->release("jobs/a", mine));
  EXPECT_TRUE(admin->release("other/a", theirs));
}

TEST(BatonAcl, ListAndStatusShowOnlyTheUsersPrefix) {
  auto admin = open_as("admin", kAdminPassword);
  auto jobs = open_as("jobs", kJobsPassword);
  const OwnerToken a = OwnerToken::random(), b = OwnerToken::random();
  ASSERT_TRUE(admin->acquire(spec("jobs/listed", a), milliseconds(0)));
  ASSERT_TRUE(admin->acquire(spec("secret/hidden", b), milliseconds(0)));
  // LOCK.LIST "" (what `baton status` asks): only jobs/ entries.
  auto all = jobs->list("", 1000);
  ASSERT_TRUE(all) << all.error().to_string();
  bool saw_jobs = false;
  for (const auto& i : all.value()) {
    EXPECT_EQ(i.name.rfind("jobs/", 0), 0u) << i.name;
    if (i.name == "jobs/listed") saw_jobs = true;
  }
  EXPECT_TRUE(saw_jobs);
  auto seen_by_admin = admin->list("", 1000);
  ASSERT_TRUE(seen_by_admin);
  bool admin_saw_secret = false;
  for (const auto& i : seen_by_admin.value()) {
    if (i.name == "secret/hidden") admin_saw_secret = true;
  }
  EXPECT_TRUE(admin_saw_secret);
  // INFO (admin) is refused to jobs.
  Raw raw(test_server().port());
  EXPECT_EQ(raw.call({"AUTH", "jobs", kJobsPassword}).str, "OK");
  auto info = raw.call({"INFO"});
  EXPECT_EQ(
      info.str.rfind("permission_denied user \"jobs\" may not run INFO", 0), 0u)
      << info.str;
  EXPECT_TRUE(admin->release("jobs/listed", a));
  EXPECT_TRUE(admin->release("secret/hidden", b));
}

TEST(BatonAcl, AuthIsRequiredAndFailedAuthIsSlowed) {
  Raw c(test_server().port());
  auto r = c.call({"LOCK.DESCRIBE", "jobs/a"});
  EXPECT_EQ(r.str,
            "permission_denied authentication required (AUTH user "
            "password)");
  // A wrong password and an unknown user get the same answer, each no
  // sooner than auth_fail_delay (250 ms by default) later.
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"AUTH", "jobs", "guess"}, {"AUTH", "nobody", "guess"}}) {
    const auto start = std::chrono::steady_clock::now();
    auto f = c.call(args);
    const auto took = std::chrono::steady_clock::now() - start;
    EXPECT_EQ(f.str, "permission_denied invalid user name or password");
    EXPECT_GE(took, milliseconds(250));
  }
  // Pipelined guesses wait for each other: three take at least 750 ms.
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 3; ++i)
    c.send({"AUTH", "jobs", "guess" + std::to_string(i)});
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(c.read());
  EXPECT_GE(std::chrono::steady_clock::now() - start, milliseconds(750));
  EXPECT_EQ(c.call({"AUTH", "jobs", kJobsPassword}).str, "OK");
  EXPECT_TRUE(c.call({"LOCK.DESCRIBE", "jobs/a"}).type ==
              proto::Reply::Type::array);
}

// The password may come from a file only its owner reads, or from
// BATON_PASSWORD, instead of the URL; a wrong one is refused at open with
// the server named and the password not shown.
TEST(BatonAcl, PasswordFromAFileOrTheEnvironment) {
  const std::string base =
      "baton://jobs@127.0.0.1:" + std::to_string(test_server().port());
  char path[] = "/tmp/baton-acl-pw-XXXXXX";
  const int fd = ::mkstemp(path);
  ASSERT_GE(fd, 0);
  ::close(fd);
  const auto write_file = [&](const std::string& text, mode_t mode) {
    std::ofstream(path) << text << "\n";
    ::chmod(path, mode);
  };
  const auto holds = [](const std::string& url) {
    auto c = Client::open(url);
    if (!c.ok()) return c.error().to_string();
    auto l = c->try_acquire("jobs/pw-source", AcquireOptions{});
    if (!l.ok()) return l.error().to_string();
    return std::string(*c->release(*l) ? "held" : "not released");
  };
  write_file(kJobsPassword, 0600);
  EXPECT_EQ(holds(base + "?password_file=" + path), "held");
  ::setenv("BATON_PASSWORD", kJobsPassword, 1);
  EXPECT_EQ(holds(base), "held");
  ::unsetenv("BATON_PASSWORD");

  write_file(kJobsPassword, 0644);
  auto open_file = Client::open(base + "?password_file=" + path);
  ASSERT_FALSE(open_file.ok());
  EXPECT_EQ(open_file.error().code(), Errc::invalid_argument);
  EXPECT_NE(
      open_file.error().message().find(std::string(path) + "\" has mode 0644"),
      std::string::npos)
      << open_file.error().message();

  write_file("not-the-password", 0600);
  auto wrong = Client::open(base + "?password_file=" + path);
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.error().code(), Errc::permission_denied);
  EXPECT_NE(wrong.error().message().find("batond refused the password for "
                                         "baton://jobs@127.0.0.1:"),
            std::string::npos)
      << wrong.error().message();
  EXPECT_EQ(wrong.error().message().find("not-the-password"),
            std::string::npos);
  ::unlink(path);
}

TEST(BatonAcl, ClientCertificateMapsToUser) {
  // batons:// with client.pem (CN client1) and no AUTH: the user "jobs".
  TestCertificates& c = test_certs();
  auto s = DirectStore::open(
      "batons://127.0.0.1:" + std::to_string(test_server().tls_port()) +
      "?ca=" + c.path("ca.pem") + "&cert=" + c.path("client.pem") +
      "&key=" + c.path("client.key"));
  ASSERT_TRUE(s) << s.error().to_string();
  const OwnerToken t = OwnerToken::random();
  auto g = (*s)->acquire(spec("jobs/by-cert", t), milliseconds(0));
  ASSERT_TRUE(g) << g.error().to_string();
  EXPECT_TRUE((*s)->release("jobs/by-cert", t));
  auto denied = (*s)->acquire(spec("other/by-cert", t), milliseconds(0));
  ASSERT_FALSE(denied);
  expect_denied(denied.error(), "LOCK.ACQUIRE", "other/by-cert");
  // Without a mapped certificate the plain port still asks for AUTH.
  auto anon = DirectStore::open("baton://127.0.0.1:" +
                                std::to_string(test_server().port()));
  ASSERT_TRUE(anon);
  auto r = (*anon)->describe("jobs/by-cert");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), Errc::permission_denied);
  EXPECT_NE(r.error().message().find("authentication required"),
            std::string::npos)
      << r.error().message();
}

// One HTTP GET on the metrics listener; the whole response.
std::string http_get(const std::string& path, const std::string& basic) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(test_server().metrics_port());
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string out;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
    timeval tv{5, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    std::string req = "GET " + path + " HTTP/1.1\r\nHost: x\r\n";
    if (!basic.empty()) req += "Authorization: Basic " + basic + "\r\n";
    req += "\r\n";
    (void)::send(fd, req.data(), req.size(), MSG_NOSIGNAL);
    char buf[4096];
    ssize_t n;
    while ((n = ::recv(fd, buf, sizeof buf, 0)) > 0) out.append(buf, n);
  }
  ::close(fd);
  return out;
}

std::string base64(const std::string& s) {
  return run("printf '%s' '" + s + "' | base64 -w0");
}

TEST(BatonAcl, MetricsNeedAnAdminUser) {
  ASSERT_NE(test_server().metrics_port(), 0);
  std::string none = http_get("/metrics", "");
  EXPECT_EQ(none.rfind("HTTP/1.1 401 Unauthorized", 0), 0u) << none;
  EXPECT_NE(none.find("WWW-Authenticate: Basic"), std::string::npos) << none;
  EXPECT_EQ(none.find("batond_leases"), std::string::npos) << none;
  std::string wrong = http_get("/metrics", base64("admin:guess"));
  EXPECT_EQ(wrong.rfind("HTTP/1.1 401 Unauthorized", 0), 0u) << wrong;
  std::string jobs =
      http_get("/metrics", base64(std::string("jobs:") + kJobsPassword));
  EXPECT_EQ(jobs.rfind("HTTP/1.1 403 Forbidden", 0), 0u) << jobs;
  EXPECT_EQ(jobs.find("batond_leases"), std::string::npos) << jobs;
  std::string admin =
      http_get("/metrics", base64(std::string("admin:") + kAdminPassword));
  EXPECT_EQ(admin.rfind("HTTP/1.1 200 OK", 0), 0u) << admin;
  EXPECT_NE(admin.find("batond_permission_denied_total"), std::string::npos)
      << admin;
  EXPECT_NE(admin.find("batond_auth_failures_total"), std::string::npos)
      << admin;
}

TEST(BatonAcl, ConfigRefusesPlainPasswordsAndUnknownKeys) {
  TestCertificates& c = test_certs();
  const std::string cfg = c.path("bad.yaml");
  auto check = [&](const std::string& yaml, const std::string& want) {
    {
      std::ofstream f(cfg);
      f << yaml;
    }
    std::string out =
        run(BATOND_PATH " --config " + cfg + " --listen 127.0.0.1:0 2>&1");
    EXPECT_NE(out.find(want), std::string::npos) << out;
    EXPECT_EQ(out.find("batond ready"), std::string::npos) << out;
  };
  check("users:\n  u:\n    password: hunter2\n",
        "users.u: plain-text passwords are not accepted");
  check("users:\n  u:\n    password_hash: abc\n",
        "users.u: password_hash is not pbkdf2-sha256");
  check("users:\n  u:\n    password_hash: \"" + hash_with_batond("x") +
            "\"\n    rules: { \"a/\": [read, write] }\n",
        "unknown permission \"write\"");
  check("users:\n  u:\n    pasword_hash: x\n",
        "users.u: unknown key "
        "\"pasword_hash\"");
}

}  // namespace
}  // namespace baton::testing
