// tests/postgres/postgres_tls_test.cc — postgres:// over TLS against a
// private PostgreSQL 15 started once for this binary with ssl=on, a
// certificate from a CA made at test time (tests/server/test_certs.h) and a
// pg_hba.conf that takes TCP clients over TLS only (`hostnossl ... reject`)
// and the role client1 by client certificate (`cert`). The conformance
// suite runs over sslmode=verify-full; the other tests check the errors.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string>

#include "baton/client.h"
#include "baton/store_descriptor.h"
#include "conformance.h"
#include "pg_server.h"
#include "postgres_traits.h"
#include "test_certs.h"

namespace baton::testing {
namespace {

using namespace std::chrono_literals;

struct World {
  TestCertificates certs;
  std::unique_ptr<PgServer> server;
  World() {
    PgTls tls;
    tls.cert = certs.path("server.pem");
    tls.key = certs.path("server.key");
    tls.ca = certs.path("ca.pem");
    tls.hba =
        "local all all trust\n"
        "hostssl all client1 127.0.0.1/32 cert\n"
        "hostssl all all 127.0.0.1/32 trust\n"
        "hostnossl all all 127.0.0.1/32 reject\n";
    server = std::make_unique<PgServer>(&tls);
    // libpq's default sslmode (prefer) takes TLS here.
    Sql sql(server->conninfo());
    if (!sql.ok()) throw std::runtime_error("no SQL connection");
    const std::string r = sql.one("CREATE ROLE client1 LOGIN SUPERUSER");
    if (r.rfind("ERROR", 0) == 0) throw std::runtime_error(r);
  }
  std::string ca() const { return certs.path("ca.pem"); }
  // postgres://<user>@127.0.0.1:<port>/postgres?<query>
  std::string url(const std::string& query,
                  const std::string& user = "postgres") const {
    return "postgres://" + user +
           "@127.0.0.1:" + std::to_string(server->port()) + "/postgres?" +
           query;
  }
  std::string verified(const std::string& more = "") const {
    return url("sslmode=verify-full&sslrootcert=" + ca() + more);
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

Result<std::shared_ptr<Store>> open(const std::string& url) {
  auto s = open_store(url);
  if (!s.ok()) return std::move(s).error();
  return std::shared_ptr<Store>(std::move(*s));
}

Result<Client> open_under_test(const ClientOptions& options) {
  auto s = open(world().verified());
  if (!s.ok()) return std::move(s).error();
  return Client::wrap(*s, options);
}

Error expect_error(const std::string& url, Errc code, const std::string& part) {
  auto s = open(url);
  if (s.ok()) {
    ADD_FAILURE() << url << " opened";
    return Error(Errc::internal, "opened");
  }
  // The error only: the URL may hold the test's password, which no test
  // output may show (cmake/BatonTargets.cmake).
  std::printf("-> %s\n", s.error().to_string().c_str());
  EXPECT_EQ(s.error().code(), code) << s.error().to_string();
  EXPECT_NE(s.error().message().find(part), std::string::npos)
      << "\"" << s.error().message() << "\" does not contain \"" << part
      << "\"";
  return s.error();
}

AcquireOptions ttl(std::chrono::milliseconds t) {
  AcquireOptions o;
  o.ttl = t;
  return o;
}

TEST(PostgresTls, VerifyFullAcquireExtendRelease) {
  auto s = open(world().verified());
  ASSERT_TRUE(s.ok()) << s.error().to_string();
  auto c = Client::wrap(*s);
  const std::string name = "pgtls/basic/" + OwnerToken::random().to_string();
  auto l = c.try_acquire(name, ttl(10s));
  ASSERT_TRUE(l.ok()) << l.error().to_string();
  auto e = c.extend(*l, 20s);
  ASSERT_TRUE(e.ok()) << e.error().to_string();
  auto r = c.release(*l);
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_TRUE(*r);
  // The session really is TLS (the server's view of this client's
  // connections).
  Sql sql(world().server->conninfo());
  EXPECT_EQ(sql.one("SELECT count(*) > 0 FROM pg_stat_ssl s JOIN "
                    "pg_stat_activity a USING (pid) WHERE s.ssl AND "
                    "a.application_name = 'baton'"),
            "t");
  EXPECT_EQ(sql.one("SELECT count(*) FROM pg_stat_ssl s JOIN "
                    "pg_stat_activity a USING (pid) WHERE NOT s.ssl AND "
                    "a.application_name = 'baton'"),
            "0");
}

TEST(PostgresTls, WrongCaIsAClearError) {
  expect_error(world().url("sslmode=verify-full&sslrootcert=" +
                           world().certs.path("other_ca.pem")),
               Errc::unavailable, "certificate verify failed");
}

TEST(PostgresTls, PlainConnectionIsRefusedByTheServer) {
  expect_error(world().url("sslmode=disable"), Errc::unavailable,
               "no encryption");
}

TEST(PostgresTls, ClientCertificateAuthentication) {
  // client1 authenticates by certificate only (pg_hba `cert`).
  expect_error(
      world().url("sslmode=verify-full&sslrootcert=" + world().ca(), "client1"),
      Errc::unavailable, "certificate");
  auto s = open(world().url("sslmode=verify-full&sslrootcert=" + world().ca() +
                                "&sslcert=" + world().certs.path("client.pem") +
                                "&sslkey=" + world().certs.path("client.key"),
                            "client1"));
  ASSERT_TRUE(s.ok()) << s.error().to_string();
  auto c = Client::wrap(*s);
  auto l =
      c.try_acquire("pgtls/cert/" + OwnerToken::random().to_string(), ttl(10s));
  ASSERT_TRUE(l.ok()) << l.error().to_string();
  EXPECT_TRUE(c.release(*l).ok());
}

TEST(PostgresTls, SettingErrorsNameTheProblem) {
  expect_error(world().url("sslmode=verify_full"), Errc::invalid_argument,
               "sslmode: \"verify_full\" must be one of");
  expect_error(world().url("sslmode=verify-full&sslrootcert=/nonexistent.pem"),
               Errc::invalid_argument, "ca: /nonexistent.pem: cannot read it");
  expect_error(world().verified("&sslpassword=x"), Errc::invalid_argument,
               "sslpassword is not accepted");
  expect_error(world().verified("&sslsni=1"), Errc::invalid_argument,
               "unknown option \"sslsni\"");
}

// A password never appears in an error.
TEST(PostgresTls, PasswordIsNotEchoed) {
  const std::string url = "postgres://postgres:sekrit-pw@127.0.0.1:" +
                          std::to_string(world().server->port()) +
                          "/postgres?sslmode=disable";
  Error e = expect_error(url, Errc::unavailable, "no encryption");
  EXPECT_EQ(e.to_string().find("sekrit-pw"), std::string::npos)
      << e.to_string();
  Error bad = expect_error(world().verified("&password=sekrit-pw&bogus=1"),
                           Errc::invalid_argument, "bogus");
  EXPECT_EQ(bad.to_string().find("sekrit-pw"), std::string::npos)
      << bad.to_string();
}

}  // namespace
}  // namespace baton::testing

INSTANTIATE_CONFORMANCE(
    PostgresTls, baton::testing::open_under_test,
    baton::conformance::repeated(baton::testing::postgres_traits()));
