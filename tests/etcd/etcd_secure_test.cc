// tests/etcd/etcd_secure_test.cc — etcds:// against one private etcd member
// with TLS (client certificates required) and authentication enabled
// (tests/etcd/etcd_secure.h), started once for the binary with a 2 s
// --auth-token-ttl so that a token expires within a test. What must hold
// (docs/stores/etcd.md, "Security"): the role's user locks; a wrong
// password, a user without the role, an untrusted server certificate, a
// host the certificate does not name, a missing client certificate and TLS
// on one side only are refused at open naming the store, the member and
// the reason, with nothing written; a revoked permission is
// permission_denied naming the prefix; an expired token is renewed; no
// password shows in any message or URL.
#include "etcd_secure.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "baton/client.h"
#include "baton/counter.h"
#include "baton/store_descriptor.h"
#include "stores/etcd/etcd_impl.h"

namespace baton::testing {
namespace {

using namespace std::chrono_literals;

SecureEtcd* g_etcd = nullptr;
SecureEtcd& etcd() {
  if (g_etcd == nullptr) {
    g_etcd = new SecureEtcd("sec", /*token_ttl_s=*/2);
    std::atexit([] { delete g_etcd; });
  }
  return *g_etcd;
}

std::string unique(const std::string& what) {
  static int n = 0;
  return "secure/" + what + "/" + std::to_string(::getpid()) + "-" +
         std::to_string(++n);
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// No secret of the test in `s`.
void expect_no_secret(const std::string& s) {
  for (const char* pw :
       {kRootPassword, kBatonPassword, kNorolePassword, kWrongPassword}) {
    EXPECT_FALSE(contains(s, pw)) << "a password leaked";
  }
}

// Opening `url` fails with `code` and a message holding every one of
// `parts`; it says so within `within`.
Error expect_refused(const std::string& url, Errc code,
                     const std::vector<std::string>& parts,
                     std::chrono::milliseconds within = 5s) {
  const auto t0 = std::chrono::steady_clock::now();
  auto s = open_store(url);
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_FALSE(s.ok()) << "opened";
  if (s.ok()) return Error();
  const Error e = s.error();
  std::printf("  -> %s\n", e.to_string().c_str());
  EXPECT_EQ(e.code(), code) << e.to_string();
  for (const auto& p : parts) {
    EXPECT_TRUE(contains(e.message(), p))
        << "\"" << e.message() << "\" does not contain \"" << p << "\"";
  }
  EXPECT_LT(took, within);
  expect_no_secret(e.to_string());
  return e;
}

store::etcd::EtcdStore* etcd_of(Store* s) {
  return dynamic_cast<store::etcd::EtcdStore*>(s);
}

TEST(EtcdSecure, UserWithTheRoleLocksOverTls) {
  auto c = Client::open(etcd().url());
  ASSERT_TRUE(c.ok()) << c.error().to_string();
  expect_no_secret(c->url());
  const std::string name = unique("basic");
  AcquireOptions o;
  o.ttl = 10s;
  auto l = c->try_acquire(name, o);
  ASSERT_TRUE(l.ok()) << l.error().to_string();
  // Its key is where the role allows it, under the prefix.
  EXPECT_TRUE(contains(etcd().keys(), "sec/l/"));
  auto again = c->try_acquire(name, o);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.error().code(), Errc::not_acquired);
  auto ext = c->extend(*l, 20s);
  ASSERT_TRUE(ext.ok()) << ext.error().to_string();
  auto rel = c->release(*l);
  ASSERT_TRUE(rel.ok()) << rel.error().to_string();
  EXPECT_TRUE(*rel);
  auto v = c->counter(unique("counter")).add(3);
  ASSERT_TRUE(v.ok()) << v.error().to_string();
  EXPECT_EQ(*v, 3);
}

// etcd://...?tls=1 is etcds://.
TEST(EtcdSecure, TlsFlagOnEtcdSchemeIsTls) {
  std::string url = etcd().url();
  ASSERT_EQ(url.rfind("etcds://", 0), 0u);
  url = "etcd://" + url.substr(8) + "&tls=1";
  auto c = Client::open(url);
  ASSERT_TRUE(c.ok()) << c.error().to_string();
  AcquireOptions o;
  o.ttl = 5s;
  auto l = c->try_acquire(unique("tls-flag"), o);
  ASSERT_TRUE(l.ok()) << l.error().to_string();
  EXPECT_TRUE(c->release(*l).ok());
}

// A waiter is woken by its watch (Watch is covered by the role's read).
TEST(EtcdSecure, WaiterIsWokenThroughTheWatch) {
  auto c = Client::open(etcd().url());
  ASSERT_TRUE(c.ok()) << c.error().to_string();
  const std::string name = unique("wake");
  AcquireOptions o;
  o.ttl = 10s;
  auto held = c->try_acquire(name, o);
  ASSERT_TRUE(held.ok()) << held.error().to_string();
  std::thread releaser([&] {
    std::this_thread::sleep_for(300ms);
    (void)c->release(*held);
  });
  const auto t0 = std::chrono::steady_clock::now();
  auto l = c->acquire(name, 10s, o);
  releaser.join();
  ASSERT_TRUE(l.ok()) << l.error().to_string();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 3s);
  EXPECT_GT(l->fencing_token, held->fencing_token);
  EXPECT_TRUE(c->release(*l).ok());
}

TEST(EtcdSecure, WrongPasswordIsRefusedAtOpen) {
  const std::string before = etcd().keys();
  expect_refused(etcd().url_as("baton", kWrongPassword),
                 Errc::permission_denied,
                 {"etcd://", etcd().hostport(), "user \"baton\"",
                  "could not log in", "authentication failed"});
  // The same in the URL's userinfo: masked in the message.
  expect_refused("etcds://baton:" + std::string(kWrongPassword) + "@" +
                     etcd().hostport() + "/sec" +
                     etcd().cluster().tls_query("?"),
                 Errc::permission_denied, {"could not log in"});
  EXPECT_EQ(etcd().keys(), before);
}

TEST(EtcdSecure, UserWithoutTheRoleIsRefusedAndWritesNothing) {
  const std::string before = etcd().keys();
  expect_refused(
      etcd().url_as("norole", kNorolePassword), Errc::permission_denied,
      {"etcd://", etcd().hostport(), "user \"norole\"", "key prefix \"sec/\"",
       "permission denied", "role grant-permission"});
  EXPECT_EQ(etcd().keys(), before);
}

// Read without write: the open's read passes, the first write is refused
// and leaves nothing.
TEST(EtcdSecure, ReadOnlyUserIsRefusedItsFirstWrite) {
  static bool made = false;
  if (!made) {
    etcd().add_role("reader", "read");
    etcd().add_user("reader", kNorolePassword, "reader");
    made = true;
  }
  const std::string before = etcd().keys();
  ClientOptions co;
  co.max_retries = 0;
  auto c = Client::open(etcd().url_as("reader", kNorolePassword), co);
  ASSERT_TRUE(c.ok()) << c.error().to_string();
  AcquireOptions o;
  o.ttl = 5s;
  auto l = c->try_acquire(unique("read-only"), o);
  ASSERT_FALSE(l.ok());
  std::printf("  -> %s\n", l.error().to_string().c_str());
  EXPECT_EQ(l.error().code(), Errc::permission_denied) << l.error().to_string();
  EXPECT_TRUE(contains(l.error().message(), "key prefix \"sec/\""));
  EXPECT_TRUE(contains(l.error().message(), etcd().hostport()));
  expect_no_secret(l.error().to_string());
  EXPECT_EQ(etcd().keys(), before);
}

// A permission revoked while the store is open: the next call is
// permission_denied naming the store, the member and the prefix.
TEST(EtcdSecure, RevokedPermissionIsPermissionDenied) {
  etcd().add_role("revokee", "readwrite");
  etcd().add_user("revokee", kNorolePassword, "revokee");
  ClientOptions co;
  co.max_retries = 0;
  auto c = Client::open(etcd().url_as("revokee", kNorolePassword), co);
  ASSERT_TRUE(c.ok()) << c.error().to_string();
  AcquireOptions o;
  o.ttl = 5s;
  const std::string name = unique("revoked");
  auto l = c->try_acquire(name, o);
  ASSERT_TRUE(l.ok()) << l.error().to_string();
  ASSERT_TRUE(c->release(*l).ok());
  etcd().admin({"role", "revoke-permission", "revokee", "--prefix=true",
                etcd().prefix() + "/"});
  auto denied = c->try_acquire(name, o);
  ASSERT_FALSE(denied.ok());
  std::printf("  -> %s\n", denied.error().to_string().c_str());
  EXPECT_EQ(denied.error().code(), Errc::permission_denied)
      << denied.error().to_string();
  for (const std::string& p :
       {std::string("etcd://"), etcd().hostport(),
        std::string("user \"revokee\""), std::string("key prefix \"sec/\"")}) {
    EXPECT_TRUE(contains(denied.error().message(), p))
        << denied.error().message() << " lacks " << p;
  }
  expect_no_secret(denied.error().to_string());
}

// The change feed is a watch on the lock keys' range: it needs the role's
// read permission there. Once revoked, a new feed is refused
// (permission_denied naming the prefix); the refusal of a stale token is
// not taken for it (the feed logs in again first).
TEST(EtcdSecure, FeedWithoutReadPermissionIsPermissionDenied) {
  etcd().add_role("unwatched", "readwrite");
  etcd().add_user("unwatched", kNorolePassword, "unwatched");
  ClientOptions co;
  co.max_retries = 0;
  auto c = Client::open(etcd().url_as("unwatched", kNorolePassword), co);
  ASSERT_TRUE(c.ok()) << c.error().to_string();
  auto feed = c->watch("w/");
  ASSERT_TRUE(feed.ok()) << feed.error().to_string();
  ASSERT_NE(*feed, nullptr);
  // Another role's change moves the auth store on: the token the client
  // holds is now stale, and the next feed must log in again.
  etcd().add_role("bystander", "read");
  auto again = c->watch("w/");
  ASSERT_TRUE(again.ok()) << again.error().to_string();
  etcd().admin({"role", "revoke-permission", "unwatched", "--prefix=true",
                etcd().prefix() + "/"});
  auto denied = c->watch("w/");
  ASSERT_FALSE(denied.ok());
  std::printf("  -> %s\n", denied.error().to_string().c_str());
  EXPECT_EQ(denied.error().code(), Errc::permission_denied)
      << denied.error().to_string();
  EXPECT_TRUE(contains(denied.error().message(), "key prefix \"sec/\""))
      << denied.error().message();
  expect_no_secret(denied.error().to_string());
}

TEST(EtcdSecure, UntrustedServerCertificateIsRefusedAtOpen) {
  const std::string other = etcd().certs().path("other_ca.pem");
  const std::string client = "&cert=" + etcd().certs().path("client.pem") +
                             "&key=" + etcd().certs().path("client.key");
  expect_refused("etcds://" + etcd().hostport() + "/sec?ca=" + other + client,
                 Errc::unavailable,
                 {"etcd://", "TLS handshake with " + etcd().hostport(),
                  "server certificate", "ca=" + other},
                 3s);
  // No ca=: the system CAs, which do not know the test CA.
  expect_refused("etcds://" + etcd().hostport() + "/sec?" + client.substr(1),
                 Errc::unavailable, {"the system CAs"}, 3s);
}

TEST(EtcdSecure, HostTheCertificateDoesNotNameIsRefusedAtOpen) {
  // The same member at 127.0.0.2: the certificate names 127.0.0.1.
  const std::string other = "127.0.0.2:" + std::to_string(etcd().port());
  expect_refused(
      "etcds://" + other + "/sec" + etcd().cluster().tls_query("?"),
      Errc::unavailable,
      {"etcd://", "TLS handshake with " + other, "IP address mismatch"}, 3s);
}

TEST(EtcdSecure, ClientCertificateIsRequired) {
  const std::string ca = etcd().certs().path("ca.pem");
  expect_refused("etcds://" + etcd().hostport() + "/sec?ca=" + ca,
                 Errc::unavailable,
                 {"etcd://", etcd().hostport(), "give cert= and key="}, 3s);
  // A certificate the server's CA did not sign.
  expect_refused(
      "etcds://" + etcd().hostport() + "/sec?ca=" + ca +
          "&cert=" + etcd().certs().path("other_ca.pem") +
          "&key=" + etcd().certs().path("other_ca.key"),
      Errc::unavailable,
      {"etcd://", etcd().hostport(), "refused the client certificate"}, 3s);
}

TEST(EtcdSecure, TlsOnOneSideOnlyIsNamed) {
  expect_refused("etcd://" + etcd().hostport() + "/sec", Errc::unavailable,
                 {"etcd://", etcd().hostport(), "write etcds://"}, 3s);
}

TEST(EtcdSecure, OptionErrorsNameTheProblem) {
  const std::string hp = etcd().hostport();
  const std::string ca = etcd().certs().path("ca.pem");
  const std::string tls = etcd().cluster().tls_query("?");
  const std::string pwf = etcd().password_file(kBatonPassword);
  expect_refused("etcd://" + hp + "/sec?ca=" + ca, Errc::invalid_argument,
                 {"ca is a TLS option but TLS is off"});
  expect_refused("etcds://" + hp + "/sec?tls=0&ca=" + ca,
                 Errc::invalid_argument, {"contradicts etcds://"});
  expect_refused("etcds://" + hp + "/sec?ca=" + ca +
                     "&cert=" + etcd().certs().path("client.pem"),
                 Errc::invalid_argument, {"cert and key go together"});
  expect_refused("etcds://" + hp + "/sec?ca=" + ca +
                     "&cert=" + etcd().certs().path("client.pem") +
                     "&key=" + etcd().certs().path("server.key"),
                 Errc::invalid_argument, {"key="});
  expect_refused("etcds://" + hp + "/sec" + tls + "&password_file=" + pwf,
                 Errc::invalid_argument, {"a password needs a user"});
  ::unsetenv("ETCDCTL_PASSWORD");
  expect_refused("etcds://baton@" + hp + "/sec" + tls, Errc::invalid_argument,
                 {"user \"baton\" needs a password"});
  expect_refused("etcds://baton:" + std::string(kBatonPassword) + "@" + hp +
                     "/sec" + tls + "&password_file=" + pwf,
                 Errc::invalid_argument, {"not both"});
  const std::string loose = etcd().certs().path("loose-pw");
  std::ofstream(loose) << kBatonPassword << "\n";
  ::chmod(loose.c_str(), 0644);
  expect_refused(
      "etcds://baton@" + hp + "/sec" + tls + "&password_file=" + loose,
      Errc::invalid_argument, {"other users may read it"});
  expect_refused(etcd().url_as("baton", kBatonPassword, "&token_refresh=500ms"),
                 Errc::invalid_argument, {"token_refresh"});
}

// Every place a password may come from, and none shows it again.
TEST(EtcdSecure, PasswordSourcesWorkAndAreMasked) {
  const std::string hp = etcd().hostport();
  const std::string tls = etcd().cluster().tls_query("?");
  auto in_url = Client::open("etcds://baton:" + std::string(kBatonPassword) +
                             "@" + hp + "/sec" + tls);
  ASSERT_TRUE(in_url.ok()) << in_url.error().to_string();
  expect_no_secret(in_url->url());
  auto as_option = Client::open("etcds://baton@" + hp + "/sec" + tls +
                                "&password=" + kBatonPassword);
  ASSERT_TRUE(as_option.ok()) << as_option.error().to_string();
  expect_no_secret(as_option->url());
  ::setenv("ETCDCTL_PASSWORD", kBatonPassword, 1);
  auto from_env = Client::open("etcds://baton@" + hp + "/sec" + tls);
  ::unsetenv("ETCDCTL_PASSWORD");
  ASSERT_TRUE(from_env.ok()) << from_env.error().to_string();
  AcquireOptions o;
  o.ttl = 5s;
  for (Client* c : {&*in_url, &*as_option, &*from_env}) {
    auto l = c->try_acquire(unique("sources"), o);
    ASSERT_TRUE(l.ok()) << l.error().to_string();
    EXPECT_TRUE(c->release(*l).ok());
  }
}

// The client certificate's CN (client1) is an etcd user with the role:
// no password needed (etcd's --client-cert-auth).
TEST(EtcdSecure, ClientCertificateCnIsTheUser) {
  auto c = Client::open("etcds://" + etcd().hostport() + "/sec" +
                        etcd().cluster().tls_query("?"));
  ASSERT_TRUE(c.ok()) << c.error().to_string();
  AcquireOptions o;
  o.ttl = 5s;
  auto l = c->try_acquire(unique("cn"), o);
  ASSERT_TRUE(l.ok()) << l.error().to_string();
  EXPECT_TRUE(c->release(*l).ok());
}

// The server's tokens live 2 s (--auth-token-ttl 2, renewed by each use).
// An idle store's token expires; its next call is refused "invalid auth
// token", the store logs in again and sends it once more.
TEST(EtcdSecure, ExpiredTokenIsRenewedAndTheCallSentAgain) {
  auto s =
      open_store(etcd().url_as("baton", kBatonPassword, "&token_refresh=1h"));
  ASSERT_TRUE(s.ok()) << s.error().to_string();
  auto* e = etcd_of(s->get());
  ASSERT_NE(e, nullptr);
  std::shared_ptr<Store> owner(std::move(*s));
  auto c = Client::wrap(owner);
  const auto logins = e->conn().authentications();
  const auto resent = e->conn().token_retries();
  EXPECT_EQ(logins, 1u);
  std::this_thread::sleep_for(3500ms);  // the token expires meanwhile
  AcquireOptions o;
  o.ttl = 5s;
  auto l = c.try_acquire(unique("expired"), o);
  ASSERT_TRUE(l.ok()) << l.error().to_string();
  EXPECT_TRUE(c.release(*l).ok());
  EXPECT_GE(e->conn().token_retries(), resent + 1);
  EXPECT_GE(e->conn().authentications(), logins + 1);
}

// token_refresh below the server's TTL: the token is renewed before the
// call, which etcd never refuses.
TEST(EtcdSecure, TokenIsRenewedBeforeItExpires) {
  auto s =
      open_store(etcd().url_as("baton", kBatonPassword, "&token_refresh=1s"));
  ASSERT_TRUE(s.ok()) << s.error().to_string();
  auto* e = etcd_of(s->get());
  ASSERT_NE(e, nullptr);
  std::shared_ptr<Store> owner(std::move(*s));
  auto c = Client::wrap(owner);
  const auto logins = e->conn().authentications();
  AcquireOptions o;
  o.ttl = 5s;
  for (int i = 0; i < 3; ++i) {
    std::this_thread::sleep_for(1500ms);
    auto l = c.try_acquire(unique("renewed"), o);
    ASSERT_TRUE(l.ok()) << l.error().to_string();
    EXPECT_TRUE(c.release(*l).ok());
  }
  EXPECT_GE(e->conn().authentications(), logins + 3);
  EXPECT_EQ(e->conn().token_retries(), 0u);
}

}  // namespace
}  // namespace baton::testing
