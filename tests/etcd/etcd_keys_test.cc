// tests/etcd/etcd_keys_test.cc — etcd:// request keys (docs/stores/etcd.md,
// "Key layout"): a store reuses its keys, so a busy lock leaves no dead key
// per request in etcd's index; the owner token lives in the value; keys of
// an older baton (the token as the key) are still read and released.
#include <gtest/gtest.h>

#include <chrono>
#include <set>
#include <string>

#include "etcd_test_util.h"

namespace baton::testing {
namespace {

using namespace std::chrono_literals;
using store::etcd::decode;
using store::etcd::encode;
using store::etcd::Value;

// Writes `v` under `key` with no lease, as another client would.
void put_raw(const TestStore& s, const std::string& key, const Value& v) {
  store::etcd::pb::TxnRequest t;
  auto* put = t.add_success()->mutable_request_put();
  put->set_key(key);
  put->set_value(encode(v));
  auto r = s.etcd->conn().txn(t, cx());
  ASSERT_TRUE(r.ok()) << r.error().to_string();
}

TEST(EtcdKeys, TheOwnerLeadsTheLabelAndAnOlderValueStillDecodes) {
  Value v;
  v.held = true;
  v.label = "job 7";
  v.reentrancy_key = "rk";
  v.owner = OwnerToken::random().to_string();
  const std::string data = encode(v);
  auto d = decode(data);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->owner, v.owner);
  EXPECT_EQ(d->label, "job 7");
  EXPECT_EQ(d->reentrancy_key, "rk");
  EXPECT_FALSE(d->all);
  // The layout an older baton decodes: the `all` field is 2 (its
  // `all != 0`: an acquire_all, which only stops a handoff to it) and the
  // label length counts the token.
  EXPECT_NE(data.find(" 2 1 1 "), std::string::npos) << data;
  EXPECT_NE(data.find(" 37 2 " + v.owner + "job 7rk"), std::string::npos)
      << data;
  v.all = true;
  EXPECT_TRUE(decode(encode(v))->all);
  // A value without the owner (an older baton's) decodes with none.
  Value old;
  old.label = "old";
  auto o = decode(encode(old));
  ASSERT_TRUE(o);
  EXPECT_TRUE(o->owner.empty());
  EXPECT_EQ(o->label, "old");
  // A short label cannot hold an owner.
  EXPECT_FALSE(decode("b1 1 2 1 1 5 0 0 3 0 abc"));
}

// One store acquiring and releasing a lock again and again writes one key,
// not one per request; a second request at the same time gets another.
TEST(EtcdKeys, AStoreReusesItsKeySoABusyLockLeavesNoDeadKeys) {
  auto t = open_test_store(shared_cluster().url());
  const TestStore& s = t;
  const std::string name = unique_name("reuse");
  std::set<std::string> keys;
  for (int i = 0; i < 20; ++i) {
    AcquireSpec spec = spec_of(name, 30s);
    auto g = s.acquire(spec, 0ms);
    ASSERT_TRUE(g.ok()) << g.error().to_string();
    auto q = s.etcd->read_queue(name, cx());
    ASSERT_TRUE(q.ok());
    ASSERT_EQ(q->entries.size(), 1u);
    EXPECT_EQ(q->entries[0].token, spec.token);
    keys.insert(q->entries[0].key);
    auto r = s.release(name, spec.token);
    ASSERT_TRUE(r.ok() && r->was_held);
  }
  EXPECT_EQ(keys.size(), 1u);
  AcquireSpec a = spec_of(name, 30s), b = spec_of(name, 30s);
  a.capacity = b.capacity = 2;
  ASSERT_TRUE(s.acquire(a, 0ms).ok());
  ASSERT_TRUE(s.acquire(b, 0ms).ok());
  auto q = s.etcd->read_queue(name, cx());
  ASSERT_TRUE(q.ok());
  ASSERT_EQ(q->entries.size(), 2u);
  EXPECT_NE(q->entries[0].key, q->entries[1].key);
  EXPECT_TRUE(keys.count(q->entries[0].key) == 1);  // the reused one
  EXPECT_TRUE(s.release(name, a.token)->was_held);
  EXPECT_TRUE(s.release(name, b.token)->was_held);
}

// A holder written by an older baton (its key is its token, no owner in the
// value) is counted, read with its token and released by token from a
// store that did not write it.
TEST(EtcdKeys, AnOlderBatonsKeyIsReadAndReleasedByToken) {
  auto t = open_test_store(shared_cluster().url());
  const TestStore& s = t;
  const std::string name = unique_name("older");
  const OwnerToken old_token = OwnerToken::random();
  Value v;
  v.held = true;
  v.lease_s = 30;
  v.label = "older";
  put_raw(s, s.etcd->lock_dir(name) + old_token.to_string(), v);
  auto busy = s.acquire(spec_of(name, 30s), 0ms);
  ASSERT_FALSE(busy.ok());
  EXPECT_EQ(busy.error().code(), Errc::not_acquired);
  auto info = s.describe(name);
  ASSERT_TRUE(info.ok());
  ASSERT_EQ(info->holders.size(), 1u);
  EXPECT_EQ(info->holders[0].label, "older");
  auto q = s.etcd->read_queue(name, cx());
  ASSERT_TRUE(q.ok());
  ASSERT_EQ(q->entries.size(), 1u);
  EXPECT_EQ(q->entries[0].token, old_token);
  auto other = open_test_store(shared_cluster().url());
  auto r = other.release(name, old_token);
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_TRUE(r->was_held);
  EXPECT_TRUE(s.acquire(spec_of(name, 30s), 0ms).ok());
}

// A key this store freed may have been taken meanwhile (an older request's
// create applied late): the next request finds it taken and moves to a new
// key instead of retrying the same one forever.
TEST(EtcdKeys, AFreedKeyFoundTakenIsLeftForANewOne) {
  auto t = open_test_store(shared_cluster().url());
  const TestStore& s = t;
  const std::string name = unique_name("taken");
  AcquireSpec first = spec_of(name, 30s);
  ASSERT_TRUE(s.acquire(first, 0ms).ok());
  const std::string freed = *s.etcd->known_key(name, first.token);
  ASSERT_TRUE(s.release(name, first.token)->was_held);
  Value late;
  late.held = true;
  late.lease_s = 30;
  late.owner = OwnerToken::random().to_string();
  put_raw(s, freed, late);
  AcquireSpec next = spec_of(name, 30s);
  const auto t0 = std::chrono::steady_clock::now();
  auto g = s.acquire(next, 300ms);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.error().code(), Errc::timeout) << g.error().to_string();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
  auto q = s.etcd->read_queue(name, cx());
  ASSERT_TRUE(q.ok());
  ASSERT_EQ(q->entries.size(), 1u);  // the late key; the waiter withdrew
  EXPECT_EQ(q->entries[0].key, freed);
  auto other = open_test_store(shared_cluster().url());
  ASSERT_TRUE(other.release(name, *OwnerToken::parse(late.owner)).ok());
  auto g2 = s.acquire(spec_of(name, 30s), 0ms);
  EXPECT_TRUE(g2.ok()) << g2.error().to_string();
}

}  // namespace
}  // namespace baton::testing
