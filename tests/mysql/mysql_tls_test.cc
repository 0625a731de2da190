// tests/mysql/mysql_tls_test.cc — mysql:// over TLS and its credentials,
// against one private MariaDB 10.11 started for this binary with a
// certificate from a CA made at test time (tests/server/test_certs.h:
// server.pem names 127.0.0.1 and localhost), listening on 127.0.0.1 and
// 127.0.0.2 (a name the certificate does not cover). Two accounts with the
// minimum grants docs/stores/mysql.md lists: baton_ssl (REQUIRE SSL) and
// baton_x509 (REQUIRE X509: a client certificate signed by the CA), both
// with the password kSecret, which the store reads from a 0600
// password_file. ctest fails the run if kSecret appears in its output
// (it matches BATON_TEST_SECRETS, cmake/BatonTargets.cmake); the tests also
// look for it in every message.
//
// The conformance suite runs as baton_x509 over ssl_mode=verify_identity:
// the server refuses that account any connection without TLS and the
// client certificate, so every connection the store makes (pool, schema,
// doorbells) is one.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <future>
#include <memory>
#include <string>
#include <thread>

#include "baton/client.h"
#include "baton/store_descriptor.h"
#include "conformance.h"
#include "my_process.h"
#include "mysql_traits.h"
#include "test_certs.h"

namespace baton::testing {
namespace {

using namespace std::chrono_literals;

constexpr const char* kSecret = "baton-my-secret-3Wz";
// The grants docs/stores/mysql.md ("Security") tells operators to give.
constexpr const char* kGrants =
    "SELECT, INSERT, UPDATE, DELETE, CREATE, ALTER, INDEX, CREATE ROUTINE";

struct World {
  TestCertificates certs;
  std::unique_ptr<MyProcess> server;
  std::string password_file;
  World() {
    MyProcess::Options o;
    o.ssl_ca = certs.path("ca.pem");
    o.ssl_cert = certs.path("server.pem");
    o.ssl_key = certs.path("server.key");
    o.extra_addresses = {"127.0.0.2"};
    server = std::make_unique<MyProcess>(o);
    for (const char* account : {"baton_ssl", "baton_x509"}) {
      const std::string who = std::string("'") + account + "'@'127.0.0.1'";
      server->sql("CREATE USER " + who + " IDENTIFIED BY '" + kSecret +
                  "' REQUIRE " +
                  (std::string(account) == "baton_ssl" ? "SSL" : "X509"));
      server->sql(std::string("GRANT ") + kGrants + " ON baton_test.* TO " +
                  who);
    }
    password_file = certs.path("mysql-password");
    std::ofstream(password_file) << kSecret << "\n";
    ::chmod(password_file.c_str(), 0600);
  }
  std::string port() const { return std::to_string(server->port()); }
  // mysql://<user>@<host>:<port>/baton_test?password_file=...&<query>
  std::string url(const std::string& user, const std::string& query,
                  const std::string& host = "127.0.0.1") const {
    return "mysql://" + user + "@" + host + ":" + port() +
           "/baton_test?password_file=" + password_file +
           (query.empty() ? "" : "&" + query);
  }
  std::string client_cert() const {
    return "cert=" + certs.path("client.pem") +
           "&key=" + certs.path("client.key");
  }
  // The conformance suite's URL: verified server, client certificate.
  std::string x509(const std::string& more = "") const {
    return url("baton_x509",
               "ssl_mode=verify_identity&ca=" + certs.path("ca.pem") + "&" +
                   client_cert() + more);
  }
  // Tables of the store whose prefix is `prefix`, as root sees them.
  int tables(const std::string& prefix) const {
    return std::stoi(server->sql(
        "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = "
        "'baton_test' AND table_name LIKE '" +
        prefix + "%'"));
  }
};

World* g_world = nullptr;
World& world() {
  if (g_world == nullptr) {
    g_world = new World();
    std::atexit([] { delete g_world; });
  }
  return *g_world;
}

std::string fresh_prefix() {
  static std::atomic<int> n{0};
  return "tls" + std::to_string(::getpid()) + "_" +
         std::to_string(n.fetch_add(1)) + "_";
}

AcquireOptions ttl(std::chrono::milliseconds t) {
  AcquireOptions o;
  o.ttl = t;
  return o;
}

// `url` + a fresh prefix must be refused at open with `code` and a message
// holding every one of `parts`, never the password, and leave no table.
void expect_refused(const std::string& url, Errc code,
                    std::initializer_list<std::string> parts) {
  const std::string prefix = fresh_prefix();
  auto s = open_store(url + "&prefix=" + prefix);
  ASSERT_FALSE(s.ok()) << "opened: " << url;
  const std::string text = s.error().to_string();
  std::printf("  -> %s\n", text.c_str());
  EXPECT_EQ(s.error().code(), code) << text;
  for (const std::string& part : parts) {
    EXPECT_NE(text.find(part), std::string::npos)
        << "\"" << text << "\" does not contain \"" << part << "\"";
  }
  EXPECT_EQ(text.find(kSecret), std::string::npos);
  EXPECT_EQ(world().tables(prefix), 0) << "tables were created for " << url;
}

// Opens, takes and releases a lock: the URL works end to end.
void expect_works(const std::string& url) {
  auto c = Client::open(url);
  ASSERT_TRUE(c.ok()) << c.error().to_string();
  auto l =
      c->try_acquire("tls/works/" + OwnerToken::random().to_string(), ttl(10s));
  ASSERT_TRUE(l.ok()) << l.error().to_string();
  auto r = c->release(*l);
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_TRUE(*r);
}

int connections_of(const std::string& user) {
  return std::stoi(world().server->sql(
      "SELECT COUNT(*) FROM information_schema.processlist WHERE user = '" +
      user + "'"));
}

TEST(MyTls, VerifyIdentityWithAClientCertificateOnEveryConnection) {
  const std::string prefix = fresh_prefix();
  // The waiter's fallback timer is 5-10 s: a grant within 3 s of the
  // release is the doorbell's doing.
  const std::string url = world().x509(
      "&prefix=" + prefix + "&recheck_interval=10s&waiter_timeout=40s");
  const std::string name = "tls/doorbell/" + OwnerToken::random().to_string();
  // The holder runs in a child process: a waiter whose target's doorbell is
  // held in its own process is woken in-process, without GET_LOCK.
  int up[2], down[2];
  ASSERT_EQ(::pipe(up), 0);
  ASSERT_EQ(::pipe(down), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    char ok = 'n';
    auto c = Client::open(url);
    if (c.ok()) {
      auto l = c->acquire(name, 10s, ttl(60s));
      if (l.ok()) {
        ok = 'y';
        (void)!::write(up[1], &ok, 1);
        char cmd = 0;
        if (::read(down[0], &cmd, 1) == 1 && c->release(*l).ok()) ::_exit(0);
      }
    }
    (void)!::write(up[1], &ok, 1);
    ::_exit(1);
  }
  char held = 0;
  ASSERT_EQ(::read(up[0], &held, 1), 1);
  ASSERT_EQ(held, 'y') << "the child could not take the lock";
  // The control for expect_refused's "no table" check: an open that works
  // does create them.
  EXPECT_GT(world().tables(prefix), 0);
  auto waiter = Client::open(url);
  ASSERT_TRUE(waiter.ok()) << waiter.error().to_string();
  auto waited = std::async(
      std::launch::async, [&] { return waiter->acquire(name, 30s, ttl(30s)); });
  // The waiter's doorbell connection blocks in GET_LOCK on the child's
  // doorbell. Seen under baton_x509, which may log in only over TLS with
  // the client certificate (REQUIRE X509): doorbell connections use the
  // store's TLS settings like every other.
  bool bell_seen = false;
  for (int i = 0; i < 500 && !bell_seen; ++i) {
    bell_seen =
        world().server->sql(
            "SELECT COUNT(*) FROM information_schema.processlist "
            "WHERE user = 'baton_x509' AND info LIKE '%GET_LOCK(%'") != "0";
    if (!bell_seen) std::this_thread::sleep_for(10ms);
  }
  EXPECT_TRUE(bell_seen) << "no doorbell wait of baton_x509 seen";
  // The child's lease keeps its doorbell connection, the waiter has its own.
  EXPECT_GE(connections_of("baton_x509"), 2);
  const auto released_at = std::chrono::steady_clock::now();
  ASSERT_EQ(::write(down[1], "r", 1), 1);
  auto got = waited.get();
  const auto waited_for = std::chrono::steady_clock::now() - released_at;
  int status = 0;
  ::waitpid(child, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "the child's release failed";
  ASSERT_TRUE(got.ok()) << got.error().to_string();
  EXPECT_LT(waited_for, 3s);
  EXPECT_TRUE(*waiter->release(*got));
  for (int fd : {up[0], up[1], down[0], down[1]}) ::close(fd);
}

// verify_identity without ca checks against the system CAs (OpenSSL's
// default paths, which SSL_CERT_FILE replaces), and still checks the name.
TEST(MyTls, VerifyIdentityWithoutCaUsesTheSystemCas) {
  const std::string query = "ssl_mode=verify_identity&" + world().client_cert();
  expect_refused(
      world().url("baton_x509", query), Errc::unavailable,
      {"mysql://127.0.0.1:" + world().port() + "/baton_test",
       "the server's certificate did not verify against the system CAs"});
  ::setenv("SSL_CERT_FILE", world().certs.path("ca.pem").c_str(), 1);
  expect_works(world().url("baton_x509", query));
  expect_refused(world().url("baton_x509", query, "127.0.0.2"),
                 Errc::unavailable,
                 {"the server's certificate is not for host \"127.0.0.2\""});
  ::unsetenv("SSL_CERT_FILE");
}

TEST(MyTls, AnUntrustedServerCertificateIsRefusedAtOpen) {
  const std::string other = world().certs.path("other_ca.pem");
  for (const char* mode : {"verify_identity", "verify_ca"}) {
    expect_refused(
        world().url("baton_x509", std::string("ssl_mode=") + mode + "&ca=" +
                                      other + "&" + world().client_cert()),
        Errc::unavailable,
        {"mysql://127.0.0.1:" + world().port() + "/baton_test",
         "the server's certificate did not verify against ca=" + other,
         std::string("ssl_mode=") + mode});
  }
}

// 127.0.0.2 is the same server, with the certificate for 127.0.0.1.
TEST(MyTls, ANameMismatchIsRefusedByVerifyIdentityOnly) {
  const std::string ca = "&ca=" + world().certs.path("ca.pem");
  expect_refused(
      world().url("baton_ssl", "ssl_mode=verify_identity" + ca, "127.0.0.2"),
      Errc::unavailable,
      {"mysql://127.0.0.2:" + world().port() + "/baton_test",
       "the server's certificate is not for host \"127.0.0.2\"",
       "ssl_mode=verify_identity checks the name"});
  // verify_ca checks the chain only (Connector/C with a CA and without
  // VERIFY_SERVER_CERT), so the same address works; the chain check is
  // AnUntrustedServerCertificateIsRefusedAtOpen's.
  expect_works(
      world().url("baton_ssl", "ssl_mode=verify_ca" + ca, "127.0.0.2"));
}

TEST(MyTls, AccountsThatRequireTlsRefuseWhatTheyDoNotGet) {
  // REQUIRE SSL, no TLS: MariaDB answers as for a wrong password; the
  // message says both.
  expect_refused(world().url("baton_ssl", "ssl_mode=disabled"),
                 Errc::permission_denied,
                 {"mysql://127.0.0.1:" + world().port() + "/baton_test",
                  "Access denied for user 'baton_ssl'",
                  "the account requires TLS or a client certificate "
                  "(ssl_mode=disabled"});
  expect_works(world().url("baton_ssl", "ssl_mode=required"));
  expect_works(world().url("baton_ssl", ""));  // the default: preferred
  // REQUIRE X509 without a certificate.
  expect_refused(world().url("baton_x509", "ssl_mode=verify_identity&ca=" +
                                               world().certs.path("ca.pem")),
                 Errc::permission_denied,
                 {"Access denied for user 'baton_x509'",
                  "(ssl_mode=verify_identity, no cert)"});
  expect_works(
      world().url("baton_x509", "ssl_mode=required&" + world().client_cert()));
}

// Client-side certificate problems are not reported as the server's.
TEST(MyTls, ClientCertificateProblemsAreNamedAsSuch) {
  const std::string ca =
      "ssl_mode=verify_identity&ca=" + world().certs.path("ca.pem");
  // Signed by the CA, expired: the server's TLS alert, which Connector/C
  // reports as such or (TLS 1.3, the alert after the client's handshake)
  // as the connection lost at login.
  expect_refused(
      world().url("baton_x509",
                  ca + "&cert=" + world().certs.path("expired_client.pem") +
                      "&key=" + world().certs.path("client.key")),
      Errc::unavailable,
      {"the server ended the connection during the TLS login "
       "(ssl_mode=verify_identity; does it accept cert=" +
       world().certs.path("expired_client.pem") + "?)"});
  // A key that is not the certificate's: refused before any byte is sent.
  const std::string cert = world().certs.path("client.pem");
  const std::string key = world().certs.path("server.key");
  const std::string url =
      world().url("baton_x509", ca + "&cert=" + cert + "&key=" + key);
  expect_refused(url, Errc::unavailable,
                 {"key values mismatch",
                  "TLS failed (ssl_mode=verify_identity, cert=" + cert +
                      ", key=" + key + ")"});
  auto s = open_store(url);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().message().find("the server's certificate"),
            std::string::npos)
      << s.error().message();
}

TEST(MyTls, AWrongPasswordIsRefusedAtOpenAndNeverShown) {
  const std::string wrong = "wrong-3Wz-password";
  const std::string base = "mysql://baton_x509@127.0.0.1:" + world().port() +
                           "/baton_test?ssl_mode=verify_identity&ca=" +
                           world().certs.path("ca.pem") + "&" +
                           world().client_cert();
  for (const std::string& url :
       {base + "&password=" + wrong,
        "mysql://baton_x509:" + wrong + "@" + base.substr(19)}) {
    const std::string prefix = fresh_prefix();
    auto s = open_store(url + "&prefix=" + prefix);
    ASSERT_FALSE(s.ok());
    const std::string text = s.error().to_string();
    EXPECT_EQ(s.error().code(), Errc::permission_denied) << text;
    EXPECT_NE(text.find("mysql://127.0.0.1:" + world().port()),
              std::string::npos)
        << text;
    EXPECT_NE(text.find("Access denied"), std::string::npos) << text;
    EXPECT_EQ(text.find(wrong), std::string::npos) << "password shown";
    EXPECT_EQ(world().tables(prefix), 0);
  }
  // The right password in the URL: the store's safe_url() masks it, and so
  // does a refusal of the URL for another reason.
  auto s = open_store(base + "&password=" + kSecret);
  ASSERT_TRUE(s.ok()) << s.error().to_string();
  const std::string safe = (*s)->safe_url();
  EXPECT_EQ(safe.find(kSecret), std::string::npos) << "safe_url shows it";
  EXPECT_NE(safe.find("password=***"), std::string::npos) << safe;
  auto bad = open_store(base + "&password=" + kSecret + "&bogus=1");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().to_string().find(kSecret), std::string::npos);
  EXPECT_NE(bad.error().to_string().find("bogus"), std::string::npos);
}

TEST(MyTls, SettingsAreCheckedBeforeConnecting) {
  const std::string ca = "ca=" + world().certs.path("ca.pem");
  const std::string port = world().port();
  struct Case {
    std::string query;
    std::string part;
  };
  for (const Case& c : {
           Case{"ssl_mode=verify_full",
                "ssl_mode: \"verify_full\" must be "
                "one of disabled, preferred, "
                "required, verify_ca, "
                "verify_identity"},
           Case{"ssl_mode=verify_ca", "ssl_mode=verify_ca needs ca="},
           Case{"ssl_mode=required&" + ca,
                "ca is read by ssl_mode=verify_ca or verify_identity only "
                "(ssl_mode is required)"},
           Case{"ssl_mode=required&cert=" + world().certs.path("client.pem"),
                "cert and key go together"},
           Case{"ssl_mode=disabled&" + world().client_cert(),
                "cert and key are TLS options but ssl_mode is disabled"},
           Case{"ssl_mode=verify_ca&ca=/nonexistent.pem", "/nonexistent.pem"},
       }) {
    SCOPED_TRACE(c.query);
    expect_refused(world().url("baton_x509", c.query), Errc::invalid_argument,
                   {c.part});
  }
  // MySQL's spellings: upper case, dashes, and the ssl_ prefixed names.
  expect_works(world().url(
      "baton_x509",
      "ssl_mode=VERIFY-IDENTITY&ssl_ca=" + world().certs.path("ca.pem") +
          "&ssl_cert=" + world().certs.path("client.pem") +
          "&ssl_key=" + world().certs.path("client.key")));
}

TEST(MyTls, PasswordsComeFromOnePlaceAndAFileOthersMayReadIsRefused) {
  const std::string readable = world().certs.path("readable-password");
  std::ofstream(readable) << kSecret << "\n";
  ::chmod(readable.c_str(), 0644);
  const std::string base = "mysql://baton_x509@127.0.0.1:" + world().port() +
                           "/baton_test?ssl_mode=verify_identity&ca=" +
                           world().certs.path("ca.pem") + "&" +
                           world().client_cert();
  expect_refused(base + "&password_file=" + readable, Errc::invalid_argument,
                 {"password_file \"" + readable + "\" has mode 0644"});
  expect_refused(
      base + "&password_file=" + world().password_file + "&password=" + kSecret,
      Errc::invalid_argument, {"not both"});
  // MYSQL_PWD, the last place looked at.
  ::setenv("MYSQL_PWD", kSecret, 1);
  expect_works(base);
  ::unsetenv("MYSQL_PWD");
}

Result<Client> open_under_test(const ClientOptions& options) {
  return Client::open(world().x509(), options);
}

}  // namespace
}  // namespace baton::testing

INSTANTIATE_CONFORMANCE(
    MySQLTls, baton::testing::open_under_test,
    baton::conformance::repeated(baton::testing::mysql_traits()));
