// tests/server/batond_stop_test.cc — batond stops gracefully on SIGTERM
// (docs/server.md, first section): a parked waiter is answered `unavailable`
// instead of seeing its connection drop, and nothing acknowledged is lost
// (the journal is flushed: the lease is held after a restart, and the next
// grant's fencing token is larger).
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

const std::string kHolder = "0123456789abcdef0123456789abcdef";
const std::string kWaiter = "fedcba9876543210fedcba9876543210";

TEST(BatondStop, SigtermAnswersWaitersAndKeepsAcknowledgedLeases) {
  BatondProcess server;
  Raw holder(server.port());
  auto granted = holder.call({"LOCK.ACQUIRE", "stop-m", kHolder, "60000"});
  auto lease = proto::read_grant(granted);
  ASSERT_TRUE(lease.ok()) << lease.error().to_string();

  Raw waiter(server.port());
  waiter.send({"LOCK.ACQUIRE", "stop-m", kWaiter, "60000", "WAIT", "30000"});
  // The waiter is parked (describe from a third connection shows it).
  bool queued = false;
  for (int i = 0; i < 200 && !queued; ++i) {
    Raw c(server.port());
    auto info = proto::read_lock_info(c.call({"LOCK.DESCRIBE", "stop-m"}));
    queued = info.ok() && info->waiters.size() == 1;
    if (!queued) std::this_thread::sleep_for(10ms);
  }
  ASSERT_TRUE(queued) << "the waiter never queued";

  const auto t0 = std::chrono::steady_clock::now();
  server.stop();  // SIGTERM, waits for the exit
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_TRUE(WIFEXITED(server.exit_status()) &&
              WEXITSTATUS(server.exit_status()) == 0)
      << "status " << server.exit_status();
  EXPECT_LT(took, 5s) << "the stop's drain is bounded (2 s)";
  auto answer = waiter.read();
  ASSERT_TRUE(answer.has_value()) << "the waiter's connection just dropped";
  EXPECT_EQ(answer->type, proto::Reply::Type::error);
  EXPECT_EQ(answer->str.rfind("unavailable batond is shutting down", 0), 0u)
      << answer->str;

  // Nothing acknowledged was lost; the waiter was not granted behind our
  // back; tokens keep increasing.
  server.start();
  Raw c(server.port());
  auto info = proto::read_lock_info(c.call({"LOCK.DESCRIBE", "stop-m"}));
  ASSERT_TRUE(info.ok()) << info.error().to_string();
  ASSERT_EQ(info->holders.size(), 1u);
  EXPECT_EQ(info->holders[0].fencing_token, lease->fencing_token);
  EXPECT_TRUE(info->waiters.empty());
  auto released = c.call({"LOCK.RELEASE", "stop-m", kHolder});
  EXPECT_NE(released.type, proto::Reply::Type::error) << released.str;
  auto next =
      proto::read_grant(c.call({"LOCK.ACQUIRE", "stop-m", kWaiter, "60000"}));
  ASSERT_TRUE(next.ok()) << next.error().to_string();
  EXPECT_GT(next->fencing_token, lease->fencing_token);
}

}  // namespace
}  // namespace baton
