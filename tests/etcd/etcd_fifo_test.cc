// tests/etcd/etcd_fifo_test.cc — rule 8 on etcd:// when a request's round
// trips are slow: its place in the queue is its first arrival at the
// cluster, so a request that came later, waiting or trying, never gets
// ahead of it.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <optional>
#include <string>
#include <thread>

#include "baton/client.h"
#include "etcd_test_util.h"
#include "eventually.h"
#include "tcp_proxy.h"

namespace baton::testing {
namespace {

using namespace std::chrono_literals;
using std::chrono::steady_clock;

AcquireOptions labelled(std::string label) {
  AcquireOptions o;
  o.ttl = 30s;
  o.label = std::move(label);
  return o;
}

int waiters(const Client& c, const std::string& name) {
  auto info = c.describe(name);
  return info.ok() ? static_cast<int>(info->waiters.size()) : -1;
}

// A blocking request whose first transaction finds the lock taken is queued
// by that transaction. It used to be queued by a second one (after a
// LeaseGrant for the waiting key), and a try that came between the two,
// finding the lock just released, was granted ahead of it: the FIFO flags
// of the torture campaigns on etcd (docs/reliability.md). A proxy holds
// every message of the waiter's client 400 ms, each way: its first
// transaction reaches the cluster about 400 ms after the call, a second one
// could not before 2,000 ms. `shared`: the waiter is a shared request
// (rule 18) behind an exclusive holder.
void queued_by_its_first_transaction(bool shared) {
  EtcdCluster& cluster = shared_cluster();
  auto proxy = TcpProxy::start("127.0.0.1", cluster.client_port(0));
  ASSERT_TRUE(proxy.ok()) << proxy.error().to_string();
  auto slow = Client::open(
      "etcd://127.0.0.1:" + std::to_string((*proxy)->port()) + "/baton-test");
  ASSERT_TRUE(slow.ok()) << slow.error().to_string();
  auto direct = Client::open(cluster.url());
  ASSERT_TRUE(direct.ok()) << direct.error().to_string();
  const std::string name = unique_name("queued-at-first-look");
  // Before the delay: the slow client's connection and its shared lease
  // for 30 s leases, so that the call's first message is its transaction.
  auto warm = slow->try_acquire(unique_name("warm-up"), labelled("warm-up"));
  ASSERT_TRUE(warm.ok()) << warm.error().to_string();
  ASSERT_TRUE(slow->release(*warm).ok());
  auto held = direct->try_acquire(name, labelled("holder"));
  ASSERT_TRUE(held.ok()) << held.error().to_string();

  (*proxy)->set_delay(400ms);
  const auto t0 = steady_clock::now();
  auto waiting = std::async(std::launch::async, [&] {
    return shared ? slow->acquire_shared(name, 20s, labelled("waiter"))
                  : slow->acquire(name, 20s, labelled("waiter"));
  });
  const bool queued =
      eventually([&] { return waiters(*direct, name) == 1; }, 1600ms);
  EXPECT_TRUE(queued) << "not queued "
                      << std::chrono::duration_cast<std::chrono::milliseconds>(
                             steady_clock::now() - t0)
                             .count()
                      << " ms after the call: its first transaction only "
                         "looked at the queue";
  // The holder leaves; a try that comes now must not get ahead.
  ASSERT_TRUE(direct->release(*held).ok());
  auto late = direct->try_acquire(name, labelled("late try"));
  EXPECT_FALSE(late.ok()) << "a try made after the waiter was granted first";
  if (late.ok()) {
    EXPECT_TRUE(direct->release(*late).ok());
  } else {
    EXPECT_EQ(late.error().code(), Errc::not_acquired)
        << late.error().to_string();
  }
  auto got = waiting.get();
  ASSERT_TRUE(got.ok()) << got.error().to_string();
  EXPECT_GT(got->fencing_token, held->fencing_token);
  EXPECT_EQ(got->shared, shared);
  (*proxy)->set_delay(0ms);
  EXPECT_TRUE(slow->release(*got).ok());
  auto info = direct->describe(name);
  ASSERT_TRUE(info.ok()) << info.error().to_string();
  EXPECT_TRUE(info->holders.empty() && info->waiters.empty());
}

TEST(EtcdFifo, AWaiterIsQueuedByTheTransactionThatFoundTheLockTaken) {
  queued_by_its_first_transaction(false);
}

TEST(EtcdFifo, ASharedWaiterIsQueuedByTheTransactionThatFoundAWriter) {
  queued_by_its_first_transaction(true);
}

// The waiting key of `token` on lock `name`, as the cluster has it.
std::optional<store::etcd::Entry> waiting_key(const TestStore& t,
                                              const std::string& name,
                                              const OwnerToken& token) {
  auto q = t.etcd->read_queue(name, cx());
  if (!q.ok()) return std::nullopt;
  const int pos = q->index_of(token);
  if (pos < 0) return std::nullopt;
  return q->entries[static_cast<std::size_t>(pos)];
}

// A key queued by the fast path sits on the store's shared lease, which
// nobody keeps alive. When its renewal is due (a third of the TTL) it moves
// to a lease of its own, keeping its create revision (its place), and
// then outlives the shared lease: a wait longer than the TTL still ends in
// its grant.
TEST(EtcdFifo, AWaitingKeyMovesOffTheSharedLeaseAndKeepsItsPlace) {
  auto t = open_test_store(shared_cluster().url());
  const std::string name = unique_name("waiting-key-moves");
  auto holder = t.acquire(spec_of(name, 30s, "holder"), 0ms);
  ASSERT_TRUE(holder.ok()) << holder.error().to_string();
  const AcquireSpec spec = spec_of(name, 3s, "waiter");
  auto waiting =
      std::async(std::launch::async, [&] { return t.acquire(spec, 20s); });
  std::optional<store::etcd::Entry> first;
  ASSERT_TRUE(eventually([&] {
    first = waiting_key(t, name, spec.token);
    return first.has_value();
  }));
  EXPECT_TRUE(first->v.shared_lease) << "queued on a lease of its own";
  EXPECT_FALSE(first->v.held);
  // Its renewal is due 1 s after the shared lease's grant.
  std::optional<store::etcd::Entry> moved;
  EXPECT_TRUE(eventually(
      [&] {
        moved = waiting_key(t, name, spec.token);
        return moved && !moved->v.shared_lease;
      },
      3s))
      << "the waiting key never left the shared lease";
  ASSERT_TRUE(moved.has_value());
  EXPECT_EQ(moved->create_rev, first->create_rev) << "it lost its place";
  EXPECT_NE(moved->lease, first->lease);
  // Past the TTL: the shared lease is gone, the key is not.
  std::this_thread::sleep_for(3500ms);
  auto still = waiting_key(t, name, spec.token);
  ASSERT_TRUE(still.has_value()) << "the waiting key expired";
  EXPECT_EQ(still->create_rev, first->create_rev);
  ASSERT_TRUE(t.release(name, holder->token)->was_held);
  auto got = waiting.get();
  ASSERT_TRUE(got.ok()) << got.error().to_string();
  EXPECT_GT(got->fencing_token, holder->fencing_token);
  EXPECT_TRUE(t.release(name, spec.token)->was_held);
}

// A waiter granted while its key is still on the shared lease, after more
// than a quarter of its TTL: the grant moves the key to a lease of its own
// (keeping the shared lease alive would keep its other keys too), so the
// lease it answers runs its whole TTL from about now.
TEST(EtcdFifo, AWaiterGrantedOnTheSharedLeaseIsRenewedByAMove) {
  auto t = open_test_store(shared_cluster().url());
  const std::string name = unique_name("granted-on-shared");
  auto holder = t.acquire(spec_of(name, 30s, "holder"), 0ms);
  ASSERT_TRUE(holder.ok()) << holder.error().to_string();
  const AcquireSpec spec = spec_of(name, 12s, "waiter");
  const auto asked = std::chrono::steady_clock::now();
  auto waiting =
      std::async(std::launch::async, [&] { return t.acquire(spec, 20s); });
  ASSERT_TRUE(
      eventually([&] { return waiting_key(t, name, spec.token).has_value(); }));
  // Past a quarter of the TTL (3 s), before its move (4 s).
  std::this_thread::sleep_until(asked + 3500ms);
  auto before = waiting_key(t, name, spec.token);
  ASSERT_TRUE(before.has_value());
  ASSERT_TRUE(before->v.shared_lease) << "moved before its renewal was due";
  ASSERT_TRUE(t.release(name, holder->token)->was_held);
  auto got = waiting.get();
  const auto granted = std::chrono::steady_clock::now();
  ASSERT_TRUE(got.ok()) << got.error().to_string();
  auto held = waiting_key(t, name, spec.token);
  ASSERT_TRUE(held.has_value());
  EXPECT_TRUE(held->v.held);
  EXPECT_FALSE(held->v.shared_lease) << "granted on the shared lease";
  EXPECT_EQ(held->create_rev, before->create_rev);
  // The local deadline runs from the move's send, not from the shared
  // lease's grant 3.5 s earlier.
  EXPECT_GT(got->local_deadline, granted + 10s);
  EXPECT_TRUE(t.release(name, spec.token)->was_held);
}

}  // namespace
}  // namespace baton::testing
