// tests/server/journal_test.cc — journal records, torn tails, restore.
#include "server/journal.h"

#include <gtest/gtest.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>

#include "journal_test_util.h"

namespace baton::server {
namespace {

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
  EXPECT_TRUE(scan_records(bytes, &st).empty());
  EXPECT_EQ(st.records, 5u);
  EXPECT_EQ(st.fencing_high_water, 12u);
  ASSERT_EQ(st.leases.size(), 1u);
  const auto& b = st.leases.begin()->second;
  EXPECT_EQ(b.name, "b");
  EXPECT_EQ(wall_expiry_ms(b.expiry), 6000);
  EXPECT_EQ(b.label, "host:1:test");
  ASSERT_EQ(b.aliases.size(), 1u);
  EXPECT_EQ(b.aliases[0], (OwnerToken{5, 6}));
  EXPECT_EQ(st.counters.at("c"), -7);
}

TEST(JournalRecords, TornOrCorruptTailIsReportedAtTheEnd) {
  std::string good = encode_lease_put(lease("a", 1, 5000));
  std::string next = encode_lease_put(lease("b", 2, 5000));
  for (std::size_t cut = 1; cut < next.size(); ++cut) {
    DurableState st;
    std::string bytes = good + next.substr(0, cut);
    auto damage = scan_records(bytes, &st);
    ASSERT_EQ(damage.size(), 1u) << cut;
    EXPECT_TRUE(damage[0].at_end);
    EXPECT_EQ(damage[0].offset, good.size());
    EXPECT_EQ(damage[0].bytes, cut);
    EXPECT_EQ(st.leases.size(), 1u);
  }
  std::string flipped = good + next;
  flipped[good.size() + 12] ^= 0x40;
  DurableState st;
  auto damage = scan_records(flipped, &st);
  ASSERT_EQ(damage.size(), 1u);
  EXPECT_TRUE(damage[0].at_end);
  EXPECT_NE(damage[0].what.find("CRC32C mismatch"), std::string::npos);
  EXPECT_EQ(st.leases.size(), 1u);
}

// One flipped byte anywhere in record 2 of 4 (header or payload): the scan
// reports the damage where record 2 starts, not at the end, and
// resynchronises on record 3 (the old replay stopped at record 2 and called
// it a torn tail, dropping records 3 and 4).
TEST(JournalRecords, MidFileDamageIsFoundAndResynchronised) {
  std::vector<std::string> recs;
  for (std::uint64_t f = 1; f <= 4; ++f) {
    recs.push_back(encode_lease_put(lease("l" + std::to_string(f), f, 5000)));
  }
  const std::string clean = recs[0] + recs[1] + recs[2] + recs[3];
  for (std::size_t i = 0; i < recs[1].size(); ++i) {
    std::string bytes = clean;
    bytes[recs[0].size() + i] ^= 0x10;
    DurableState st;
    auto damage = scan_records(bytes, &st);
    ASSERT_EQ(damage.size(), 1u) << "byte " << i;
    EXPECT_FALSE(damage[0].at_end) << "byte " << i;
    EXPECT_EQ(damage[0].offset, recs[0].size()) << "byte " << i;
    EXPECT_EQ(damage[0].bytes, recs[1].size()) << "byte " << i;
    // A flip in the length field makes the count unknown.
    EXPECT_EQ(damage[0].records, i < 4 ? 0u : 1u) << "byte " << i;
    EXPECT_EQ(st.records, 3u);
    EXPECT_EQ(st.leases.size(), 3u);
    EXPECT_EQ(st.fencing_high_water, 4u);
    EXPECT_EQ(st.leases.count({"l2", OwnerToken{2, 99}}), 0u);
  }
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}
void spit(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}
// Every file of a directory, name -> bytes.
std::map<std::string, std::string> contents(const std::string& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    out[e.path().filename().string()] = slurp(e.path().string());
  }
  return out;
}
struct Span {
  std::size_t offset = 0, size = 0;
  std::uint8_t type = 0;
};
// The framed records of clean bytes.
std::vector<Span> spans(const std::string& bytes) {
  std::vector<Span> out;
  for (std::size_t at = 0; at + 8 <= bytes.size();) {
    std::uint32_t len = 0;
    std::memcpy(&len, bytes.data() + at, 4);  // little endian (x86, arm)
    out.push_back({at, 8 + len, static_cast<std::uint8_t>(bytes[at + 8])});
    at += 8 + len;
  }
  return out;
}
std::vector<Span> lease_puts(const std::string& bytes) {
  std::vector<Span> out;
  for (const Span& s : spans(bytes)) {
    if (s.type == 1) out.push_back(s);
  }
  return out;
}

class JournalDir : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/baton-journal-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  JournalOptions options(bool repair = false, std::uint64_t block = 1024,
                         const std::string& dir = "") const {
    JournalOptions o{dir.empty() ? dir_ : dir, FsyncPolicy::always, 4.0,
                     1 << 20};
    o.repair = repair;
    o.fencing_block = block;
    return o;
  }
  // A grant of `name` with a 60 s lease: its fencing token.
  static std::uint64_t grant(core::LockTable& table, const std::string& name,
                             std::uint64_t owner) {
    core::AcquireRequest r;
    r.name = name;
    r.token = OwnerToken{owner, 7};
    r.ttl = std::chrono::seconds(60);
    auto g = table.acquire(r);
    EXPECT_TRUE(g && g->granted) << name;
    return g && g->granted ? g->grant.fencing_token : 0;
  }
  // The fencing token `name` is held with after reopening, 0 if not held.
  static std::uint64_t held(core::LockTable& table, const std::string& name) {
    auto info = table.describe(name);
    if (!info || info->holders.size() != 1) return 0;
    return info->holders[0].fencing_token;
  }
  // The reported case: four locks granted and acknowledged (journal: fence,
  // l1..l4), then the process dies. Returns their fencing tokens.
  std::vector<std::uint64_t> four_grants() {
    const baton::Clock& clock = *baton::Clock::steady();
    core::LockTable table(clock);
    auto j = Journal::open(options(), table, clock);
    EXPECT_TRUE(j);
    if (!j) return {};
    table.set_change_sink(j->get());
    std::vector<std::uint64_t> f;
    for (int i = 1; i <= 4; ++i) {
      f.push_back(grant(table, "l" + std::to_string(i), i));
    }
    EXPECT_TRUE((*j)->sync());
    table.set_change_sink(nullptr);
    return f;
  }
  std::string dir_;
};

TEST_F(JournalDir, LeasesCountersAndFencingSurviveReopen) {
  const baton::Clock& clock = *baton::Clock::steady();
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
  const baton::Clock& clock = *baton::Clock::steady();
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
  const baton::Clock& clock = *baton::Clock::steady();
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
  const baton::Clock& clock = *baton::Clock::steady();
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

// A fence record reserves a block of tokens ahead; it is appended with the
// grant that crosses the mark and made durable by the same fsync (no fsync
// of its own).
TEST_F(JournalDir, FenceRecordRidesOnTheGrantsSync) {
  const baton::Clock& clock = *baton::Clock::steady();
  core::LockTable table(clock);
  auto j = Journal::open(options(false, 4), table, clock);
  ASSERT_TRUE(j);
  Journal& journal = **j;
  table.set_change_sink(&journal);
  EXPECT_EQ(grant(table, "a", 1), 1u);
  EXPECT_EQ(journal.appended_seq(), 2u);  // fence 4, lease a
  auto p = std::make_shared<std::promise<SyncResult>>();
  auto f = p->get_future();
  ASSERT_TRUE(
      journal.start_sync([p](const SyncResult& r) { p->set_value(r); }));
  ASSERT_TRUE(journal.finish_sync(f.get()));
  EXPECT_EQ(journal.durable_seq(), 2u);
  EXPECT_EQ(journal.stats().syncs, 1u);
  for (int i = 2; i <= 4; ++i) grant(table, "n" + std::to_string(i), i);
  EXPECT_EQ(journal.appended_seq(), 5u);  // tokens 2..4 are reserved
  EXPECT_EQ(grant(table, "e", 5), 5u);
  EXPECT_EQ(journal.appended_seq(), 7u);  // fence 8, lease e
  ASSERT_TRUE(journal.sync());
  table.set_change_sink(nullptr);
  const auto records = spans(slurp(dir_ + "/journal"));
  ASSERT_EQ(records.size(), 7u);
  EXPECT_EQ(records[0].type, 4);
  EXPECT_EQ(records[5].type, 4);
}

// One flipped byte in record 2 of 4 is corruption, not a torn tail (valid
// records follow it): dropping records 2..4 would rewrite the files and
// reuse fencing token 2. open() refuses, names the file and the offset, and
// writes nothing.
TEST_F(JournalDir, MidFileCorruptionRefusesToStartAndTouchesNothing) {
  ASSERT_EQ(four_grants().size(), 4u);
  std::string bytes = slurp(dir_ + "/journal");
  auto leases = lease_puts(bytes);
  ASSERT_EQ(leases.size(), 4u);
  bytes[leases[1].offset + 20] ^= 0x01;
  spit(dir_ + "/journal", bytes);
  const auto before = contents(dir_);
  const baton::Clock& clock = *baton::Clock::steady();
  core::LockTable table(clock);
  auto j = Journal::open(options(), table, clock);
  ASSERT_FALSE(j);
  const std::string& msg = j.error().message();
  EXPECT_NE(msg.find(dir_ + "/journal"), std::string::npos) << msg;
  EXPECT_NE(msg.find("byte offset " + std::to_string(leases[1].offset) + ":"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("CRC32C mismatch"), std::string::npos) << msg;
  EXPECT_NE(msg.find("--repair"), std::string::npos) << msg;
  EXPECT_EQ(contents(dir_), before);
}

TEST_F(JournalDir, RepairKeepsCopiesRestoresValidRecordsAndRaisesTheFloor) {
  auto fencing = four_grants();
  ASSERT_EQ(fencing.size(), 4u);
  std::string bytes = slurp(dir_ + "/journal");
  auto leases = lease_puts(bytes);
  ASSERT_EQ(leases.size(), 4u);
  bytes[leases[1].offset + 20] ^= 0x01;
  spit(dir_ + "/journal", bytes);
  const std::string snapshot = slurp(dir_ + "/snapshot");
  {
    const baton::Clock& clock = *baton::Clock::steady();
    core::LockTable table(clock);
    auto j = Journal::open(options(true), table, clock);
    ASSERT_TRUE(j) << j.error().to_string();
    EXPECT_EQ((*j)->stats().repaired_stretches, 1u);
    EXPECT_EQ(held(table, "l1"), fencing[0]);
    EXPECT_EQ(held(table, "l2"), 0u);  // its only record is the broken one
    EXPECT_EQ(held(table, "l3"), fencing[2]);
    EXPECT_EQ(held(table, "l4"), fencing[3]);
    table.set_change_sink(j->get());
    EXPECT_GT(grant(table, "next", 9), fencing[3]);
    table.set_change_sink(nullptr);
  }
  int copies = 0;
  for (const auto& [name, data] : contents(dir_)) {
    if (name.rfind("journal.corrupt-", 0) == 0) {
      ++copies;
      EXPECT_EQ(data, bytes);
    } else if (name.rfind("snapshot.corrupt-", 0) == 0) {
      ++copies;
      EXPECT_EQ(data, snapshot);
    }
  }
  EXPECT_EQ(copies, 2);
  // The repaired files are clean: a plain start accepts them.
  const baton::Clock& clock = *baton::Clock::steady();
  core::LockTable table(clock);
  auto j = Journal::open(options(), table, clock);
  ASSERT_TRUE(j) << j.error().to_string();
  EXPECT_EQ(held(table, "l3"), fencing[2]);
  EXPECT_GT(held(table, "next"), fencing[3]);
}

// What a crash leaves (the last record cut short) is still ignored quietly.
TEST_F(JournalDir, TornTailStillRecoversSilently) {
  auto fencing = four_grants();
  ASSERT_EQ(fencing.size(), 4u);
  std::string bytes = slurp(dir_ + "/journal");
  auto leases = lease_puts(bytes);
  ASSERT_EQ(leases.size(), 4u);
  const std::size_t cut = leases[3].offset + leases[3].size / 2;
  spit(dir_ + "/journal", bytes.substr(0, cut));
  const baton::Clock& clock = *baton::Clock::steady();
  core::LockTable table(clock);
  auto j = Journal::open(options(), table, clock);
  ASSERT_TRUE(j) << j.error().to_string();
  EXPECT_TRUE((*j)->stats().torn_tail);
  EXPECT_EQ((*j)->stats().torn_tail_offset, leases[3].offset);
  EXPECT_EQ((*j)->stats().torn_tail_bytes, cut - leases[3].offset);
  EXPECT_EQ((*j)->stats().repaired_stretches, 0u);
  EXPECT_EQ(held(table, "l3"), fencing[2]);
  EXPECT_EQ(held(table, "l4"), 0u);
  EXPECT_GE(table.fencing_high_water(), fencing[3]);  // fence 1024 survived
  EXPECT_EQ(contents(dir_).size(), 2u);  // snapshot, journal: no copies
}

TEST_F(JournalDir, CorruptSnapshotRefusesToStartAndRepairs) {
  auto fencing = four_grants();
  ASSERT_EQ(fencing.size(), 4u);
  {
    // Reopening compacts: the four leases move into the snapshot.
    const baton::Clock& clock = *baton::Clock::steady();
    core::LockTable table(clock);
    ASSERT_TRUE(Journal::open(options(), table, clock));
  }
  const std::string clean = slurp(dir_ + "/snapshot");
  auto leases = lease_puts(clean);
  ASSERT_EQ(leases.size(), 4u);
  ASSERT_EQ(spans(clean).back().type, 4);  // the closing fence record
  // A flipped byte, and a cut at the end: a snapshot has no torn tail.
  std::string flipped = clean;
  flipped[leases[1].offset + 9] ^= 0x80;
  for (const std::string& bad : {flipped, clean.substr(0, clean.size() - 3)}) {
    spit(dir_ + "/snapshot", bad);
    const auto before = contents(dir_);
    const baton::Clock& clock = *baton::Clock::steady();
    core::LockTable table(clock);
    auto j = Journal::open(options(), table, clock);
    ASSERT_FALSE(j);
    const std::string& msg = j.error().message();
    EXPECT_NE(msg.find("snapshot " + dir_ +
                       "/snapshot is corrupt at byte "
                       "offset "),
              std::string::npos)
        << msg;
    EXPECT_EQ(contents(dir_), before);
  }
  spit(dir_ + "/snapshot", flipped);
  const baton::Clock& clock = *baton::Clock::steady();
  core::LockTable table(clock);
  auto j = Journal::open(options(true), table, clock);
  ASSERT_TRUE(j) << j.error().to_string();
  EXPECT_EQ(held(table, "l1"), fencing[0]);
  EXPECT_EQ(held(table, "l2"), 0u);
  EXPECT_EQ(held(table, "l4"), fencing[3]);
  EXPECT_GT(table.fencing_high_water(), fencing[3]);
  int copies = 0;
  for (const auto& [name, data] : contents(dir_)) {
    if (name.rfind("snapshot.corrupt-", 0) == 0) {
      ++copies;
      EXPECT_EQ(data, flipped);
    }
  }
  EXPECT_EQ(copies, 1);  // the journal was empty: nothing to copy
}

// The fencing guarantee: whichever single record of the snapshot or the
// journal is lost — cut out cleanly (undetectable) or zeroed (detected;
// repaired if it is not a torn tail) — the restored floor is at or above the
// highest token ever handed out, so no token is handed out twice. Two
// histories: the highest token released before the last compaction (only
// the snapshot's fence mark remembers it), and released after it (only
// journal records do).
TEST_F(JournalDir, LosingAnySingleRecordNeverLowersTheFencingFloor) {
  // ~60 repairs: their warnings would drown the test output.
  struct Quiet {
    Quiet() { spdlog::set_level(spdlog::level::err); }
    ~Quiet() { spdlog::set_level(spdlog::level::info); }
  } quiet;
  int cases = 0;
  for (bool after_compaction : {false, true}) {
    const std::string src = dir_ + "/src" + std::to_string(after_compaction);
    std::uint64_t highest = 0;
    {
      const baton::Clock& clock = *baton::Clock::steady();
      core::LockTable table(clock);
      auto j = Journal::open(options(false, 4, src), table, clock);
      ASSERT_TRUE(j);
      table.set_change_sink(j->get());
      for (std::uint64_t i = 1; i <= 6; ++i) {
        highest = grant(table, "a" + std::to_string(i), i);
      }
      ASSERT_TRUE(table.release("a6", OwnerToken{6, 7}));
      ASSERT_TRUE(table.counter_add("c", 3));
      table.set_change_sink(nullptr);
    }
    {
      // Reopen: compaction puts the state (and fence mark) in the snapshot.
      const baton::Clock& clock = *baton::Clock::steady();
      core::LockTable table(clock);
      auto j = Journal::open(options(false, 4, src), table, clock);
      ASSERT_TRUE(j);
      table.set_change_sink(j->get());
      if (after_compaction) {
        for (std::uint64_t i = 7; i <= 12; ++i) {
          highest = grant(table, "b" + std::to_string(i), i);
        }
        ASSERT_TRUE(
            table.extend("b8", OwnerToken{8, 7}, std::chrono::seconds(90)));
        ASSERT_TRUE(table.release("b12", OwnerToken{12, 7}));
      }
      table.set_change_sink(nullptr);
    }
    const std::string files[2] = {"snapshot", "journal"};
    std::string orig[2];
    for (int f = 0; f < 2; ++f) orig[f] = slurp(src + "/" + files[f]);
    for (int f = 0; f < 2; ++f) {
      const auto records = spans(orig[f]);
      for (std::size_t r = 0; r < records.size(); ++r) {
        for (bool zero : {false, true}) {
          const std::string at = files[f] + " record " + std::to_string(r) +
                                 (zero ? " zeroed" : " cut out") +
                                 (after_compaction ? ", after" : ", before");
          const std::string dir = dir_ + "/case" + std::to_string(cases++);
          std::filesystem::create_directory(dir);
          std::string bytes = orig[f];
          if (zero) {
            std::fill_n(bytes.begin() + records[r].offset, records[r].size,
                        '\0');
          } else {
            bytes.erase(records[r].offset, records[r].size);
          }
          spit(dir + "/" + files[f], bytes);
          spit(dir + "/" + files[1 - f], orig[1 - f]);
          const baton::Clock& clock = *baton::Clock::steady();
          core::LockTable table(clock);
          auto j = Journal::open(options(false, 4, dir), table, clock);
          if (!j) {
            EXPECT_TRUE(zero) << at << ": " << j.error().message();
            j = Journal::open(options(true, 4, dir), table, clock);
          }
          ASSERT_TRUE(j) << at << ": " << j.error().message();
          EXPECT_GE(table.fencing_high_water(), highest) << at;
          table.set_change_sink(j->get());
          EXPECT_GT(grant(table, "fresh", 99), highest) << at;
          table.set_change_sink(nullptr);
        }
      }
    }
  }
  EXPECT_GT(cases, 40);
}
}  // namespace
}  // namespace baton::server
