// tests/server/resp_test.cc — RESP request parser and reply decoding.
#include "proto/resp.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "proto/commands.h"

namespace baton::proto {
namespace {

using State = RequestParser::State;

TEST(RequestParser, ParsesPipelinedRequestsByteByByte) {
  std::string in =
      encode_command({"PING"}) + encode_command({"LOCK.RELEASE", "a\r\nb", ""});
  RequestParser p;
  std::vector<Request> got;
  for (char c : in) {
    p.feed(&c, 1);
    Request r;
    std::string msg;
    while (p.next(&r, &msg) == State::request) got.push_back(r);
  }
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0], Request{"PING"});
  EXPECT_EQ(got[1], (Request{"LOCK.RELEASE", "a\r\nb", ""}));
  EXPECT_EQ(p.buffered(), 0u);
}

// The arguments come out byte for byte, whatever they hold (CR, LF, NUL,
// '*', '$', empty), for random requests fed in random pieces.
TEST(RequestParser, RandomRequestsInRandomPiecesComeOutExactly) {
  std::mt19937 rng(20261125);
  std::vector<Request> sent;
  std::string in;
  for (int i = 0; i < 2000; ++i) {
    Request r(1 + rng() % 8);
    for (auto& a : r) {
      a.resize(rng() % 48);
      for (auto& c : a) {
        const char special[] = {'\r', '\n', '\0', '*', '$', '-', '1'};
        c = rng() % 4 == 0 ? special[rng() % sizeof special]
                           : static_cast<char>(rng() % 256);
      }
    }
    in += encode_command(r);
    sent.push_back(std::move(r));
  }
  RequestParser p;
  std::vector<Request> got;
  Request r;
  std::string msg;
  for (std::size_t at = 0; at < in.size();) {
    const std::size_t n =
        std::min<std::size_t>(1 + rng() % 300, in.size() - at);
    p.feed(in.data() + at, n);
    at += n;
    State st;
    while ((st = p.next(&r, &msg)) == State::request) got.push_back(r);
    ASSERT_EQ(st, State::need_more) << msg;
  }
  ASSERT_EQ(got.size(), sent.size());
  for (std::size_t i = 0; i < sent.size(); ++i) {
    ASSERT_EQ(got[i], sent[i]) << "request " << i;
  }
  EXPECT_EQ(p.buffered(), 0u);
}

State parse(std::string_view in, std::string* msg, ProtoLimits l = {}) {
  RequestParser p(l);
  p.feed(in.data(), in.size());
  Request r;
  return p.next(&r, msg);
}

TEST(RequestParser, RefusesMalformedInput) {
  const char* bad[] = {
      "PING\r\n",            // inline commands are not RESP arrays
      "*1\r\n:1\r\n",        // argument is not a bulk string
      "*x\r\n",              // bad count
      "*0\r\n",              // empty
      "*-1\r\n",             // null array
      "*1\r\n$-1\r\n",       // null bulk
      "*1\r\n$3\rxabc\r\n",  // bad CRLF
      "*1\r\n$3\r\nabcXY",   // missing CRLF after payload
      "*1\r\n$99999999999999999999\r\n",
      "*1\r\n*1\r\n$1\r\na\r\n",  // nested array
      "*1\r\n$+3\r\nabc\r\n",
  };
  for (const char* in : bad) {
    std::string msg;
    EXPECT_EQ(parse(in, &msg), State::error) << in;
    EXPECT_EQ(msg.rfind("invalid_argument ", 0), 0u) << msg;
  }
}

TEST(RequestParser, NegativeBulkLengthIsNamedNotCalledOverTheLimit) {
  for (const char* len : {"-1", "-5"}) {
    std::string msg;
    EXPECT_EQ(parse(std::string("*2\r\n$4\r\nPING\r\n$") + len + "\r\n", &msg),
              State::error);
    EXPECT_EQ(msg, std::string("invalid_argument protocol error: argument 2 "
                               "has bulk length ") +
                       len +
                       "; a negative or null bulk length is not allowed in "
                       "a request");
  }
  // A declared length over the limit is still reported as such.
  std::string msg;
  EXPECT_EQ(parse("*1\r\n$2000000\r\n", &msg), State::error);
  EXPECT_EQ(msg, "invalid_argument request is over the 1048576-byte limit");
}

TEST(RequestParser, IncompleteFramesWait) {
  std::string msg;
  EXPECT_EQ(parse("*2\r\n$4\r\nPI", &msg), State::need_more);
  EXPECT_EQ(parse("*2", &msg), State::need_more);
  EXPECT_EQ(parse("", &msg), State::need_more);
}

TEST(RequestParser, EnforcesLimitsBeforeBuffering) {
  std::string msg;
  ProtoLimits l{1024, 4};
  EXPECT_EQ(parse("*5\r\n", &msg, l), State::error);
  EXPECT_NE(msg.find("arguments"), std::string::npos);
  // A declared payload over the limit fails at once, before any payload.
  EXPECT_EQ(parse("*1\r\n$2000\r\n", &msg, l), State::error);
  EXPECT_NE(msg.find("1024-byte limit"), std::string::npos);
  // A huge array count is refused without allocating it.
  EXPECT_EQ(parse("*2147483647\r\n", &msg), State::error);
  std::string ok = encode_command({"A", std::string(900, 'x')});
  EXPECT_EQ(parse(ok, &msg, l), State::request);
}

TEST(Replies, GrantRoundTrip) {
  core::Grant g;
  g.name = "x";
  g.token = OwnerToken{1, 2};
  g.fencing_token = 42;
  g.ttl = std::chrono::milliseconds(1500);
  g.holds = 2;
  g.capacity = 3;
  g.valid_for = std::chrono::microseconds(1499000);
  g.store_expires_at_ms = 1700000000000;
  std::string out;
  RespWriter w(out);
  write_grant(w, g);
  ReplyParser rp;
  ASSERT_TRUE(rp.feed(out.data(), out.size()));
  Reply r;
  ASSERT_TRUE(*rp.next(&r));
  auto back = read_grant(r);
  ASSERT_TRUE(back) << back.error().to_string();
  EXPECT_EQ(back->token, g.token);
  EXPECT_EQ(back->fencing_token, 42u);
  EXPECT_EQ(back->ttl, g.ttl);
  EXPECT_EQ(back->holds, 2u);
  EXPECT_EQ(back->valid_for, g.valid_for);
  EXPECT_EQ(back->store_expires_at_ms, g.store_expires_at_ms);
}

TEST(Replies, ErrorsMapToErrc) {
  std::string out;
  RespWriter w(out);
  write_error(w, Error(Errc::lock_lost, "lock \"a\" is not held"));
  Error e(Errc::not_acquired, "held");
  e.with_holders({HolderInfo{"me", 7, std::chrono::milliseconds(900), 1}});
  write_not_acquired(w, e);
  ReplyParser rp;
  ASSERT_TRUE(rp.feed(out.data(), out.size()));
  Reply r;
  ASSERT_TRUE(*rp.next(&r));
  auto g = read_grant(r);
  ASSERT_FALSE(g);
  EXPECT_EQ(g.error().code(), Errc::lock_lost);
  EXPECT_EQ(g.error().message(), "lock \"a\" is not held");
  ASSERT_TRUE(*rp.next(&r));
  g = read_grant(r);
  ASSERT_FALSE(g);
  EXPECT_EQ(g.error().code(), Errc::not_acquired);
  ASSERT_EQ(g.error().holders().size(), 1u);
  EXPECT_EQ(g.error().holders()[0].label, "me");
  EXPECT_EQ(g.error().holders()[0].fencing_token, 7u);
}

TEST(Replies, MalformedReplyStream) {
  ReplyParser rp;
  Status fed = rp.feed("?bad\r\n", 6);
  ASSERT_FALSE(fed);
  EXPECT_NE(fed.error().message().find("unknown type byte"), std::string::npos)
      << fed.error().message();
  // Final: later bytes are refused too.
  EXPECT_FALSE(rp.feed("+OK\r\n", 5));
}

TEST(Replies, HugeArrayHeaderIsRefusedBeforeAllocation) {
  ReplyParser rp;
  const std::string huge = "*2000000000\r\n";
  Status fed = rp.feed(huge.data(), huge.size());
  ASSERT_FALSE(fed);
  EXPECT_EQ(fed.error().code(), Errc::invalid_argument);
  EXPECT_NE(fed.error().message().find("reply array of 2000000000 elements "
                                       "exceeds the limit"),
            std::string::npos)
      << fed.error().message();
}

TEST(Replies, ReplyLimitsAreEnforced) {
  ReplyLimits lim;
  lim.max_array_elements = 4;
  lim.max_total_elements = 6;
  lim.max_bulk_bytes = 8;
  lim.max_depth = 2;
  auto refused = [&](const std::string& bytes, const std::string& what) {
    ReplyParser rp(lim);
    Status fed = rp.feed(bytes.data(), bytes.size());
    EXPECT_FALSE(fed) << bytes;
    if (!fed) {
      EXPECT_NE(fed.error().message().find(what), std::string::npos)
          << fed.error().message();
    }
  };
  refused("*5\r\n", "reply array of 5 elements exceeds the limit of 4");
  refused("$9\r\n", "bulk string of 9 bytes exceeds the limit of 8");
  refused("*1\r\n*1\r\n*1\r\n", "deeper than 2");
  refused("*4\r\n*4\r\n", "elements in all exceeds the limit");
  refused("$x\r\n", "bad length");
  refused("+OK\n", "CRLF");
  // Within the limits, and the counts start over for the next reply.
  ReplyParser rp(lim);
  const std::string ok =
      "*2\r\n$8\r\n12345678\r\n*2\r\n:1\r\n$-1\r\n"
      "*4\r\n+a\r\n-b\r\n*0\r\n*-1\r\n";
  ASSERT_TRUE(rp.feed(ok.data(), ok.size()));
  Reply r;
  ASSERT_TRUE(*rp.next(&r));
  ASSERT_EQ(r.elements.size(), 2u);
  EXPECT_EQ(r.elements[0].str, "12345678");
  ASSERT_TRUE(*rp.next(&r));
  EXPECT_EQ(r.elements.size(), 4u);
}

TEST(Replies, ScannerFollowsBytesSplitAnywhere) {
  core::Grant g;
  g.name = "split\r\nname";
  g.token = OwnerToken{3, 4};
  g.fencing_token = 9;
  std::string out;
  RespWriter w(out);
  w.array(2);
  write_grant(w, g);
  w.bulk(std::string(100, 'x'));
  w.integer(-5);
  ReplyParser rp;
  for (char c : out) ASSERT_TRUE(rp.feed(&c, 1));
  Reply r;
  ASSERT_TRUE(*rp.next(&r));
  ASSERT_EQ(r.elements.size(), 2u);
  auto back = read_grant(r.elements[0]);
  ASSERT_TRUE(back) << back.error().to_string();
  EXPECT_EQ(back->name, g.name);
  EXPECT_EQ(r.elements[1].str, std::string(100, 'x'));
  ASSERT_TRUE(*rp.next(&r));
  EXPECT_EQ(r.integer, -5);
}

}  // namespace
}  // namespace baton::proto
