// tests/zookeeper/zookeeper_security_test.cc — zookeeper:// with digest
// credentials (docs/stores/zookeeper.md, "Security"), against this
// binary's private ZooKeeper 3.8 server: the ACL of every node the store
// makes; clients without or with wrong credentials (the C client, raw)
// cannot read, change or delete a holder's node or its parents, and the
// holder keeps its lease; a wrong password is refused at open and writes
// nothing; ZooKeeper's refusal of the credentials (ZAUTHFAILED) at open;
// nodes with another ACL refused, not adopted; credentials given again to
// a session made after an expiry; TLS options refused; and the password
// never in a message or a URL. ctest fails this binary if its output ever
// holds the password (FAIL_REGULAR_EXPRESSION).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <atomic>
#include <fstream>
#include <optional>
#include <thread>

#include "baton/counter.h"
#include "stores/zookeeper/zk_acl.h"
#include "support/tcp_proxy.h"
#include "zk_test_util.h"

namespace baton::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
namespace zkacl = baton::store::zk;

constexpr const char* kUser = "baton";
constexpr const char* kPassword = "baton-zk-secret-5Kp";
constexpr const char* kDigest = "baton:baton-zk-secret-5Kp";

// A fresh chroot per test: no test sees another's nodes.
std::string new_root() {
  return "/sec-" + OwnerToken::random().to_string().substr(0, 10);
}
std::string hostport_url(const std::string& userinfo, const std::string& root,
                         const std::string& query = {}) {
  return "zookeeper://" + userinfo + shared_server().hostport() + root +
         "?session_timeout=4s" + query;
}
std::string secured_url(const std::string& root,
                        const std::string& query = {}) {
  return hostport_url(std::string(kUser) + ":" + kPassword + "@", root, query);
}
// The ACL every node of a secured store carries, as ZkObserver::get_acl
// prints it.
std::vector<std::string> wanted_acl() {
  return {"digest:" + zkacl::digest_id(kUser, kPassword) + ":31"};
}

// The message must not hold the password.
void expect_no_secret(const std::string& text) {
  EXPECT_EQ(text.find(kPassword), std::string::npos)
      << "the password leaked (message not printed)";
}

// ZooKeeper's own id for "alice:pw1" (read back from a 3.8 server): our
// digest is the server's.
TEST(ZkSecurity, DigestIdIsZooKeepersAndTheServerAgrees) {
  EXPECT_EQ(zkacl::digest_id("alice", "pw1"),
            "alice:0H3LR71td7bmv+FwKgVasiS36rc=");
  EXPECT_EQ(zkacl::sha1_base64(""), "2jmj7l5rSw0yVb/vlWAYkK/YBwk=");
  EXPECT_TRUE(zkacl::valid_digest_id("alice:0H3LR71td7bmv+FwKgVasiS36rc="));
  EXPECT_FALSE(zkacl::valid_digest_id("alice:secret"));
  // The server's id for a session authenticated as kDigest: a node made
  // with the "auth" scheme gets it (the server expands it).
  ZkObserver zk(shared_server().hostport(), kDigest);
  ASSERT_TRUE(zk.ok());
  const std::string path = new_root();
  ASSERT_EQ(zk.create_open(path, "", &ZOO_CREATOR_ALL_ACL), ZOK);
  std::vector<std::string> acl;
  ASSERT_EQ(zk.get_acl(path, &acl), ZOK);
  EXPECT_EQ(acl, wanted_acl());
}

// Every node the store makes — the root, /locks, /counters, /clock, a
// lock's node, holder and waiter requests, a counter — carries the
// credentials' digest id with every permission, and nothing for anyone
// else; admin_id adds its id.
TEST(ZkSecurity, EveryNodeCarriesOnlyTheCredentialsACL) {
  const std::string root = new_root();
  auto holder = open_zk_client(secured_url(root));
  auto waiter = open_zk_client(secured_url(root));
  ASSERT_TRUE(holder.ok()) << holder.error().to_string();
  ASSERT_TRUE(waiter.ok());
  auto lease = holder->try_acquire("acl", opts(30s, "holder"));
  ASSERT_TRUE(lease.ok()) << lease.error().to_string();
  std::thread t([&] { (void)waiter->acquire("acl", 3s, opts(30s, "waiter")); });
  Finally join([&] {
    if (t.joinable()) t.join();
  });
  ASSERT_TRUE(holder->counter("n").add(1).ok());
  ZkObserver zk(shared_server().hostport(), kDigest);
  ASSERT_TRUE(zk.ok());
  const std::string dir = lock_dir("acl", root);
  ASSERT_TRUE(eventually([&] { return zk.count_children(dir) == 2; }));
  std::vector<std::string> kids;
  ASSERT_EQ(zk.children(dir, &kids), ZOK);
  std::vector<std::string> paths = {
      root, root + "/locks",     root + "/counters",  root + "/clock",
      dir,  dir + "/" + kids[0], dir + "/" + kids[1], root + "/counters/n"};
  for (const auto& p : paths) {
    std::vector<std::string> acl;
    ASSERT_EQ(zk.get_acl(p, &acl), ZOK) << p;
    EXPECT_EQ(acl, wanted_acl()) << p;
  }
  ASSERT_TRUE(holder->release(*lease).ok());

  // admin_id: one more digest id with every permission.
  const std::string admin = zkacl::digest_id("ops", "another-secret");
  const std::string root2 = new_root();
  auto c = open_zk_client(secured_url(root2, "&admin_id=" + admin));
  ASSERT_TRUE(c.ok()) << c.error().to_string();
  auto l2 = c->try_acquire("acl", opts(30s));
  ASSERT_TRUE(l2.ok());
  for (const auto& p : {root2, lock_dir("acl", root2)}) {
    std::vector<std::string> acl;
    ASSERT_EQ(zk.get_acl(p, &acl), ZOK);
    EXPECT_EQ(acl, (std::vector<std::string>{wanted_acl()[0],
                                             "digest:" + admin + ":31"}))
        << p;
  }
  // The admin's session may read and delete what the store made.
  ZkObserver ops(shared_server().hostport(), "ops:another-secret");
  ASSERT_TRUE(ops.ok());
  EXPECT_EQ(ops.count_children(lock_dir("acl", root2)), 1);
  // Without credentials the store makes open nodes, as before.
  const std::string root3 = new_root();
  auto open = open_zk_client(hostport_url("", root3));
  ASSERT_TRUE(open.ok());
  std::vector<std::string> acl;
  ASSERT_EQ(zk.get_acl(root3 + "/locks", &acl), ZOK);
  EXPECT_EQ(acl, std::vector<std::string>{"world:anyone:31"});
  // ... and takes a root with an ACL it can use (an operator's ip: ACL)
  // as before.
  const std::string root4 = new_root();
  ACL ip_entry = {zkacl::kPermAll,
                  Id{const_cast<char*>("ip"), const_cast<char*>("127.0.0.1")}};
  ACL_vector ip_acl = {1, &ip_entry};
  ASSERT_EQ(zk.create_open(root4, "", &ip_acl), ZOK);
  auto by_ip = open_zk_client(hostport_url("", root4));
  ASSERT_TRUE(by_ip.ok()) << by_ip.error().to_string();
  EXPECT_TRUE(by_ip->try_acquire("acl", opts(30s)).ok());
}

// A holder and a waiter share the credentials. A raw client without
// credentials, and one with a wrong password, can neither read the
// holder's node (its name and data carry owner tokens), nor change,
// delete or re-ACL it, its lock's node or the root's nodes, nor queue a
// request of its own; the holder keeps its lease (extend works, same
// fencing token) and the waiter is not granted until the holder releases.
TEST(ZkSecurity, ClientsWithoutTheCredentialsCannotTouchAHolder) {
  const std::string root = new_root();
  auto holder = open_zk_client(secured_url(root));
  auto waiter = open_zk_client(secured_url(root));
  ASSERT_TRUE(holder.ok() && waiter.ok());
  auto lease = holder->try_acquire("guarded", opts(30s, "holder"));
  ASSERT_TRUE(lease.ok()) << lease.error().to_string();
  std::atomic<bool> granted{false};
  std::optional<Result<Lease>> got;
  std::thread t([&] {
    got = waiter->acquire("guarded", 30s, opts(30s, "waiter"));
    granted = true;
  });
  Finally join([&] {
    if (t.joinable()) t.join();
  });
  ZkObserver zk(shared_server().hostport(), kDigest);
  ASSERT_TRUE(zk.ok());
  const std::string dir = lock_dir("guarded", root);
  ASSERT_TRUE(eventually([&] { return zk.count_children(dir) == 2; }));
  std::vector<std::string> kids;
  ASSERT_EQ(zk.children(dir, &kids), ZOK);
  const std::string mine = dir + "/" + kids[0];
  const std::string next = dir + "/" + kids[1];
  Stat before{};
  ASSERT_EQ(zk.exists(mine, &before), ZOK);

  for (const std::string digest : {"", "baton:wrong-password"}) {
    SCOPED_TRACE(digest.empty() ? "no credentials" : "a wrong password");
    ZkObserver other(shared_server().hostport(), digest);
    ASSERT_TRUE(other.ok());
    std::string data;
    std::vector<std::string> names, acl;
    EXPECT_EQ(other.get(mine, &data, nullptr), ZNOAUTH);
    EXPECT_EQ(other.children(dir, &names), ZNOAUTH);
    EXPECT_EQ(other.children(root + "/locks", &names), ZNOAUTH);
    EXPECT_EQ(other.get_acl(mine, &acl), ZNOAUTH);
    EXPECT_EQ(other.remove(mine), ZNOAUTH);
    EXPECT_EQ(other.remove(next), ZNOAUTH);
    EXPECT_EQ(other.set(mine, "st=h\nttl=1\n"), ZNOAUTH);
    EXPECT_EQ(other.set_acl_open(mine), ZNOAUTH);
    EXPECT_EQ(other.remove(dir), ZNOAUTH);
    EXPECT_EQ(other.set(dir, "x"), ZNOAUTH);
    EXPECT_EQ(other.set_acl_open(dir), ZNOAUTH);
    EXPECT_EQ(other.create_open(dir + "/q-fake"), ZNOAUTH);
    EXPECT_EQ(other.create_open(root + "/locks/planted"), ZNOAUTH);
    EXPECT_EQ(other.remove(root + "/clock"), ZNOAUTH);
    EXPECT_EQ(other.set(root + "/clock", ""), ZNOAUTH);
    EXPECT_EQ(other.set_acl_open(root), ZNOAUTH);
    EXPECT_EQ(other.set_acl_open(root + "/locks"), ZNOAUTH);
  }

  Stat after{};
  ASSERT_EQ(zk.exists(mine, &after), ZOK) << "the holder's node went";
  EXPECT_EQ(after.mzxid, before.mzxid) << "the holder's node was written";
  EXPECT_EQ(zk.count_children(dir), 2);
  auto extended = holder->extend(*lease, 30s);
  ASSERT_TRUE(extended.ok()) << extended.error().to_string();
  EXPECT_EQ(extended->fencing_token, lease->fencing_token);
  auto info = holder->describe("guarded");
  ASSERT_TRUE(info.ok());
  ASSERT_EQ(info->holders.size(), 1u);
  EXPECT_EQ(info->holders[0].label, "holder");
  EXPECT_FALSE(granted.load()) << "the waiter was granted beside the holder";

  auto released = holder->release(*extended);
  ASSERT_TRUE(released.ok() && *released);
  ASSERT_TRUE(eventually([&] { return granted.load(); }, 10s));
  t.join();
  ASSERT_TRUE(got.has_value() && got->ok())
      << (got && !got->ok() ? got->error().to_string() : "");
  EXPECT_GT((*got)->fencing_token, lease->fencing_token);
}

// The ACL check costs one request per lock node and store, not one per
// acquire: with credentials an uncontended pair is still the create
// transaction and the delete (counted by the server, as
// ZkStore.AnUncontendedAcquireIsOneTransactionWithoutAListing does
// without them); a check on every acquire would make it 3 per pair.
TEST(ZkSecurity, TheACLCheckIsOncePerLockNotPerAcquire) {
  const std::string root = new_root();
  auto c = open_zk_client(secured_url(root));
  ASSERT_TRUE(c.ok());
  auto received = [] {
    return four_letter_number(shared_server().four_letter("mntr"),
                              "zk_packets_received");
  };
  const long fresh_before = received();
  ASSERT_GE(fresh_before, 0) << "mntr has no zk_packets_received";
  auto l = c->try_acquire("counted", opts(10s));
  ASSERT_TRUE(l.ok()) << l.error().to_string();
  ASSERT_TRUE(*c->release(*l));
  // The check, the create that finds no lock node, the create with it,
  // the release.
  EXPECT_LE(received() - fresh_before, 4 + 2) << "requests for a new lock";
  constexpr int kPairs = 30;
  const long before = received();
  for (int i = 0; i < kPairs; ++i) {
    auto p = c->try_acquire("counted", opts(10s));
    ASSERT_TRUE(p.ok()) << p.error().to_string();
    ASSERT_TRUE(*c->release(*p));
  }
  const long sent = received() - before;
  // Slack for pings and the janitor's look at idle locks.
  EXPECT_LE(sent, 2 * kPairs + 8)
      << sent << " requests for " << kPairs << " pairs";
}

// A wrong password, where the chroot exists: ZooKeeper accepts any digest
// credentials (the id is only derived from them), so the store finds out
// from the root's ACL, which those credentials cannot read; refused at
// open, naming the store, the server, the node and the reason, and
// nothing written.
TEST(ZkSecurity, AWrongPasswordIsRefusedAtOpenAndWritesNothing) {
  const std::string root = new_root();
  {
    auto c = open_zk_client(secured_url(root));
    ASSERT_TRUE(c.ok()) << c.error().to_string();
  }
  ZkObserver zk(shared_server().hostport(), kDigest);
  ASSERT_TRUE(zk.ok());
  Stat before{};
  ASSERT_EQ(zk.exists(root, &before), ZOK);

  auto wrong = open_zk_store(hostport_url("baton:not-the-password@", root));
  ASSERT_FALSE(wrong.ok());
  const std::string msg = wrong.error().to_string();
  EXPECT_EQ(wrong.error().code(), Errc::permission_denied) << msg;
  EXPECT_THAT(msg, HasSubstr("zookeeper://baton:***@" +
                             shared_server().hostport() + root));
  EXPECT_THAT(msg, HasSubstr("refused node " + root +
                             ": its ACL cannot be read with these "
                             "credentials (not authenticated: a wrong "
                             "password for user \"baton\""));
  EXPECT_THAT(msg,
              HasSubstr("this store makes its nodes with "
                        "digest:baton:<hash of the given password>:cdrwa"));
  EXPECT_THAT(msg, Not(HasSubstr("not-the-password")));
  expect_no_secret(msg);
  Stat after{};
  ASSERT_EQ(zk.exists(root, &after), ZOK);
  EXPECT_EQ(after.pzxid, before.pzxid) << "a node was made or deleted";
  EXPECT_EQ(after.mzxid, before.mzxid);
  EXPECT_EQ(zk.count_children(root), 3);  // locks, counters, clock

  // No credentials at all on a protected chroot: refused the same way.
  auto none = open_zk_store(hostport_url("", root));
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error().code(), Errc::permission_denied);
  EXPECT_THAT(none.error().message(),
              HasSubstr("refused node " + root +
                        ": its ACL cannot be read without credentials"));
  EXPECT_THAT(none.error().message(),
              HasSubstr("this store makes its nodes with "
                        "world:anyone:cdrwa"));
}

// A server that refuses digest credentials (digest authentication
// disabled): the session goes to AUTH_FAILED with ZAUTHFAILED, and the
// store is refused at open, naming the store, the server and the reason;
// nothing is written.
TEST(ZkSecurity, CredentialsZooKeeperRefusesFailTheOpen) {
  ZkProcess::Options o;
  o.force_sync = false;
  o.jvm_flags = {"-Dzookeeper.DigestAuthenticationProvider.enabled=false"};
  ZkProcess strict(o);
  const std::string url = "zookeeper://baton:" + std::string(kPassword) + "@" +
                          strict.hostport() + "/refused?session_timeout=4s";
  auto s = open_zk_store(url);
  ASSERT_FALSE(s.ok());
  const std::string msg = s.error().to_string();
  EXPECT_EQ(s.error().code(), Errc::permission_denied) << msg;
  EXPECT_THAT(msg, HasSubstr("zookeeper://baton:***@" + strict.hostport() +
                             "/refused"));
  EXPECT_THAT(msg, HasSubstr("ZooKeeper refused the digest credentials of "
                             "user \"baton\": authentication failed"));
  EXPECT_THAT(msg, HasSubstr("AUTH_FAILED"));
  expect_no_secret(msg);
  ZkObserver zk(strict.hostport());
  ASSERT_TRUE(zk.ok());
  EXPECT_EQ(zk.exists("/refused"), ZNONODE);
}

// Nodes made without the store's ACL are refused, not adopted: the root at
// open (naming the ACL found), a lock's node and a counter at first use;
// nothing is queued in the foreign lock node.
TEST(ZkSecurity, NodesWithAnotherACLAreRefusedNotAdopted) {
  ZkObserver zk(shared_server().hostport(), kDigest);
  ASSERT_TRUE(zk.ok());
  // A chroot made open (by a store without credentials).
  const std::string open_root = new_root();
  {
    auto c = open_zk_client(hostport_url("", open_root));
    ASSERT_TRUE(c.ok());
  }
  auto s = open_zk_store(secured_url(open_root));
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code(), Errc::permission_denied);
  EXPECT_THAT(s.error().message(),
              HasSubstr("refused node " + open_root +
                        ": its ACL is world:anyone:cdrwa; this store makes "
                        "its nodes with digest:baton:<hash of the given "
                        "password>:cdrwa. A node with another ACL is not "
                        "adopted"));
  expect_no_secret(s.error().message());

  // A lock's node planted open by someone who had the credentials once.
  const std::string root = new_root();
  auto c = open_zk_client(secured_url(root));
  ASSERT_TRUE(c.ok());
  const std::string dir = lock_dir("planted", root);
  ASSERT_EQ(zk.create_open(dir), ZOK);
  auto l = c->try_acquire("planted", opts(30s));
  ASSERT_FALSE(l.ok());
  EXPECT_EQ(l.error().code(), Errc::permission_denied) << l.error().to_string();
  EXPECT_THAT(l.error().message(),
              HasSubstr("refused node " + dir +
                        ": its ACL is world:anyone:cdrwa; this store makes "
                        "its nodes with digest:baton:<hash of the given "
                        "password>:cdrwa"));
  EXPECT_EQ(zk.count_children(dir), 0) << "a request joined a foreign node";
  auto w = c->acquire("planted", 2s, opts(30s));
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.error().code(), Errc::permission_denied);
  // The same for a counter.
  ASSERT_EQ(zk.create_open(root + "/counters/planted", "5"), ZOK);
  auto n = c->counter("planted").add(1);
  ASSERT_FALSE(n.ok());
  EXPECT_EQ(n.error().code(), Errc::permission_denied);
  // The other locks work.
  auto ok = c->try_acquire("fine", opts(30s));
  EXPECT_TRUE(ok.ok()) << ok.error().to_string();
}

// A session ZooKeeper expired is replaced by a new one, which starts
// without credentials: the store gives them again before any request, so
// the new session can still make requests under the protected root.
TEST(ZkSecurity, ANewSessionAfterAnExpiryHasTheCredentialsAgain) {
  const std::string root = new_root();
  auto proxy = TcpProxy::start("127.0.0.1", shared_server().port());
  ASSERT_TRUE(proxy.ok());
  auto c = open_zk_client("zookeeper://baton:" + std::string(kPassword) +
                          "@127.0.0.1:" + std::to_string((*proxy)->port()) +
                          root + "?session_timeout=2s");
  ASSERT_TRUE(c.ok()) << c.error().to_string();
  auto l = c->try_acquire("again", opts(30s));
  ASSERT_TRUE(l.ok());
  ZkObserver zk(shared_server().hostport(), kDigest);
  const std::string dir = lock_dir("again", root);
  ASSERT_EQ(zk.count_children(dir), 1);
  (*proxy)->set_mode(TcpProxy::Mode::blackhole);
  ASSERT_TRUE(
      eventually([&] { return zk.count_children(dir) == 0; }, 20s, 50ms))
      << "the session never expired";
  (*proxy)->set_mode(TcpProxy::Mode::pass);
  (*proxy)->cut_all();
  std::optional<Result<Lease>> again;
  ASSERT_TRUE(eventually(
      [&] {
        again = c->try_acquire("again", opts(30s));
        return again->ok() || again->error().code() == Errc::permission_denied;
      },
      20s, 100ms));
  ASSERT_TRUE(again->ok()) << again->error().to_string();
  std::vector<std::string> kids, acl;
  ASSERT_EQ(zk.children(dir, &kids), ZOK);
  ASSERT_EQ(kids.size(), 1u);
  ASSERT_EQ(zk.get_acl(dir + "/" + kids[0], &acl), ZOK);
  EXPECT_EQ(acl, wanted_acl());
}

// Where the password may come from, and that it never shows: the URL,
// option password, password_file, $BATON_ZK_PASSWORD; url() and every
// message mask it. TLS options are refused, saying why.
TEST(ZkSecurity, PasswordSourcesAndNoLeaksAndNoTls) {
  const std::string root = new_root();
  {
    auto c = open_zk_client(secured_url(root));
    ASSERT_TRUE(c.ok());
    EXPECT_THAT(c->url(), HasSubstr("zookeeper://baton:***@"));
    expect_no_secret(c->url());
  }
  auto by_option = open_zk_client(
      hostport_url("", root, "&user=baton&password=" + std::string(kPassword)));
  ASSERT_TRUE(by_option.ok()) << errc_name(by_option.error().code());
  expect_no_secret(by_option->url());
  EXPECT_THAT(by_option->url(), HasSubstr("password=***"));

  char dir[] = "/tmp/baton-zk-pw-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  const std::string file = std::string(dir) + "/pw";
  { std::ofstream(file) << kPassword << "\n"; }
  ASSERT_EQ(::chmod(file.c_str(), 0600), 0);
  auto by_file =
      open_zk_client(hostport_url("baton@", root, "&password_file=" + file));
  EXPECT_TRUE(by_file.ok()) << errc_name(by_file.error().code());
  ASSERT_EQ(::chmod(file.c_str(), 0644), 0);
  auto loose =
      open_zk_store(hostport_url("baton@", root, "&password_file=" + file));
  ASSERT_FALSE(loose.ok());
  EXPECT_THAT(loose.error().message(), HasSubstr("chmod 600"));
  expect_no_secret(loose.error().message());
  std::filesystem::remove_all(dir);

  ASSERT_EQ(::setenv("BATON_ZK_PASSWORD", kPassword, 1), 0);
  auto by_env = open_zk_client(hostport_url("baton@", root));
  ::unsetenv("BATON_ZK_PASSWORD");
  EXPECT_TRUE(by_env.ok()) << errc_name(by_env.error().code());
  auto no_password = open_zk_store(hostport_url("baton@", root));
  ASSERT_FALSE(no_password.ok());
  EXPECT_EQ(no_password.error().code(), Errc::invalid_argument);
  EXPECT_THAT(no_password.error().message(),
              HasSubstr("no password for user \"baton\""));
  auto no_user = open_zk_store(
      hostport_url("", root, "&password=" + std::string(kPassword)));
  ASSERT_FALSE(no_user.ok());
  EXPECT_THAT(no_user.error().message(),
              HasSubstr("a password without a user"));
  expect_no_secret(no_user.error().message());
  auto bad_admin = open_zk_store(secured_url(root, "&admin_id=ops:plain"));
  ASSERT_FALSE(bad_admin.ok());
  EXPECT_THAT(bad_admin.error().message(),
              HasSubstr("admin_id \"ops:plain\" is not a digest id"));
  expect_no_secret(bad_admin.error().message());

  for (const char* q : {"&tls=1", "&ca=/etc/ssl/ca.pem", "&cert=c.pem"}) {
    auto tls = open_zk_store(secured_url(root, q));
    ASSERT_FALSE(tls.ok()) << q;
    EXPECT_EQ(tls.error().code(), Errc::invalid_argument);
    EXPECT_THAT(tls.error().message(),
                HasSubstr("zookeeper:// has no TLS: the ZooKeeper C client "
                          "it is built with (libzookeeper-mt 3.8.0, Debian) "
                          "has no OpenSSL support"));
    EXPECT_THAT(tls.error().message(), HasSubstr("stunnel"));
    expect_no_secret(tls.error().message());
  }
  EXPECT_TRUE(open_zk_store(secured_url(root, "&tls=0")).ok());
}

}  // namespace
}  // namespace baton::testing
