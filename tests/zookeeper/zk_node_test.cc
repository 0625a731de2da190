// tests/zookeeper/zk_node_test.cc — the zookeeper:// store's node names and
// data (pure functions; no server).
#include "stores/zookeeper/zk_node.h"

#include <gtest/gtest.h>

#include <string>

namespace baton::store::zk {
namespace {

TEST(ZkNode, EscapeMakesEveryNameOnePathComponent) {
  EXPECT_EQ(escape("jobs-1_a"), "jobs-1_a");
  EXPECT_EQ(escape("a/b"), "a%2Fb");
  EXPECT_EQ(escape("."), "%2E");
  EXPECT_EQ(escape(".."), "%2E%2E");
  EXPECT_EQ(escape("100%"), "100%25");
  const std::string all_bytes = [] {
    std::string s;
    for (int c = 1; c < 256; ++c) s.push_back(static_cast<char>(c));
    return s;
  }();
  const std::string e = escape(all_bytes);
  EXPECT_EQ(e.find('/'), std::string::npos);
  EXPECT_EQ(unescape(e), all_bytes);
  EXPECT_EQ(unescape("a%2Fb"), "a/b");
}

TEST(ZkNode, UnescapeRefusesWhatEscapeNeverMakes) {
  EXPECT_FALSE(unescape("a/b"));
  EXPECT_FALSE(unescape("a%2"));
  EXPECT_FALSE(unescape("a%zz"));
  EXPECT_FALSE(unescape("a%2f"));  // lower-case hex is not ours
  EXPECT_FALSE(unescape(""));
  EXPECT_FALSE(unescape("a.b"));
}

TEST(ZkNode, NodeNamesRoundTrip) {
  const OwnerToken t{0x0123456789abcdefULL, 0xfedcba9876543210ULL};
  const std::string prefix = node_prefix(t, 3, Kind::kAll);
  EXPECT_EQ(prefix, "q-0123456789abcdeffedcba9876543210-3-a-");
  auto n = parse_node_name(prefix + "0000000042");
  ASSERT_TRUE(n);
  EXPECT_EQ(n->token, t);
  EXPECT_EQ(n->capacity, 3u);
  EXPECT_EQ(n->kind, Kind::kAll);
  EXPECT_FALSE(n->shared());
  EXPECT_EQ(n->seq, 42);
  // Rule 18: a shared request is kind r; every other kind is exclusive.
  auto r = parse_node_name(node_prefix(t, 1, Kind::kShared) + "0000000043");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->child, "q-0123456789abcdeffedcba9876543210-1-r-0000000043");
  EXPECT_TRUE(r->shared());
  EXPECT_EQ(r->seq, 43);
  for (Kind k : {Kind::kSingle, Kind::kSome}) {
    auto e = parse_node_name(node_prefix(t, 1, k) + "0000000044");
    ASSERT_TRUE(e);
    EXPECT_FALSE(e->shared());
  }
  EXPECT_FALSE(parse_node_name("lock-0000000001"));
  EXPECT_FALSE(parse_node_name(prefix));  // no sequence
  EXPECT_FALSE(parse_node_name(node_prefix(t, 3, Kind::kAll) + "x"));
  std::string zero_cap = "q-0123456789abcdeffedcba9876543210-0-b-0000000001";
  EXPECT_FALSE(parse_node_name(zero_cap));
  std::string bad_kind = "q-0123456789abcdeffedcba9876543210-1-x-0000000001";
  EXPECT_FALSE(parse_node_name(bad_kind));
}

TEST(ZkNode, DataRoundTripsWithLabelsOfAnyBytes) {
  NodeData d;
  d.state = State::kQueued;
  d.ttl_ms = 30000;
  d.holds = 2;
  d.fencing = 0x100000002ULL;
  d.reentrancy_key = "key with\nnewline=and equals";
  d.aliases = {OwnerToken{1, 2}, OwnerToken{3, 4}};
  d.label = "host:1:prog\nst=h\nttl=1";  // must stay a label
  auto back = decode(encode(d));
  ASSERT_TRUE(back);
  EXPECT_EQ(back->state, State::kQueued);
  EXPECT_EQ(back->ttl_ms, 30000);
  EXPECT_EQ(back->holds, 2u);
  EXPECT_EQ(back->fencing, 0x100000002ULL);
  EXPECT_EQ(back->reentrancy_key, d.reentrancy_key);
  EXPECT_EQ(back->aliases, d.aliases);
  EXPECT_EQ(back->label, d.label);
}

TEST(ZkNode, DecodeRefusesDataWithoutAState) {
  EXPECT_FALSE(decode(""));
  EXPECT_FALSE(decode("ttl=5\nlabel=x"));
  EXPECT_FALSE(decode("st=q\nlabel=x"));
  EXPECT_FALSE(decode("st=h\nttl=abc\nlabel=x"));
  auto minimal = decode("st=w\nlabel=");
  ASSERT_TRUE(minimal);
  EXPECT_EQ(minimal->state, State::kWaiting);
  EXPECT_EQ(minimal->fencing, 0u);
}

}  // namespace
}  // namespace baton::store::zk
