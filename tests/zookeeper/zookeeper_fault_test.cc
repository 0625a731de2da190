// tests/zookeeper/zookeeper_fault_test.cc — zookeeper:// under faults, on
// the binary's one private server: a lost create reply (through the TCP
// fault proxy, tests/support/tcp_proxy.h), a session that expired under its
// holder, a holder process stopped past its session timeout, and server
// restarts (SIGTERM and kill -9). Nodes are counted with the ZooKeeper C
// client.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <optional>

#include "support/tcp_proxy.h"
#include "zk_test_util.h"

namespace baton::testing {
namespace {

using Clock = std::chrono::steady_clock;

std::unique_ptr<TcpProxy> proxy_to_server() {
  auto p = TcpProxy::start("127.0.0.1", shared_server().port());
  EXPECT_TRUE(p.ok()) << (p.ok() ? "" : p.error().to_string());
  return p.ok() ? std::move(*p) : nullptr;
}

// The test URL (chroot /baton-test, 4 s sessions) through a proxy.
std::string via(const TcpProxy& p) {
  return "zookeeper://127.0.0.1:" + std::to_string(p.port()) +
         "/baton-test?session_timeout=4s";
}

// Rule 17 on ZooKeeper: the ephemeral sequential create reached the server,
// its reply was dropped in flight and the connection reset (the session
// survives: it reconnects within its timeout). The client's retries with
// the same owner token must find that node by its token, not create a
// second one: exactly one child, and none after the release.
void lost_create_reply(std::chrono::milliseconds wait, bool shared = false) {
  auto proxy = proxy_to_server();
  ASSERT_NE(proxy, nullptr);
  ZkObserver zk(shared_server().hostport());
  ASSERT_TRUE(zk.ok());
  auto c = open_zk_client(via(*proxy));  // default retries
  ASSERT_TRUE(c.ok()) << c.error().to_string();
  const std::string name = unique("lost-create-reply");
  const std::string dir = lock_dir(name);

  proxy->set_delay(400ms);  // the reply sits 400 ms in the proxy
  auto pending = std::async(std::launch::async, [&] {
    const auto o = opts(30s, "retrying");
    if (shared) return c->acquire_shared(name, wait, o);
    return wait > 0ms ? c->acquire(name, wait, o) : c->try_acquire(name, o);
  });
  // The create ran: the server has the node while its reply is delayed.
  ASSERT_TRUE(eventually([&] { return zk.count_children(dir) == 1; }, 10s, 1ms))
      << "the request node never appeared under " << dir;
  proxy->set_mode(TcpProxy::Mode::blackhole);  // drops the queued reply
  proxy->set_delay(0ms);
  proxy->set_mode(TcpProxy::Mode::pass);
  proxy->cut_all();  // the connection resets: the outcome is unknown

  auto lease = pending.get();
  ASSERT_TRUE(lease.ok()) << lease.error().to_string();
  std::vector<std::string> kids;
  ASSERT_EQ(zk.children(dir, &kids), ZOK);
  ASSERT_EQ(kids.size(), 1u) << "a retry created a second request node";
  EXPECT_NE(kids[0].find(lease->token.to_string()), std::string::npos)
      << kids[0];
  EXPECT_EQ(lease->shared, shared);
  EXPECT_NE(kids[0].find(shared ? "-1-r-" : "-1-b-"), std::string::npos)
      << kids[0];
  auto info = c->describe(name);
  ASSERT_TRUE(info.ok()) << info.error().to_string();
  ASSERT_EQ(info->holders.size(), 1u);
  EXPECT_EQ(info->holders[0].fencing_token, lease->fencing_token);
  EXPECT_EQ(info->holders[0].shared, shared);
  EXPECT_TRUE(info->waiters.empty());
  auto released = c->release(*lease);
  ASSERT_TRUE(released.ok()) << released.error().to_string();
  EXPECT_TRUE(*released);
  EXPECT_EQ(zk.count_children(dir), 0) << "a node was left behind";
}

TEST(ZkFault, LostTryAcquireCreateReplyLeavesOneNode) {
  lost_create_reply(0ms);
}

TEST(ZkFault, LostBlockingAcquireCreateReplyLeavesOneNode) {
  lost_create_reply(10s);
}

// The same for a shared request (rule 18): the retry finds its `r` node.
TEST(ZkFault, LostSharedAcquireCreateReplyLeavesOneNode) {
  lost_create_reply(10s, true);
}

// A release that the releasing store knows to be in time (its lease's
// valid_for, from before the acquire, has not run out) is one delete: the
// root's clock node is not written. A release by another store (which
// knows nothing of the lease) still reads ZooKeeper's clock in the same
// transaction. A release whose answer comes after the lease could have
// ended is answered by ZooKeeper's clock: here the delete itself lands
// after the lease's end, and the answer is false (not held).
TEST(ZkFault, ReleaseIsOneDeleteWhenInTimeAndJudgedByZooKeepersClockWhenLate) {
  auto proxy = proxy_to_server();
  ASSERT_NE(proxy, nullptr);
  ZkObserver zk(shared_server().hostport());
  ASSERT_TRUE(zk.ok());
  // A root of this test's own: nothing else writes its clock node.
  const std::string root =
      "/baton-test-release-" + OwnerToken::random().to_string().substr(0, 8);
  const std::string query = "?session_timeout=10s";
  auto a = open_zk_client(
      "zookeeper://127.0.0.1:" + std::to_string(proxy->port()) + root + query);
  auto b = open_zk_client("zookeeper://" + shared_server().hostport() + root +
                          query);
  ASSERT_TRUE(a.ok() && b.ok());
  auto clock_version = [&] {
    Stat st{};
    return zk.exists(root + "/clock", &st) == ZOK ? st.version : -1;
  };
  const std::string name = "release-paths";

  auto lease = a->try_acquire(name, opts(30s, "in time"));
  ASSERT_TRUE(lease.ok()) << lease.error().to_string();
  const int v0 = clock_version();
  ASSERT_GE(v0, 0);
  auto released = a->release(*lease);
  ASSERT_TRUE(released.ok()) << released.error().to_string();
  EXPECT_TRUE(*released);
  EXPECT_EQ(clock_version(), v0) << "an in-time release wrote the clock";

  lease = a->try_acquire(name, opts(30s, "released by another store"));
  ASSERT_TRUE(lease.ok()) << lease.error().to_string();
  released = b->release(*lease);
  ASSERT_TRUE(released.ok()) << released.error().to_string();
  EXPECT_TRUE(*released);
  EXPECT_EQ(clock_version(), v0 + 1);

  // TTL 1.2 s; 300 ms later the release leaves, and the proxy holds it
  // 1 s each way: it deletes the node after the lease ended, and its
  // answer comes after the store's alive_until.
  lease = a->try_acquire(name, opts(1200ms, "late"));
  ASSERT_TRUE(lease.ok()) << lease.error().to_string();
  std::this_thread::sleep_for(300ms);
  proxy->set_delay(1000ms);
  released = a->release(*lease);
  proxy->set_delay(0ms);
  ASSERT_TRUE(released.ok()) << released.error().to_string();
  EXPECT_FALSE(*released) << "a release that landed after the lease's end "
                             "answered held";
  EXPECT_EQ(zk.count_children(root + "/locks/" + esc(name)), 0);
}

// A holds `name`; X, B and C queue behind it in that order (B behind a
// waiter, so contended), C asking to wait `c_wait`; then A releases and X is
// granted: B is next in line and reads C's request ahead of its grant.
struct LineOfThree {
  Result<Lease> x_lease = Error(Errc::internal, "not granted");
  std::future<Result<Lease>> b_lease, c_lease;
};
void queue_three(Client& a, Client& x, Client& b, Client& c,
                 const std::string& name, std::chrono::milliseconds c_wait,
                 LineOfThree* line) {
  auto held = a.try_acquire(name, opts(30s, "a"));
  ASSERT_TRUE(held.ok()) << held.error().to_string();
  auto waiters = [&] {
    auto info = a.describe(name);
    return info.ok() ? info->waiters.size() : std::size_t{0};
  };
  auto xs = std::async(std::launch::async,
                       [&] { return x.acquire(name, 30s, opts(30s, "x")); });
  ASSERT_TRUE(eventually([&] { return waiters() == 1; }, 10s, 5ms));
  line->b_lease = std::async(std::launch::async, [&b, name] {
    return b.acquire(name, 30s, opts(30s, "b"));
  });
  ASSERT_TRUE(eventually([&] { return waiters() == 2; }, 10s, 5ms));
  line->c_lease = std::async(std::launch::async, [&c, name, c_wait] {
    return c.acquire(name, c_wait, opts(30s, "c"));
  });
  ASSERT_TRUE(eventually([&] { return waiters() == 3; }, 10s, 5ms));
  ASSERT_TRUE(*a.release(*held));
  line->x_lease = xs.get();
  ASSERT_TRUE(line->x_lease.ok()) << line->x_lease.error().to_string();
}

// Under contention the next in line reads the request behind it while it
// waits, and its release grants that request in the same transaction as
// its delete (docs/stores/zookeeper.md, "Hand-over in the release"). C's
// traffic sits 400 ms in the proxy each way while B releases, so no write
// of C's can reach ZooKeeper within 800 ms of B's release: C's node, read
// sooner, is st=h, written by B's transaction (the lock node's pzxid, B's
// delete, is the grant's mzxid), and C's acquire returns that lease with
// the grant's zxid as its fencing token, without writing its node again.
TEST(ZkFault, ReleaseHandsOverToTheNextInLineInOneTransaction) {
  auto proxy = proxy_to_server();
  ASSERT_NE(proxy, nullptr);
  ZkObserver zk(shared_server().hostport());
  ASSERT_TRUE(zk.ok());
  const std::string name = unique("hand-over");
  const std::string dir = lock_dir(name);
  auto a = open_zk_client(shared_server().url());
  auto x = open_zk_client(shared_server().url());
  auto b = open_zk_client(shared_server().url());
  auto c = open_zk_client(via(*proxy));
  ASSERT_TRUE(a.ok() && x.ok() && b.ok() && c.ok());
  LineOfThree line;
  queue_three(*a, *x, *b, *c, name, 30s, &line);
  if (HasFatalFailure()) return;
  auto& xl = line.x_lease;
  auto& bs = line.b_lease;
  auto& cs = line.c_lease;
  // B is next in line now and reads C's request while X holds.
  std::this_thread::sleep_for(1s);
  ASSERT_TRUE(*x->release(*xl));
  auto bl = bs.get();
  ASSERT_TRUE(bl.ok()) << bl.error().to_string();

  std::vector<std::string> kids;
  ASSERT_EQ(zk.children(dir, &kids), ZOK);
  ASSERT_EQ(kids.size(), 2u);  // B's lease and C's request
  proxy->set_delay(400ms);
  const auto t0 = Clock::now();
  ASSERT_TRUE(*b->release(*bl));
  std::string data;
  Stat node{}, parent{};
  ASSERT_EQ(zk.get(dir + "/" + kids[1], &data, &node), ZOK);
  ASSERT_EQ(zk.exists(dir, &parent), ZOK);
  EXPECT_LT(Clock::now() - t0, 750ms) << "too slow to tell who wrote C's node";
  EXPECT_EQ(field(parse_node_data(data), "st"), "h") << data;
  EXPECT_EQ(node.version, 1) << "C's node was written more than once";
  EXPECT_EQ(node.mzxid, parent.pzxid)
      << "C's grant and B's delete were not one transaction";
  auto cl = cs.get();
  proxy->set_delay(0ms);
  ASSERT_TRUE(cl.ok()) << cl.error().to_string();
  EXPECT_EQ(cl->fencing_token, static_cast<std::uint64_t>(node.mzxid));
  EXPECT_GT(cl->fencing_token, bl->fencing_token);
  EXPECT_GT(bl->fencing_token, xl->fencing_token);
  ASSERT_EQ(zk.get(dir + "/" + kids[1], &data, &node), ZOK);
  EXPECT_EQ(node.version, 1) << "C wrote its grant again";
  EXPECT_TRUE(*c->release(*cl));
  EXPECT_EQ(zk.count_children(dir), 0);
}

// The request a holder read ahead of its release may leave before the
// release (here its call times out and deletes it): the hand-over's write
// of that node fails, the transaction does nothing, and the release is the
// plain delete; the request behind it (D, which came after) is granted at
// once, and nothing is left.
TEST(ZkFault, HandOverToARequestThatLeftIsAPlainRelease) {
  const std::string name = unique("hand-over-left");
  auto a = open_zk_client(shared_server().url());
  auto x = open_zk_client(shared_server().url());
  auto b = open_zk_client(shared_server().url());
  auto c = open_zk_client(shared_server().url());
  auto d = open_zk_client(shared_server().url());
  ASSERT_TRUE(a.ok() && x.ok() && b.ok() && c.ok() && d.ok());
  ZkObserver zk(shared_server().hostport());
  ASSERT_TRUE(zk.ok());
  LineOfThree line;
  queue_three(*a, *x, *b, *c, name, 2s, &line);
  if (HasFatalFailure()) return;
  auto& xl = line.x_lease;
  auto& bs = line.b_lease;
  auto& cs = line.c_lease;
  auto waiters = [&] {
    auto info = a->describe(name);
    return info.ok() ? info->waiters.size() : std::size_t{0};
  };
  // B is next in line and reads C's request; then C's wait ends.
  auto cl = cs.get();
  ASSERT_FALSE(cl.ok());
  EXPECT_EQ(cl.error().code(), Errc::timeout) << cl.error().to_string();
  auto ds = std::async(std::launch::async,
                       [&] { return d->acquire(name, 30s, opts(30s, "d")); });
  ASSERT_TRUE(eventually([&] { return waiters() == 2; }, 10s, 5ms));
  ASSERT_TRUE(*x->release(*xl));
  auto bl = bs.get();
  ASSERT_TRUE(bl.ok()) << bl.error().to_string();

  const auto t0 = Clock::now();
  auto released = b->release(*bl);
  ASSERT_TRUE(released.ok()) << released.error().to_string();
  EXPECT_TRUE(*released);
  auto dl = ds.get();
  ASSERT_TRUE(dl.ok()) << dl.error().to_string();
  EXPECT_LT(Clock::now() - t0, 1s) << "D waited for a re-check, not a watch";
  EXPECT_GT(dl->fencing_token, bl->fencing_token);
  EXPECT_TRUE(*d->release(*dl));
  EXPECT_EQ(zk.count_children(lock_dir(name)), 0);
}

// A release after the holder's session expired must not delete another
// session's node. A's traffic is blackholed at the proxy until the server
// expires A's session (its ephemeral node goes), B takes the lock, then A's
// network heals and A releases its old lease: false (or an error), and B's
// node and lease are untouched.
TEST(ZkFault, ReleaseAfterSessionExpiryNeverDeletesAnotherSessionsNode) {
  auto proxy = proxy_to_server();
  ASSERT_NE(proxy, nullptr);
  ZkObserver zk(shared_server().hostport());
  ASSERT_TRUE(zk.ok());
  auto a = open_zk_client(via(*proxy));
  auto b = open_zk_client(shared_server().url());
  ASSERT_TRUE(a.ok() && b.ok());
  const std::string name = unique("expired-release");
  const std::string dir = lock_dir(name);
  auto held = a->try_acquire(name, opts(120s, "A"));
  ASSERT_TRUE(held.ok()) << held.error().to_string();
  ASSERT_EQ(zk.count_children(dir), 1);

  proxy->set_mode(TcpProxy::Mode::blackhole);
  // Session timeout 4 s (+ a tick): the server deletes A's node.
  ASSERT_TRUE(
      eventually([&] { return zk.count_children(dir) == 0; }, 20s, 50ms))
      << "A's session never expired";
  auto taken = b->try_acquire(name, opts(120s, "B"));
  ASSERT_TRUE(taken.ok()) << taken.error().to_string();
  std::vector<std::string> before;
  ASSERT_EQ(zk.children(dir, &before), ZOK);
  ASSERT_EQ(before.size(), 1u);

  proxy->set_mode(TcpProxy::Mode::pass);
  // Once A's store has a session again, its release reaches the server.
  EXPECT_TRUE(eventually([&] { return a->describe(name).ok(); }, 20s, 50ms));
  auto released = a->release(*held);
  EXPECT_FALSE(released.ok() && *released)
      << "the release of an expired session's lease reported was_held";
  auto extended = a->extend(*held, 120s);
  ASSERT_FALSE(extended.ok());
  EXPECT_EQ(extended.error().code(), Errc::lock_lost)
      << extended.error().to_string();

  std::vector<std::string> after;
  ASSERT_EQ(zk.children(dir, &after), ZOK);
  EXPECT_EQ(after, before) << "B's node was deleted or replaced";
  auto info = b->describe(name);
  ASSERT_TRUE(info.ok()) << info.error().to_string();
  ASSERT_EQ(info->holders.size(), 1u);
  EXPECT_EQ(info->holders[0].label, "B");
  EXPECT_EQ(info->holders[0].fencing_token, taken->fencing_token);
  EXPECT_GT(taken->fencing_token, held->fencing_token);
  EXPECT_TRUE(*b->release(*taken));
  EXPECT_EQ(zk.count_children(dir), 0);
}

// A child process of this binary (zk_test_main.cc, --hold-and-stop) that
// holds `name` and then SIGSTOPs itself; killed by the destructor.
class StoppedHolder {
 public:
  StoppedHolder(const std::string& url, const std::string& name) {
    int out[2];
    if (::pipe2(out, O_CLOEXEC) != 0) return;
    const std::string self =
        std::filesystem::read_symlink("/proc/self/exe").string();
    std::vector<std::string> args = {self, "--hold-and-stop", url, name};
    std::vector<char*> argv;
    for (auto& s : args) argv.push_back(s.data());
    argv.push_back(nullptr);
    const pid_t parent = ::getpid();
    pid_ = ::fork();
    if (pid_ == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(127);
      ::dup2(out[1], 1);
      ::close_range(3, ~0U, 0);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    ::close(out[1]);
    read_fd_ = out[0];
  }
  ~StoppedHolder() {
    if (read_fd_ >= 0) ::close(read_fd_);
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  // The fencing token the child printed before it stopped, and whether it
  // is stopped now; nullopt if it did not get there within `limit`.
  std::optional<std::uint64_t> wait_until_stopped(
      std::chrono::milliseconds limit) {
    if (pid_ <= 0 || read_fd_ < 0) return std::nullopt;
    std::string line;
    const auto end = Clock::now() + limit;
    while (line.find('\n') == std::string::npos && Clock::now() < end) {
      pollfd p{read_fd_, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      char buf[64];
      const ssize_t n = ::read(read_fd_, buf, sizeof buf);
      if (n <= 0) return std::nullopt;  // the child failed (see stderr)
      line.append(buf, static_cast<std::size_t>(n));
    }
    while (Clock::now() < end) {
      int status = 0;
      const pid_t r = ::waitpid(pid_, &status, WUNTRACED | WNOHANG);
      if (r == pid_ && WIFSTOPPED(status)) {
        char* parsed_to = nullptr;
        const auto fencing = std::strtoull(line.c_str(), &parsed_to, 10);
        if (parsed_to == line.c_str()) return std::nullopt;  // not a number
        return fencing;
      }
      if (r == pid_) {
        pid_ = -1;  // it exited
        return std::nullopt;
      }
      std::this_thread::sleep_for(10ms);
    }
    return std::nullopt;
  }

 private:
  pid_t pid_ = -1;
  int read_fd_ = -1;
};

// Rule 9/13 with a real pause: a holder process frozen past its session
// timeout loses its lease (its session expires, its ephemeral node goes)
// long before its 60 s TTL, and the waiter gets a larger fencing token.
TEST(ZkFault, StoppedHolderProcessLosesTheLockToAWaiter) {
  const std::string name = unique("stopped-holder");
  auto c = open_zk_client(shared_server().url());
  ASSERT_TRUE(c.ok()) << c.error().to_string();
  StoppedHolder child(shared_server().url(), name);
  const auto first = child.wait_until_stopped(60s);
  ASSERT_TRUE(first.has_value()) << "the child did not acquire and stop";
  // Its session lives on for about 3–4 s.
  auto info = c->describe(name);
  ASSERT_TRUE(info.ok()) << info.error().to_string();
  ASSERT_EQ(info->holders.size(), 1u);
  EXPECT_EQ(info->holders[0].label, "stopped-child");
  EXPECT_EQ(info->holders[0].fencing_token, *first);

  const auto t0 = Clock::now();
  auto got = c->acquire(name, 40s, opts(30s, "waiter"));
  const auto took = Clock::now() - t0;
  ASSERT_TRUE(got.ok()) << got.error().to_string();
  EXPECT_GT(got->fencing_token, *first);
  // Not before the session could have expired (4 s, the last heartbeat at
  // most ~1.3 s before the stop), and well before the holder's 60 s TTL.
  EXPECT_GE(took, 2s);
  EXPECT_LT(took, 30s);
  EXPECT_TRUE(*c->release(*got));
}

// Fencing survives ZooKeeper restarts (same data dir, forceSync=yes), a
// clean one (SIGTERM) and a kill -9: the same client reconnects by itself
// and each next grant's token is larger than every token before; so is a
// new client's.
TEST(ZkFault, RestartKeepsFencingIncreasingAndClientsReconnect) {
  auto c = open_zk_client(shared_server().url());
  ASSERT_TRUE(c.ok()) << c.error().to_string();
  const std::string name = unique("restart");
  auto before = c->try_acquire(name, opts(30s));
  ASSERT_TRUE(before.ok()) << before.error().to_string();
  ASSERT_TRUE(*c->release(*before));
  std::uint64_t last = before->fencing_token;

  for (const bool kill9 : {false, true}) {
    SCOPED_TRACE(kill9 ? "after kill -9" : "after SIGTERM");
    if (kill9) {
      shared_server().kill9();
      shared_server().start();
    } else {
      shared_server().restart();
    }
    // One request id across attempts (rule 17): an attempt that failed
    // mid-way leaves nothing the next one does not find.
    AcquireOptions o = opts(30s, "after-restart");
    o.token = OwnerToken::random();
    Result<Lease> after = Error(Errc::internal, "not tried");
    int attempts = 0;
    EXPECT_TRUE(eventually(
        [&] {
          ++attempts;
          after = c->try_acquire(name, o);
          return after.ok();
        },
        30s, 200ms))
        << "the client never reconnected: " << after.error().to_string();
    ASSERT_TRUE(after.ok());
    std::printf("granted after %d attempt(s)\n", attempts);
    EXPECT_GT(after->fencing_token, last);
    last = after->fencing_token;
    EXPECT_TRUE(*c->release(*after));
  }

  auto fresh = open_zk_client(shared_server().url());
  ASSERT_TRUE(fresh.ok()) << fresh.error().to_string();
  auto third = fresh->try_acquire(name, opts(30s));
  ASSERT_TRUE(third.ok()) << third.error().to_string();
  EXPECT_GT(third->fencing_token, last);
  EXPECT_TRUE(*fresh->release(*third));
}

}  // namespace
}  // namespace baton::testing
