// tests/mysql/mysql_doorbell_test.cc — mysql://'s GET_LOCK doorbells (its
// push wake-up; stores/mysql/doorbell.h), on the server of
// mysql_store_test.cc (one per binary). The waiters run with
// recheck_interval=10s and waiter_timeout=40s, so their fallback re-check
// is 5-10 s: a grant within a second of an event is the doorbell's doing. The
// holder runs in a child process (fork), so the in-process wake-up (a
// condition variable) cannot be what wakes the waiter.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "baton/client.h"
#include "my_process.h"
#include "stores/mysql/doorbell.h"

namespace baton {
namespace testing {
MyProcess& shared_my_server();
}  // namespace testing

namespace {

using namespace std::chrono_literals;
using Steady = std::chrono::steady_clock;

constexpr const char* kSlowFallback = "recheck_interval=10s&waiter_timeout=40s";

std::string unique(const std::string& what) {
  static std::atomic<int> n{0};
  return "mydoor/" + std::to_string(::getpid()) + "/" + what + "/" +
         std::to_string(n.fetch_add(1));
}

AcquireOptions opts(std::chrono::milliseconds ttl) {
  AcquireOptions o;
  o.ttl = ttl;
  return o;
}

long long now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             Steady::now().time_since_epoch())
      .count();
}

// A holder in a child process: it acquires `name` for `ttl`, reports the
// grant time (steady clock, shared by the processes of one host), then on
// 'r' releases and reports the time just before the release was sent.
class ChildHolder {
 public:
  ChildHolder(const std::string& url, const std::string& name,
              std::chrono::milliseconds ttl) {
    int up[2], down[2];
    if (::pipe(up) != 0 || ::pipe(down) != 0) std::abort();
    pid_ = ::fork();
    if (pid_ == 0) {
      ::close(up[0]);
      ::close(down[1]);
      long long t = -1;
      auto c = Client::open(url);
      if (c.ok()) {
        auto l = c->acquire(name, 10s, opts(ttl));
        if (l.ok()) {
          t = now_ns();
          (void)!::write(up[1], &t, sizeof t);
          char cmd = 0;
          if (::read(down[0], &cmd, 1) == 1 && cmd == 'r') {
            t = now_ns();
            const bool ok = c->release(*l).ok();
            if (!ok) t = -2;
            (void)!::write(up[1], &t, sizeof t);
            // Alive, connections open, until the test ends: only the
            // release itself can have rung the doorbell.
            while (::read(down[0], &cmd, 1) > 0) {
            }
          }
          ::_exit(0);
        }
      }
      (void)!::write(up[1], &t, sizeof t);
      ::_exit(1);
    }
    ::close(up[1]);
    ::close(down[0]);
    from_ = up[0];
    to_ = down[1];
    granted_ns_ = read_time();
  }
  ~ChildHolder() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    ::close(from_);
    ::close(to_);
  }
  bool ok() const { return granted_ns_ > 0; }
  long long granted_ns() const { return granted_ns_; }
  // Releases; the time the release was sent (< 0 if it failed).
  long long release() {
    (void)!::write(to_, "r", 1);
    return read_time();
  }
  // The process dies: its connections drop, the server frees its doorbell,
  // its lease stays until its TTL.
  void kill() {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

 private:
  long long read_time() {
    long long t = -1;
    if (::read(from_, &t, sizeof t) != sizeof t) return -1;
    return t;
  }
  pid_t pid_ = -1;
  int from_ = -1, to_ = -1;
  long long granted_ns_ = -1;
};

std::string url(const std::string& q) {
  return testing::shared_my_server().url(q);
}

// Starts acquire(name, wait) on a thread; result() joins it.
class Waiter {
 public:
  Waiter(Client& c, std::string name, std::chrono::milliseconds wait)
      : t_([this, &c, name = std::move(name), wait] {
          auto l = c.acquire(name, wait, opts(30s));
          done_ns_ = now_ns();
          ok_ = l.ok();
          if (ok_) {
            lease_ = *l;
          } else {
            error_ = l.error().to_string();
          }
        }) {}
  ~Waiter() {
    if (t_.joinable()) t_.join();
  }
  void join() { t_.join(); }
  bool ok() const { return ok_; }
  long long done_ns() const { return done_ns_; }
  const Lease& lease() const { return lease_; }
  const std::string& error() const { return error_; }

 private:
  long long done_ns_ = 0;
  bool ok_ = false;
  Lease lease_;
  std::string error_;
  std::thread t_;
};

double ms_between(long long from_ns, long long to_ns) {
  return static_cast<double>(to_ns - from_ns) / 1e6;
}

TEST(MyDoorbell, UrlSettingsAreCheckedNamingThem) {
  for (const char* q : {"doorbell=maybe", "max_doorbells=-1"}) {
    auto c = Client::open(url(q));
    ASSERT_FALSE(c.ok()) << q;
    EXPECT_EQ(c.error().code(), Errc::invalid_argument);
    const std::string key = std::string(q).substr(0, std::string(q).find('='));
    EXPECT_NE(c.error().message().find(key), std::string::npos)
        << c.error().message();
  }
  EXPECT_TRUE(Client::open(url("doorbell=off&max_doorbells=0")).ok());
}

TEST(MyDoorbell, NamesFitMariadbsLimitAndSeparateTheirParts) {
  const std::string a = store::my::doorbell_name("h:1/db", "baton_", "x", "t");
  EXPECT_LE(a.size(), 64u);
  EXPECT_EQ(a.rfind("baton:", 0), 0u) << a;
  EXPECT_EQ(a, store::my::doorbell_name("h:1/db", "baton_", "x", "t"));
  EXPECT_NE(a, store::my::doorbell_name("h:1/db", "baton_", "xt", ""));
  EXPECT_NE(a, store::my::doorbell_name("h:1/db2", "baton_", "x", "t"));
  const std::string big(2000, 'n');
  EXPECT_LE(store::my::doorbell_name(big, big, big, big).size(), 64u);
}

// The release in another process wakes the waiter at once: without the
// doorbell it would look again only after its 5-10 s fallback re-check.
TEST(MyDoorbell, HandoffFromAnotherProcessIsAPush) {
  auto c = Client::open(url(kSlowFallback));
  ASSERT_TRUE(c.ok()) << c.error().to_string();
  // One name: from the second round on the holder's lease is granted by
  // the fast path (the name is idle), which takes its doorbell in the
  // UPDATE (mysql_fast_test.cc checks that it does).
  const std::string name = unique("push");
  for (int round = 0; round < 3; ++round) {
    ChildHolder holder(url(""), name, 60s);
    ASSERT_TRUE(holder.ok());
    Waiter w(*c, name, 30s);
    std::this_thread::sleep_for(300ms);  // the waiter is queued and asleep
    const long long sent = holder.release();
    ASSERT_GT(sent, 0);
    w.join();
    ASSERT_TRUE(w.ok()) << w.error();
    const double ms = ms_between(sent, w.done_ns());
    EXPECT_LT(ms, 2000) << "round " << round << ": granted " << ms
                        << " ms after the release";
    EXPECT_TRUE(c->release(w.lease()).ok());
  }
}

// The holder's process dies: the server frees its doorbell and the waiter
// wakes, but the doorbell is only a hint: its lease still holds until its
// TTL, and then the waiter is granted without waiting for its fallback.
TEST(MyDoorbell, HolderKilledWakesTheWaiterButItsLeaseLastsItsTtl) {
  auto c = Client::open(url(kSlowFallback));
  ASSERT_TRUE(c.ok()) << c.error().to_string();
  const std::string name = unique("killed");
  ChildHolder holder(url(""), name, 2500ms);
  ASSERT_TRUE(holder.ok());
  Waiter w(*c, name, 30s);
  std::this_thread::sleep_for(300ms);
  holder.kill();
  w.join();
  ASSERT_TRUE(w.ok()) << w.error();
  const double ms = ms_between(holder.granted_ns(), w.done_ns());
  EXPECT_GE(ms, 2500 - 100) << "granted before the dead holder's lease ended";
  EXPECT_LT(ms, 2500 + 2000) << "granted " << ms << " ms after its grant";
  EXPECT_TRUE(c->release(w.lease()).ok());
}

// A holder that lives but never releases keeps its doorbell: the waiter's
// GET_LOCK is bounded by that lease's expiry, so the TTL still grants.
TEST(MyDoorbell, StuckLiveHolderStillExpiresByTtl) {
  auto c = Client::open(url(kSlowFallback));
  ASSERT_TRUE(c.ok()) << c.error().to_string();
  const std::string name = unique("stuck");
  ChildHolder holder(url(""), name, 2s);
  ASSERT_TRUE(holder.ok());
  Waiter w(*c, name, 30s);
  w.join();
  ASSERT_TRUE(w.ok()) << w.error();
  const double ms = ms_between(holder.granted_ns(), w.done_ns());
  EXPECT_GE(ms, 2000 - 100);
  EXPECT_LT(ms, 2000 + 2000) << "granted " << ms << " ms after its grant";
  EXPECT_TRUE(c->release(w.lease()).ok());
}

// W1 waits behind the holder, W2 behind W1 (on W1's doorbell). W1 gives
// up: its doorbell goes, W2 reads its line again and waits on the holder;
// the holder's release (another process) then grants W2 at once.
TEST(MyDoorbell, WaiterWhosePredecessorGivesUpStillGetsItsTurn) {
  auto c1 = Client::open(url(kSlowFallback));
  auto c2 = Client::open(url(kSlowFallback));
  ASSERT_TRUE(c1.ok() && c2.ok());
  const std::string name = unique("giveup");
  ChildHolder holder(url(""), name, 60s);
  ASSERT_TRUE(holder.ok());
  Waiter w1(*c1, name, 700ms);
  std::this_thread::sleep_for(200ms);
  Waiter w2(*c2, name, 30s);
  w1.join();
  EXPECT_FALSE(w1.ok()) << "the holder still holds";
  std::this_thread::sleep_for(500ms);
  auto info = c2->describe(name);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->waiters.size(), 1u) << "W2 waits, W1 left";
  const long long sent = holder.release();
  ASSERT_GT(sent, 0);
  w2.join();
  ASSERT_TRUE(w2.ok()) << w2.error();
  const double ms = ms_between(sent, w2.done_ns());
  EXPECT_LT(ms, 2000) << "granted " << ms << " ms after the release";
  EXPECT_TRUE(c2->release(w2.lease()).ok());
}

int connections() {
  return std::stoi(testing::shared_my_server().sql(
      "SELECT COUNT(*) FROM information_schema.processlist "
      "WHERE user = 'baton'"));
}

// The count once it is at most `limit` (a closed connection leaves the
// process list a moment after its socket closes), or the last count seen.
int connections_settled(int limit) {
  int n = connections();
  for (int i = 0; i < 30 && n > limit; ++i) {
    std::this_thread::sleep_for(100ms);
    n = connections();
  }
  return n;
}

// Waits that time out and leases released leave no doorbell connection
// behind: the store's connections go back to its pool
// (max_idle_connections=2), and
// all of them close with the client. No doorbell name stays taken.
TEST(MyDoorbell, NoDoorbellConnectionLeaks) {
  const std::string name = unique("leak");
  int before = 0;
  for (int i = 0; i < 50 && (before = connections()) > 0; ++i) {
    std::this_thread::sleep_for(100ms);  // other tests' clients closing
  }
  {
    auto c = Client::open(url("max_idle_connections=2"));
    ASSERT_TRUE(c.ok());
    auto held = c->acquire(name, 5s, opts(30s));
    ASSERT_TRUE(held.ok());
    {
      std::vector<std::unique_ptr<Waiter>> ws;
      for (int i = 0; i < 6; ++i) {
        ws.push_back(std::make_unique<Waiter>(*c, name, 400ms));
      }
      for (auto& w : ws) {
        w->join();
        EXPECT_FALSE(w->ok());
      }
    }
    // The holder's doorbell connection and at most 2 idle ones.
    EXPECT_LE(connections_settled(before + 3), before + 3);
    const std::string bell = store::my::doorbell_name(
        "127.0.0.1:" + std::to_string(testing::shared_my_server().port()) +
            "/baton_test",
        "baton_", name, held->token.to_string());
    EXPECT_NE(testing::shared_my_server().sql("SELECT IS_USED_LOCK('" + bell +
                                              "') IS NOT NULL"),
              "0")
        << "the holder keeps its doorbell while it holds";
    ASSERT_TRUE(c->release(*held).ok());
    EXPECT_EQ(testing::shared_my_server().sql("SELECT IS_USED_LOCK('" + bell +
                                              "') IS NULL"),
              "1")
        << "a released lease's doorbell is let go";
    EXPECT_LE(connections_settled(before + 2), before + 2);
  }
  EXPECT_EQ(connections_settled(before), before);
}

}  // namespace
}  // namespace baton
