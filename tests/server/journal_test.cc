// tests/server/journal_test.cc — journal records, torn tails, restore.
#include "server/journal.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <future>

namespace baton::server {
namespace {

core::LeaseRecord lease(std::string name, std::uint64_t fencing,
                        std::int64_t expiry_ms) {
  core::LeaseRecord r;
  r.name = std::move(name);
  r.token = OwnerToken{fencing, 99};
  r.fencing_token = fencing;
  r.ttl = std::chrono::seconds(30);
  r.expiry = core::Instant(expiry_ms);
  r.label = "host:1:test";
  r.aliases = {OwnerToken{5, 6}};
  return r;
}

TEST(Crc32c, KnownValue) {
  // RFC 3720 test vector: 32 bytes of zeros.
  std::string zeros(32, '\0');
  EXPECT_EQ(crc32c(zeros.data(), zeros.size()), 0x8A9136AAu);
  EXPECT_EQ(crc32c("123456789", 9), 0xE3069283u);
}

TEST(JournalRecords, RoundTrip) {
  std::string bytes =
      encode_fence(10) + encode_lease_put(lease("a", 11, 5000)) +
      encode_lease_put(lease("b", 12, 6000)) + encode_counter("c", -7) +
      encode_lease_del("a", OwnerToken{11, 99});
  DurableState st;
  EXPECT_EQ(replay_records(bytes, &st), bytes.size());
  EXPECT_FALSE(st.torn_tail);
  EXPECT_EQ(st.records, 5u);
  EXPECT_EQ(st.fencing_high_water, 12u);
  ASSERT_EQ(st.leases.size(), 1u);
  const auto& b = st.leases.begin()->second;
  EXPECT_EQ(b.name, "b");
  EXPECT_EQ(b.expiry.count(), 6000);
  EXPECT_EQ(b.label, "host:1:test");
  ASSERT_EQ(b.aliases.size(), 1u);
  EXPECT_EQ(b.aliases[0], (OwnerToken{5, 6}));
  EXPECT_EQ(st.counters.at("c"), -7);
}

TEST(JournalRecords, TornOrCorruptTailIsIgnored) {
  std::string good = encode_lease_put(lease("a", 1, 5000));
  std::string next = encode_lease_put(lease("b", 2, 5000));
  for (std::size_t cut = 1; cut < next.size(); ++cut) {
    DurableState st;
    std::string bytes = good + next.substr(0, cut);
    EXPECT_EQ(replay_records(bytes, &st), good.size());
    EXPECT_TRUE(st.torn_tail);
    EXPECT_EQ(st.leases.size(), 1u);
  }
  std::string flipped = good + next;
  flipped[good.size() + 12] ^= 0x40;
  DurableState st;
  EXPECT_EQ(replay_records(flipped, &st), good.size());
  EXPECT_EQ(st.leases.size(), 1u);
}

class JournalDir : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/baton-journal-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

TEST_F(JournalDir, LeasesCountersAndFencingSurviveReopen) {
  core::SteadyClock clock;
  OwnerToken t{1, 2};
  std::uint64_t fencing = 0;
  {
    core::LockTable table(clock);
    auto j =
        Journal::open({dir_, FsyncPolicy::always, 4.0, 1 << 20}, table, clock);
    ASSERT_TRUE(j) << j.error().to_string();
    table.set_change_sink(j->get());
    core::AcquireRequest r;
    r.name = "x";
    r.token = t;
    r.ttl = std::chrono::seconds(60);
    auto g = table.acquire(r);
    ASSERT_TRUE(g && g->granted);
    fencing = g->grant.fencing_token;
    ASSERT_TRUE(table.counter_add("n", 5));
    ASSERT_TRUE((*j)->sync());
    table.set_change_sink(nullptr);
    // Append garbage: a torn record.
    std::ofstream(dir_ + "/journal", std::ios::app) << "\x30\x00\x00";
  }
  core::LockTable table(clock);
  auto j =
      Journal::open({dir_, FsyncPolicy::always, 4.0, 1 << 20}, table, clock);
  ASSERT_TRUE(j);
  EXPECT_TRUE((*j)->stats().torn_tail);
  auto info = table.describe("x");
  ASSERT_TRUE(info);
  ASSERT_EQ(info->holders.size(), 1u);
  EXPECT_EQ(info->holders[0].fencing_token, fencing);
  EXPECT_GT(info->holders[0].time_left, std::chrono::seconds(55));
  EXPECT_EQ(*table.counter_get("n"), 5);
  EXPECT_GE(table.fencing_high_water(), fencing);
  // Extending with the same token still works: it is the same lease.
  EXPECT_TRUE(table.extend("x", t, std::chrono::seconds(10)));
}

TEST_F(JournalDir, CompactionKeepsState) {
  core::SteadyClock clock;
  core::LockTable table(clock);
  auto j = Journal::open({dir_, FsyncPolicy::never, 1.0, 1}, table, clock);
  ASSERT_TRUE(j);
  table.set_change_sink(j->get());
  for (int i = 0; i < 50; ++i) {
    ASSERT_TRUE(table.counter_add("c", 1));
    ASSERT_TRUE((*j)->sync());
    ASSERT_TRUE((*j)->maybe_compact(table));
  }
  EXPECT_GT((*j)->stats().compactions, 1u);
  table.set_change_sink(nullptr);
  core::LockTable again(clock);
  auto j2 = Journal::open({dir_, FsyncPolicy::never, 1.0, 1}, again, clock);
  ASSERT_TRUE(j2);
  EXPECT_EQ(*again.counter_get("c"), 50);
}

// The group-commit path: the fdatasync runs on the sync thread, the result is
// applied by finish_sync() on the calling thread; records appended while it
// is in flight are not covered by it.
TEST_F(JournalDir, StartSyncRunsOnTheSyncThread) {
  core::SteadyClock clock;
  core::LockTable table(clock);
  auto j = Journal::open({dir_, FsyncPolicy::batch, 1.0, 1}, table, clock);
  ASSERT_TRUE(j);
  Journal& journal = **j;
  table.set_change_sink(&journal);
  ASSERT_TRUE(table.counter_add("c", 1));
  EXPECT_EQ(journal.appended_seq(), 1u);
  EXPECT_EQ(journal.durable_seq(), 0u);

  // The callback runs on the sync thread: it owns what it touches.
  struct Seen {
    std::promise<SyncResult> result;
    std::thread::id thread;
  };
  auto seen = std::make_shared<Seen>();
  auto done = seen->result.get_future();
  ASSERT_TRUE(journal.start_sync([seen](const SyncResult& r) {
    seen->thread = std::this_thread::get_id();
    seen->result.set_value(r);
  }));
  EXPECT_TRUE(journal.sync_in_flight());
  EXPECT_EQ(journal.written_seq(), 1u);
  // In flight: no second sync, no compaction (the fd is in use).
  EXPECT_FALSE(journal.start_sync([](const SyncResult&) {}));
  ASSERT_TRUE(table.counter_add("c", 1));  // rides on the next sync
  ASSERT_TRUE(journal.maybe_compact(table));
  EXPECT_EQ(journal.stats().compactions, 1u);  // the one of open()

  SyncResult r = done.get();
  EXPECT_NE(seen->thread, std::this_thread::get_id());
  EXPECT_EQ(r.seq, 1u);
  EXPECT_EQ(r.error, 0);
  ASSERT_TRUE(journal.finish_sync(r));
  EXPECT_FALSE(journal.sync_in_flight());
  EXPECT_EQ(journal.durable_seq(), 1u);
  EXPECT_EQ(journal.appended_seq(), 2u);

  auto second = std::make_shared<std::promise<SyncResult>>();
  auto second_done = second->get_future();
  ASSERT_TRUE(journal.start_sync(
      [second](const SyncResult& res) { second->set_value(res); }));
  ASSERT_TRUE(journal.finish_sync(second_done.get()));
  EXPECT_EQ(journal.durable_seq(), 2u);
  EXPECT_EQ(journal.stats().syncs, 2u);
  // Nothing new: nothing to start.
  EXPECT_FALSE(journal.start_sync([](const SyncResult&) {}));
  table.set_change_sink(nullptr);
  core::LockTable again(clock);
  auto j2 =
      Journal::open({dir_, FsyncPolicy::batch, 4.0, 1 << 20}, again, clock);
  ASSERT_TRUE(j2);
  EXPECT_EQ(*again.counter_get("c"), 2);
}

// A synchronous sync() (shutdown) while the sync thread is busy waits for it
// and goes further; the late result does not move durable_seq back.
TEST_F(JournalDir, SyncWhileInFlightAndLateResult) {
  core::SteadyClock clock;
  core::LockTable table(clock);
  auto j =
      Journal::open({dir_, FsyncPolicy::always, 4.0, 1 << 20}, table, clock);
  ASSERT_TRUE(j);
  Journal& journal = **j;
  table.set_change_sink(&journal);
  for (int round = 0; round < 20; ++round) {
    ASSERT_TRUE(table.counter_add("c", 1));
    auto p = std::make_shared<std::promise<SyncResult>>();
    auto f = p->get_future();
    ASSERT_TRUE(
        journal.start_sync([p](const SyncResult& r) { p->set_value(r); }));
    ASSERT_TRUE(table.counter_add("c", 1));
    ASSERT_TRUE(journal.sync());
    EXPECT_EQ(journal.durable_seq(), journal.appended_seq());
    ASSERT_TRUE(journal.finish_sync(f.get()));
    EXPECT_EQ(journal.durable_seq(), journal.appended_seq());
  }
  // Compaction now allowed again, and a failed fsync fails the journal.
  ASSERT_TRUE(table.counter_add("c", 1));
  ASSERT_TRUE(journal.start_sync([](const SyncResult&) {}));
  SyncResult bad;
  bad.seq = journal.written_seq();
  bad.error = EIO;
  EXPECT_FALSE(journal.finish_sync(bad));
  EXPECT_TRUE(journal.failed());
  EXPECT_NE(journal.failure().find("fsync"), std::string::npos);
  EXPECT_LT(journal.durable_seq(), journal.appended_seq());
  table.set_change_sink(nullptr);
}

}  // namespace
}  // namespace baton::server
