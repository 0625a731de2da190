// tests/server/batond_closed_peer_test.cc — a request whose connection is
// already closed is not granted: batond is SIGSTOPped, a client
// sends an acquire and closes its socket, batond is resumed; the lock must
// be free at once, not held for the TTL by a client that is gone.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>

#include "baton/client.h"
#include "batond_process.h"
#include "proto/commands.h"
#include "raw_resp.h"

namespace baton {
namespace {

using baton::testing::BatondProcess;
using baton::testing::Raw;
using namespace std::chrono_literals;

const std::string kTok1 = "0123456789abcdef0123456789abcdef";
const std::string kTok2 = "fedcba9876543210fedcba9876543210";
const std::string kTok3 = "00000000000000000000000000000abc";

// Holders and waiters of `name` as batond reports them now.
LockInfo describe(std::uint16_t port, const std::string& name) {
  Raw c(port);
  auto info = proto::read_lock_info(c.call({"LOCK.DESCRIBE", name}));
  if (!info) throw std::runtime_error(info.error().to_string());
  return *info;
}

// A second client can take `name` at once.
void expect_free_for_another_client(const BatondProcess& server,
                                    const std::string& name) {
  const LockInfo info = describe(server.port(), name);
  EXPECT_TRUE(info.holders.empty())
      << name << " is held by " << info.holders.at(0).label;
  EXPECT_TRUE(info.waiters.empty()) << name;
  auto client = Client::open(server.url());
  ASSERT_TRUE(client.ok());
  AcquireOptions o;
  o.ttl = 30s;
  auto lease = client->try_acquire(name, o);
  EXPECT_TRUE(lease.ok()) << name << ": " << lease.error().to_string();
}

// Sends `request` on a fresh connection while batond is stopped, closes the
// connection, then resumes batond.
void send_and_close_while_stopped(BatondProcess& server,
                                  const std::vector<std::string>& request) {
  Raw dead(server.port());
  ASSERT_EQ(dead.call({"PING"}).str, "PONG");  // accepted and reading
  server.pause();
  dead.send(request);
  dead.close();
  std::this_thread::sleep_for(50ms);
  server.resume();
  std::this_thread::sleep_for(200ms);
}

TEST(BatondClosedPeer, TryAcquireFromAClosedConnectionIsNotGranted) {
  BatondProcess server;
  send_and_close_while_stopped(
      server, {"LOCK.ACQUIRE", "m", kTok1, "30000", "LABEL", "gone"});
  expect_free_for_another_client(server, "m");
}

TEST(BatondClosedPeer, WaitingAcquireFromAClosedConnectionIsNotQueued) {
  BatondProcess server;
  send_and_close_while_stopped(server, {"LOCK.ACQUIRE", "w", kTok1, "30000",
                                        "WAIT", "30000", "LABEL", "gone"});
  expect_free_for_another_client(server, "w");
}

TEST(BatondClosedPeer, MultiAcquireFromAClosedConnectionIsNotGranted) {
  BatondProcess server;
  send_and_close_while_stopped(server, {"LOCK.ACQUIRE_SOME", kTok1, "30000",
                                        "0", "1", "gone", "s1", "s2"});
  send_and_close_while_stopped(server, {"LOCK.ACQUIRE_ALL", kTok2, "30000",
                                        "1000", "1", "gone", "a1", "a2"});
  for (const char* name : {"s1", "s2", "a1", "a2"}) {
    expect_free_for_another_client(server, name);
  }
}

// A release pipelined by a client that then left is still executed (only
// requests that would grant are dropped).
TEST(BatondClosedPeer, ReleaseFromAClosedConnectionIsExecuted) {
  BatondProcess server;
  {
    Raw holder(server.port());
    auto g = holder.call({"LOCK.ACQUIRE", "r", kTok1, "30000", "EPHEMERAL"});
    ASSERT_EQ(g.elements.at(0).str, "granted");
    server.pause();
    holder.send({"LOCK.RELEASE", "r", kTok1});
    holder.close();
    std::this_thread::sleep_for(50ms);
    server.resume();
  }
  std::this_thread::sleep_for(200ms);
  expect_free_for_another_client(server, "r");
}

// A parked waiter whose client left while batond was stopped: when batond
// resumes, the lock may be freed (a release read in the same round, or the
// holder's expiry) before the waiter's close is read. Its grant is then
// given back at once instead of staying for its TTL.
TEST(BatondClosedPeer, ParkedWaiterWhoseClientLeftIsNotLeftHolding) {
  BatondProcess server;
  for (int round = 0; round < 3; ++round) {
    for (bool by_release : {true, false}) {
      const std::string name =
          std::string(by_release ? "rel" : "exp") + std::to_string(round);
      Raw holder(server.port());
      auto g = holder.call({"LOCK.ACQUIRE", name, kTok1,
                            by_release ? "30000" : "300", "LABEL", "holder"});
      ASSERT_EQ(g.elements.at(0).str, "granted");
      Raw waiter(server.port());
      waiter.send({"LOCK.ACQUIRE", name, kTok2, "30000", "WAIT", "30000",
                   "LABEL", "gone"});
      std::this_thread::sleep_for(50ms);
      ASSERT_EQ(describe(server.port(), name).waiters.size(), 1u);
      server.pause();
      if (by_release) {
        holder.send({"LOCK.RELEASE", name, kTok1});
      } else {
        std::this_thread::sleep_for(400ms);  // the holder's lease expires
      }
      std::this_thread::sleep_for(20ms);
      waiter.close();
      std::this_thread::sleep_for(50ms);
      server.resume();
      std::this_thread::sleep_for(200ms);
      expect_free_for_another_client(server, name);
    }
  }
}

// A grant whose reply waits for the journal (fsync_interval) when its
// client leaves: the reply can never be sent, so the grant is given back.
TEST(BatondClosedPeer, GrantWaitingForTheJournalIsGivenBackOnClose) {
  BatondProcess server("", {"--fsync", "batch", "--fsync-interval", "600ms"});
  Raw c(server.port());
  ASSERT_EQ(c.call({"LOCK.ACQUIRE", "j1", kTok1, "30000"}).elements.at(0).str,
            "granted");  // an fsync just started: the next waits ~600 ms
  {
    Raw leaving(server.port());
    leaving.send({"LOCK.ACQUIRE", "j2", kTok3, "30000", "LABEL", "gone"});
    // Executed and staged; (a describe now would itself wait for the
    // journal, so the test relies on the 600 ms interval instead.)
    std::this_thread::sleep_for(100ms);
  }
  std::this_thread::sleep_for(150ms);
  expect_free_for_another_client(server, "j2");
}

}  // namespace
}  // namespace baton
