// tests/redis/rediss_test.cc — rediss:// and redlock://?tls=1 against
// private redis-server processes with TLS on (Debian's redis 7 is built
// with TLS), certificates made at test time (tests/server/test_certs.h).
// Started once for the binary (RedisProcess with RedisTls: a TLS port, and
// a plain port on the same server, bound to 127.0.0.1 and 127.0.0.2 so that
// an address the certificate does not name reaches it): a main server, and
// two more that make up a redlock:// trio with it. The whole conformance suite
// runs over rediss:// on the main server.
#include <gtest/gtest.h>
#include <hiredis/hiredis.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "baton/client.h"
#include "baton/counter.h"
#include "child_process.h"
#include "conformance.h"
#include "redis_process.h"
#include "stores/redis/common.h"
#include "stores/redis/conn.h"
#include "stores/redis/instance.h"
#include "stores/redis/redis_store.h"
#include "test_certs.h"

namespace baton::testing {
namespace {

using namespace std::chrono_literals;

struct World {
  TestCertificates certs;
  std::unique_ptr<RedisProcess> main, b, c;
  World() {
    const RedisTls tls{certs.path("server.pem"), certs.path("server.key"),
                       certs.path("ca.pem")};
    main = std::make_unique<RedisProcess>(false, &tls);
    b = std::make_unique<RedisProcess>(false, &tls);
    c = std::make_unique<RedisProcess>(false, &tls);
  }
  std::string ca() const { return certs.path("ca.pem"); }
  std::string url(const std::string& extra = "") const {
    return "rediss://" + main->hostport() + "?ca=" + ca() + extra;
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

Result<Client> open_under_test(const ClientOptions& options) {
  return open_client(world().url(), options);
}

std::string unique(const std::string& what) {
  static int n = 0;
  return "rediss-test/" + what + "/" + std::to_string(::getpid()) + "-" +
         std::to_string(++n);
}

// Runs a command on the main server over TLS (the store's own plumbing).
void config_set(const std::string& key, const std::string& value) {
  // With a client certificate: also accepted once one is required.
  auto u = parse_store_url(
      world().url("&timeout=2000&cert=" + world().certs.path("client.pem") +
                  "&key=" + world().certs.path("client.key")),
      store::redis_descriptor());
  ASSERT_TRUE(u.ok()) << u.error().to_string();
  auto cfg = store::redis::config_of(*u);
  ASSERT_TRUE(cfg.ok()) << cfg.error().to_string();
  const store::redis::Target& t = cfg->targets[0];
  auto conn = store::redis::connect(t, CallContext());
  ASSERT_TRUE(conn.ok()) << conn.error().to_string();
  auto r = store::redis::command(conn->get(), t, {"CONFIG", "SET", key, value},
                                 CallContext());
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  ASSERT_EQ((*r)->type, REDIS_REPLY_STATUS) << std::string((*r)->str);
}

void expect_error(const std::string& url, Errc code, const std::string& part) {
  auto s = open_store(url);
  ASSERT_FALSE(s.ok()) << url << " opened";
  std::printf("%s\n  -> %s\n", url.c_str(), s.error().to_string().c_str());
  EXPECT_EQ(s.error().code(), code) << s.error().to_string();
  EXPECT_NE(s.error().message().find(part), std::string::npos)
      << "\"" << s.error().message() << "\" does not contain \"" << part
      << "\"";
}

TEST(Rediss, AcquireExtendReleaseAndCounters) {
  auto c = open_client(world().url());
  ASSERT_TRUE(c.ok()) << c.error().to_string();
  const std::string name = unique("basic");
  AcquireOptions o;
  o.ttl = 10s;
  auto l = c->try_acquire(name, o);
  ASSERT_TRUE(l.ok()) << l.error().to_string();
  auto ext = c->extend(*l, 20s);
  ASSERT_TRUE(ext.ok()) << ext.error().to_string();
  auto rel = c->release(*l);
  ASSERT_TRUE(rel.ok()) << rel.error().to_string();
  EXPECT_TRUE(*rel);
  // Counter changes run only on connections checked idle (pool probe): a
  // TLS 1.3 session ticket waiting on an idle connection must not count
  // as "the server closed it", and the value must come out right.
  const std::string counter = unique("counter");
  for (int i = 1; i <= 5; ++i) {
    auto v = c->counter(counter).add(1);
    ASSERT_TRUE(v.ok()) << v.error().to_string();
    EXPECT_EQ(*v, i);
  }
}

// The waiter's wake-up comes over the subscriber connection, which must be
// TLS too: a wake-up message is delivered (not only a periodic re-check).
TEST(Rediss, WaiterIsWokenOverTheTlsSubscriber) {
  auto c = open_client(world().url());
  ASSERT_TRUE(c.ok()) << c.error().to_string();
  const std::string name = unique("wake");
  AcquireOptions o;
  o.ttl = 30s;
  auto held = c->try_acquire(name, o);
  ASSERT_TRUE(held.ok()) << held.error().to_string();
  auto& hooks = store::redis::test_hooks();
  hooks.recheck_ms = 20000;  // a re-check cannot be what wakes it
  const auto delivered = hooks.delivered.load();
  std::thread releaser([&] {
    std::this_thread::sleep_for(500ms);
    (void)c->release(*held);
  });
  const auto t0 = std::chrono::steady_clock::now();
  auto l = c->acquire(name, 10s, o);
  const auto took = std::chrono::steady_clock::now() - t0;
  releaser.join();
  hooks.recheck_ms = 0;
  ASSERT_TRUE(l.ok()) << l.error().to_string();
  EXPECT_GT(hooks.delivered.load(), delivered);
  EXPECT_LT(took, 10s);
  (void)c->release(*l);
}

TEST(Rediss, WrongCaIsUnavailableNamingTlsVerification) {
  const std::string other = world().certs.path("other_ca.pem");
  expect_error("rediss://" + world().main->hostport() + "?ca=" + other,
               Errc::unavailable, "TLS handshake failed: server certificate: ");
  expect_error("rediss://" + world().main->hostport() + "?ca=" + other,
               Errc::unavailable, "ca=" + other);
  // No ca=: the system CAs, which do not know the test CA.
  expect_error("rediss://" + world().main->hostport(), Errc::unavailable,
               "system CAs");
}

TEST(Rediss, AddressNotNamedByTheCertificateIsRefused) {
  // Same server, reached at 127.0.0.2: the certificate names 127.0.0.1.
  expect_error("rediss://127.0.0.2:" + std::to_string(world().main->port()) +
                   "?ca=" + world().ca(),
               Errc::unavailable, "IP address mismatch");
}

TEST(Rediss, PlainClientOnTlsPortIsAClearError) {
  // Without a password nothing is sent at open(); the first call is
  // refused.
  ClientOptions co;
  co.max_retries = 0;
  auto c =
      open_client("redis://" + world().main->hostport() + "?timeout=2000", co);
  ASSERT_TRUE(c.ok()) << c.error().to_string();
  AcquireOptions o;
  o.ttl = 10s;
  auto l = c->try_acquire(unique("plain-on-tls"), o);
  ASSERT_FALSE(l.ok());
  std::printf("plain client on TLS port -> %s\n",
              l.error().to_string().c_str());
  EXPECT_EQ(l.error().code(), Errc::unavailable) << l.error().to_string();
  EXPECT_NE(l.error().message().find("use rediss://"), std::string::npos)
      << l.error().to_string();
  // With a password, open() sends AUTH and reports it there.
  expect_error("redis://:pw@" + world().main->hostport() + "?timeout=2000",
               Errc::unavailable, "use rediss://");
}

TEST(Rediss, TlsClientOnPlainPortIsAClearError) {
  const auto t0 = std::chrono::steady_clock::now();
  expect_error(
      "rediss://127.0.0.1:" + std::to_string(world().main->plain_port()) +
          "?timeout=500&ca=" + world().ca(),
      Errc::unavailable, "plain-text port?");
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 10s);
}

TEST(Rediss, ClientCertificateRequired) {
  config_set("tls-auth-clients", "yes");
  struct Restore {
    ~Restore() { config_set("tls-auth-clients", "optional"); }
  } restore;
  AcquireOptions o;
  o.ttl = 10s;
  // Without a client certificate: refused. TLS 1.3 reports it after the
  // handshake, at the first reply: open() (nothing sent without a password)
  // succeeds, the first call fails.
  ClientOptions co;
  co.max_retries = 0;
  auto no = open_client(world().url("&timeout=2000"), co);
  ASSERT_TRUE(no.ok()) << no.error().to_string();
  auto refused = no->try_acquire(unique("mtls-none"), o);
  ASSERT_FALSE(refused.ok());
  std::printf("no client certificate -> %s\n",
              refused.error().to_string().c_str());
  EXPECT_EQ(refused.error().code(), Errc::unavailable)
      << refused.error().to_string();
  EXPECT_NE(refused.error().message().find("give cert= and key="),
            std::string::npos)
      << refused.error().to_string();
  // With cert and key: works.
  auto c = open_client(world().url("&cert=" + world().certs.path("client.pem") +
                                   "&key=" + world().certs.path("client.key")));
  ASSERT_TRUE(c.ok()) << c.error().to_string();
  auto l = c->try_acquire(unique("mtls"), o);
  ASSERT_TRUE(l.ok()) << l.error().to_string();
  EXPECT_TRUE(c->release(*l).ok());
}

TEST(Rediss, RedlockOverTls) {
  World& w = world();
  const std::string url = "redlock://" + w.main->hostport() + "," +
                          w.b->hostport() + "," + w.c->hostport() +
                          "?tls=1&timeout=2000&ca=" + w.ca();
  auto c = open_client(url);
  ASSERT_TRUE(c.ok()) << c.error().to_string();
  AcquireOptions o;
  o.ttl = 10s;
  const std::string name = unique("redlock");
  auto l = c->try_acquire(name, o);
  ASSERT_TRUE(l.ok()) << l.error().to_string();
  auto again = c->try_acquire(name, o);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.error().code(), Errc::not_acquired);
  EXPECT_TRUE(c->release(*l).ok());
  // The same trio without tls=1: plain clients on TLS ports get no grant.
  auto plain =
      open_client("redlock://" + w.main->hostport() + "," + w.b->hostport() +
                  "," + w.c->hostport() + "?timeout=500");
  ASSERT_TRUE(plain.ok()) << plain.error().to_string();
  auto p = plain->try_acquire(unique("redlock-plain"), o);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.error().code(), Errc::unavailable) << p.error().to_string();
}

// A trio whose certificates do not verify (wrong CA) fails open(), naming
// a master and the reason; with tls=1 every master is tried at open.
TEST(Rediss, RedlockWithAnUntrustedCertificateFailsAtOpen) {
  World& w = world();
  expect_error("redlock://" + w.main->hostport() + "," + w.b->hostport() + "," +
                   w.c->hostport() +
                   "?tls=1&timeout=2000&ca=" + w.certs.path("other_ca.pem"),
               Errc::unavailable, "TLS handshake failed: server certificate: ");
}

TEST(Rediss, OptionErrorsNameTheProblem) {
  const std::string hp = world().main->hostport();
  const std::string ca = world().ca();
  expect_error("redis://" + hp + "?ca=" + ca, Errc::invalid_argument,
               "ca is a TLS option but TLS is off (write rediss://");
  expect_error("redlock://" + hp + "," + hp + "," + hp + "?ca=" + ca,
               Errc::invalid_argument, "add tls=1");
  expect_error("redlock://" + hp + "," + hp + "," + hp + "?tls=maybe",
               Errc::invalid_argument, "tls: \"maybe\" is not a flag");
  expect_error("rediss://" + hp + "?tls=1", Errc::invalid_argument,
               "unknown option \"tls\"");
  expect_error("rediss://" + hp + "?ca=" + ca + "&bogus=1",
               Errc::invalid_argument, "unknown option \"bogus\"");
  expect_error("rediss://" + hp + "?ca=/nonexistent/ca.pem",
               Errc::invalid_argument,
               "ca: /nonexistent/ca.pem: cannot read it: No such file");
  expect_error("rediss://" + hp + "?ca=" + ca +
                   "&cert=" + world().certs.path("client.pem"),
               Errc::invalid_argument, "cert and key go together");
  expect_error("rediss://" + hp + "?ca=" + ca +
                   "&cert=" + world().certs.path("client.pem") +
                   "&key=" + world().certs.path("server.key"),
               Errc::invalid_argument, "this key does not belong to cert");
}

// A password never appears in an error (nor in the store's URL).
TEST(Rediss, PasswordIsNotEchoed) {
  auto s = open_store("rediss://:sekrit-pw@" + world().main->hostport() +
                      "?ca=" + world().certs.path("other_ca.pem"));
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().to_string().find("sekrit-pw"), std::string::npos)
      << s.error().to_string();
  auto bad = open_store("rediss://:sekrit-pw@" + world().main->hostport() +
                        "?ca=" + world().ca() + "&nope=1");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().to_string().find("sekrit-pw"), std::string::npos)
      << bad.error().to_string();
}

}  // namespace
}  // namespace baton::testing

INSTANTIATE_CONFORMANCE(Rediss, baton::testing::open_under_test,
                        baton::conformance::repeated());
