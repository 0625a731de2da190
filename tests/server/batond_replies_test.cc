// tests/server/batond_replies_test.cc — what batond answers:
// error messages that name the real problem and the accepted range, a full
// queue as `unavailable`, describe's last_fencing of a free lock, and a late
// duplicate acquire of an ended lease.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

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

// BRIEF: a grant of the lease asked for is answered with only what the
// client does not know; anything else (a reentrant join, a grant after a
// wait, a refusal) keeps its usual form, and the client reads both.
TEST(BatondReplies, BriefGrantCarriesOnlyWhatTheClientDoesNotKnow) {
  BatondProcess server;
  Raw c(server.port());
  auto g = c.call(
      {"LOCK.ACQUIRE", "b", kTok1, "30000", "REENTRANT", "job", "BRIEF"});
  ASSERT_EQ(g.type, proto::Reply::Type::array) << g.str;
  ASSERT_EQ(g.elements.size(), 4u);
  for (const auto& e : g.elements) {
    EXPECT_EQ(e.type, proto::Reply::Type::integer);
  }
  AcquireSpec asked;
  asked.name = "b";
  asked.token = *OwnerToken::parse(kTok1);
  asked.ttl = 30000ms;
  auto got = proto::read_grant(g, asked);
  ASSERT_TRUE(got) << got.error().to_string();
  EXPECT_EQ(got->name, "b");
  EXPECT_EQ(got->token, asked.token);
  EXPECT_GE(got->fencing_token, 1u);
  EXPECT_EQ(got->holds, 1u);
  EXPECT_GT(got->valid_for, 29s);
  EXPECT_LE(got->valid_for, 30s);
  EXPECT_GT(got->store_expires_at_ms, 0);
  // The same request without BRIEF: the same lease in the full form.
  auto full = proto::read_grant(c.call({"LOCK.ACQUIRE", "b", kTok1, "30000"}));
  ASSERT_TRUE(full) << full.error().to_string();
  EXPECT_EQ(full->fencing_token, got->fencing_token);
  // A reentrant join under another token gets the holder's lease: the
  // full form, which names its token.
  auto join = c.call(
      {"LOCK.ACQUIRE", "b", kTok2, "30000", "REENTRANT", "job", "BRIEF"});
  ASSERT_EQ(join.type, proto::Reply::Type::array);
  EXPECT_EQ(join.elements.at(0).str, "granted");
  asked.token = *OwnerToken::parse(kTok2);
  auto joined = proto::read_grant(join, asked);
  ASSERT_TRUE(joined) << joined.error().to_string();
  EXPECT_EQ(joined->token, *OwnerToken::parse(kTok1));
  EXPECT_GE(joined->holds, 2u);
  // A refusal is unchanged.
  auto busy = c.call({"LOCK.ACQUIRE", "b", kTok3, "30000", "BRIEF"});
  EXPECT_FALSE(proto::read_grant(busy, asked));
  EXPECT_EQ(busy.elements.at(0).str, "not_acquired");
  // A grant after a wait: the full form.
  ASSERT_EQ(
      c.call({"LOCK.ACQUIRE", "w", kTok1, "30000", "BRIEF"}).elements.size(),
      4u);
  Raw w(server.port());
  w.send({"LOCK.ACQUIRE", "w", kTok3, "30000", "WAIT", "5000", "BRIEF"});
  std::this_thread::sleep_for(100ms);  // queued
  ASSERT_EQ(c.call({"LOCK.RELEASE", "w", kTok1}).type,
            proto::Reply::Type::array);
  auto waited = w.read();
  ASSERT_TRUE(waited);
  EXPECT_EQ(waited->elements.at(0).str, "granted");
}

// QUEUED: a request that queues is answered `+queued <place>` at once,
// then its final answer on the same connection; one granted at once, or a
// try, gets only its one answer.
TEST(BatondReplies, QueuedTellsTheWaitBeforeTheGrant) {
  BatondProcess server;
  Raw c(server.port());
  auto now =
      c.call({"LOCK.ACQUIRE", "q", kTok1, "30000", "WAIT", "5000", "QUEUED"});
  ASSERT_EQ(now.type, proto::Reply::Type::array) << now.str;
  EXPECT_EQ(now.elements.at(0).str, "granted");
  auto busy = c.call({"LOCK.ACQUIRE", "q", kTok2, "30000", "QUEUED"});
  ASSERT_EQ(busy.type, proto::Reply::Type::array) << busy.str;
  EXPECT_EQ(busy.elements.at(0).str, "not_acquired");

  Raw w2(server.port()), w3(server.port());
  w2.send({"LOCK.ACQUIRE", "q", kTok2, "30000", "WAIT", "5000", "QUEUED"});
  auto q2 = w2.read();
  ASSERT_TRUE(q2);
  std::uint32_t place = 0;
  EXPECT_TRUE(proto::read_queued(*q2, &place)) << q2->str;
  EXPECT_EQ(place, 1u);
  w3.send({"LOCK.ACQUIRE", "q", kTok3, "30000", "WAIT", "5000", "QUEUED"});
  auto q3 = w3.read();
  ASSERT_TRUE(q3);
  EXPECT_EQ(q3->type, proto::Reply::Type::status);
  EXPECT_EQ(q3->str, "queued 2");

  ASSERT_EQ(c.call({"LOCK.RELEASE", "q", kTok1}).type,
            proto::Reply::Type::array);
  auto granted = w2.read();
  ASSERT_TRUE(granted);
  EXPECT_EQ(granted->elements.at(0).str, "granted");
  // A withdrawn waiter's final answer follows its `+queued` as before.
  ASSERT_EQ(c.call({"LOCK.RELEASE", "q", kTok3}).type,
            proto::Reply::Type::array);
  auto withdrawn = w3.read();
  ASSERT_TRUE(withdrawn);
  EXPECT_EQ(withdrawn->type, proto::Reply::Type::error);
  EXPECT_EQ(withdrawn->str.rfind("not_acquired ", 0), 0u) << withdrawn->str;
}

TEST(BatondReplies, NegativeBulkLengthIsNotCalledOverTheLimit) {
  BatondProcess server;
  for (const char* len : {"-1", "-5"}) {
    Raw c(server.port());
    c.send_raw(std::string("*2\r\n$4\r\nPING\r\n$") + len + "\r\n");
    auto e = c.read();
    ASSERT_TRUE(e);
    EXPECT_EQ(e->str, std::string("invalid_argument protocol error: argument "
                                  "2 has bulk length ") +
                          len +
                          "; a negative or null bulk length is not allowed "
                          "in a request");
    EXPECT_FALSE(c.read()) << "the connection stays open";
  }
}

TEST(BatondReplies, EveryOutOfRangeTtlReportsTheSameRange) {
  BatondProcess server;
  Raw c(server.port());
  for (const std::string ttl : {"-1", "0", "604800001", "-9223372036854775808",
                                "99999999999999999999"}) {
    const std::string want =
        "invalid_argument TTL " + ttl + "ms is out of range (1ms .. 7d)";
    EXPECT_EQ(c.call({"LOCK.ACQUIRE", "t", kTok1, ttl}).str, want);
    EXPECT_EQ(c.call({"LOCK.EXTEND", "t", kTok1, ttl}).str, want);
    EXPECT_EQ(
        c.call({"LOCK.ACQUIRE_SOME", kTok1, ttl, "0", "1", "me", "t"}).str,
        want);
    EXPECT_EQ(c.call({"LOCK.ACQUIRE_ALL", kTok1, ttl, "0", "1", "me", "t"}).str,
              want);
  }
  // The bounds themselves are accepted.
  for (const std::string ttl : {"1", "604800000"}) {
    auto g = c.call({"LOCK.ACQUIRE", "t" + ttl, kTok1, ttl});
    ASSERT_EQ(g.type, proto::Reply::Type::array) << g.str;
    EXPECT_EQ(g.elements.at(0).str, "granted");
  }
  EXPECT_EQ(c.call({"LOCK.ACQUIRE", "t", kTok1, "10s"}).str,
            "invalid_argument ttl_ms must be an integer, got \"10s\"");
}

TEST(BatondReplies, CapacityOutOfRangeReportsTheAcceptedRange) {
  BatondProcess server;
  Raw c(server.port());
  for (const std::string cap : {"-1", "0", "4294967296"}) {
    EXPECT_EQ(c.call({"LOCK.ACQUIRE", "c", kTok1, "1000", "CAPACITY", cap}).str,
              "invalid_argument CAPACITY " + cap +
                  " is out of range (1..4294967295)");
    EXPECT_EQ(
        c.call({"LOCK.ACQUIRE_SOME", kTok1, "1000", "0", cap, "me", "c"}).str,
        "invalid_argument capacity " + cap +
            " is out of range (1..4294967295)");
  }
  auto g =
      c.call({"LOCK.ACQUIRE", "c", kTok1, "1000", "CAPACITY", "4294967295"});
  ASSERT_EQ(g.type, proto::Reply::Type::array) << g.str;
  EXPECT_EQ(g.elements.at(0).str, "granted");
}

TEST(BatondReplies, AFullQueueIsUnavailableNamingTheLimit) {
  BatondProcess server("", {"--max-waiters-per-lock", "2"});
  Raw holder(server.port());
  ASSERT_EQ(
      holder.call({"LOCK.ACQUIRE", "q", kTok1, "30000"}).elements.at(0).str,
      "granted");
  Raw w1(server.port()), w2(server.port());
  w1.send({"LOCK.ACQUIRE", "q", kTok2, "30000", "WAIT", "30000"});
  w2.send({"LOCK.ACQUIRE", "q", kTok3, "30000", "WAIT", "30000"});
  std::this_thread::sleep_for(100ms);
  const std::string want =
      "unavailable lock \"q\" has 2 waiters, the limit (max_waiters_per_lock "
      "2); the queue is full, retry later";
  Raw c(server.port());
  EXPECT_EQ(c.call({"LOCK.ACQUIRE", "q", "00000000000000000000000000000def",
                    "30000", "WAIT", "1000"})
                .str,
            want);
  EXPECT_EQ(c.call({"LOCK.ACQUIRE_ALL", "00000000000000000000000000000def",
                    "30000", "1000", "1", "me", "q"})
                .str,
            want);
  // Nothing changed: two waiters, in order.
  auto info = proto::read_lock_info(c.call({"LOCK.DESCRIBE", "q"}));
  ASSERT_TRUE(info);
  EXPECT_EQ(info->waiters.size(), 2u);
}

// A parked LOCK.ACQUIRE_ALL withdrawn by LOCK.RELEASE with its reservation
// is answered at once, as a parked LOCK.ACQUIRE is (docs/protocol.md).
TEST(BatondReplies, AWithdrawnAcquireAllIsAnsweredAtOnce) {
  BatondProcess server;
  Raw holder(server.port());
  ASSERT_EQ(
      holder.call({"LOCK.ACQUIRE", "b", kTok1, "30000"}).elements.at(0).str,
      "granted");
  Raw waiter(server.port());
  waiter.send(
      {"LOCK.ACQUIRE_ALL", kTok2, "30000", "10000", "1", "me", "a", "b"});
  std::this_thread::sleep_for(100ms);
  auto rel = holder.call({"LOCK.RELEASE", "a", kTok2});
  EXPECT_EQ(rel.elements.at(1).integer, 0);  // withdrawn, not held
  const auto start = std::chrono::steady_clock::now();
  auto r = waiter.read();  // (5 s receive timeout)
  ASSERT_TRUE(r) << "the withdrawn ACQUIRE_ALL was not answered";
  EXPECT_LT(std::chrono::steady_clock::now() - start, 1s);
  EXPECT_EQ(r->str,
            "not_acquired the waiting request was withdrawn by LOCK.RELEASE");
  waiter.send({"PING"});  // the connection goes on
  auto pong = waiter.read();
  ASSERT_TRUE(pong);
  EXPECT_EQ(pong->str, "PONG");
  auto info = proto::read_lock_info(holder.call({"LOCK.DESCRIBE", "a"}));
  ASSERT_TRUE(info);
  EXPECT_TRUE(info->waiters.empty());
}

// LOCK.DESCRIBE of a lock that is free again reports a last_fencing at
// least as high as every token it granted (the table-wide high water).
TEST(BatondReplies, DescribeOfAFreeLockKeepsTheFencingHighWater) {
  BatondProcess server;
  Raw c(server.port());
  auto g = proto::read_grant(c.call({"LOCK.ACQUIRE", "f", kTok1, "30000"}));
  ASSERT_TRUE(g) << g.error().to_string();
  ASSERT_EQ(c.call({"LOCK.RELEASE", "f", kTok1}).elements.at(1).integer, 1);
  auto info = proto::read_lock_info(c.call({"LOCK.DESCRIBE", "f"}));
  ASSERT_TRUE(info);
  EXPECT_TRUE(info->holders.empty());
  EXPECT_EQ(info->last_fencing_token, g->fencing_token);
  auto other = proto::read_lock_info(c.call({"LOCK.DESCRIBE", "unused"}));
  ASSERT_TRUE(other);
  EXPECT_EQ(other->last_fencing_token, g->fencing_token);
  // It survives a restart (the journal keeps the high water).
  server.stop();
  server.start();
  Raw after(server.port());
  info = proto::read_lock_info(after.call({"LOCK.DESCRIBE", "f"}));
  ASSERT_TRUE(info);
  EXPECT_GE(info->last_fencing_token, g->fencing_token);
}

// A late duplicate of LOCK.ACQUIRE (same token) after its lease ended.
TEST(BatondReplies, ALateDuplicateAcquireIsLockLost) {
  BatondProcess server;
  Raw c(server.port());
  ASSERT_EQ(c.call({"LOCK.ACQUIRE", "d", kTok1, "30000"}).elements.at(0).str,
            "granted");
  ASSERT_EQ(c.call({"LOCK.RELEASE", "d", kTok1}).elements.at(1).integer, 1);
  EXPECT_EQ(c.call({"LOCK.ACQUIRE", "d", kTok1, "30000"}).str,
            "lock_lost lock \"d\": this request's lease already ended "
            "(released or expired); a late duplicate is not granted again, "
            "acquire with a new owner token");
  auto info = proto::read_lock_info(c.call({"LOCK.DESCRIBE", "d"}));
  ASSERT_TRUE(info);
  EXPECT_TRUE(info->holders.empty());
  EXPECT_EQ(c.call({"LOCK.ACQUIRE", "d", kTok2, "30000"}).elements.at(0).str,
            "granted");
}

}  // namespace
}  // namespace baton
