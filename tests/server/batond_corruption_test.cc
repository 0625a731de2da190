// tests/server/batond_corruption_test.cc — a real batond on a damaged data
// dir: a corrupt journal or snapshot stops it with the file and
// offset named and the files untouched; --repair (or `repair: true`) starts
// it from what is still valid, keeps copies and never reuses a fencing
// token; a torn tail is still ignored quietly.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

#include "baton/client.h"
#include "batond_process.h"

namespace baton {
namespace {

using baton::testing::BatondProcess;
using namespace std::chrono_literals;

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}
void spit(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}
std::map<std::string, std::string> contents(const std::string& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    out[e.path().filename().string()] = slurp(e.path().string());
  }
  return out;
}
// The files of `dir` whose names start with `prefix`.
std::vector<std::string> named(const std::string& dir,
                               const std::string& prefix) {
  std::vector<std::string> out;
  for (const auto& [name, data] : contents(dir)) {
    if (name.rfind(prefix, 0) == 0) out.push_back(name);
  }
  return out;
}

struct Span {
  std::size_t offset = 0, size = 0;
};
// The lease records (type 1) of a clean journal or snapshot: frames are
// u32 length, u32 CRC32C, payload (docs/server.md, "Durability").
std::vector<Span> lease_records(const std::string& bytes) {
  std::vector<Span> out;
  for (std::size_t at = 0; at + 8 < bytes.size();) {
    std::uint32_t len = 0;
    std::memcpy(&len, bytes.data() + at, 4);  // little endian
    if (bytes[at + 8] == 1) out.push_back({at, 8 + len});
    at += 8 + len;
  }
  return out;
}

// The reported case: four locks granted and acknowledged.
std::vector<std::uint64_t> grant_four(const BatondProcess& server) {
  std::vector<std::uint64_t> fencing;
  auto client = Client::open(server.url());
  EXPECT_TRUE(client) << client.error().to_string();
  if (!client) return fencing;
  AcquireOptions opt;
  opt.ttl = 60s;
  for (int i = 1; i <= 4; ++i) {
    auto lease = client->try_acquire("l" + std::to_string(i), opt);
    EXPECT_TRUE(lease) << lease.error().to_string();
    if (lease) fencing.push_back(lease->fencing_token);
  }
  return fencing;
}

// The fencing token `name` is held with, 0 if it is free.
std::uint64_t held(const Client& client, const std::string& name) {
  auto info = client.describe(name);
  EXPECT_TRUE(info) << info.error().to_string();
  if (!info || info->holders.size() != 1) return 0;
  return info->holders[0].fencing_token;
}

std::uint64_t next_token(const Client& client, const std::string& name) {
  AcquireOptions opt;
  opt.ttl = 60s;
  auto lease = client.try_acquire(name, opt);
  EXPECT_TRUE(lease) << lease.error().to_string();
  return lease ? lease->fencing_token : 0;
}

bool exited_with_error(int status) {
  return WIFEXITED(status) && WEXITSTATUS(status) != 0;
}

// Grants four leases, kills batond and flips one byte in the second lease
// record of `file` ("journal" or "snapshot"). Returns the fencing tokens and
// the damaged record's offset; *damaged = the file's new bytes.
std::vector<std::uint64_t> four_then_flip(BatondProcess& server,
                                          const std::string& file,
                                          std::size_t* offset,
                                          std::string* damaged) {
  auto fencing = grant_four(server);
  if (file == "snapshot") {
    server.stop();
    server.start();  // a start compacts: the leases move to the snapshot
  }
  server.kill9();
  const std::string path = server.dir() + "/data/" + file;
  std::string bytes = slurp(path);
  auto leases = lease_records(bytes);
  EXPECT_EQ(leases.size(), 4u) << file;
  if (leases.size() != 4) return {};
  *offset = leases[1].offset;
  bytes[leases[1].offset + 13] ^= 0x04;  // the lock name: "l2" -> "h2"
  spit(path, bytes);
  *damaged = bytes;
  return fencing;
}

TEST(BatondCorruption, FlippedByteMidJournalRefusesToStartAndTouchesNothing) {
  BatondProcess server;
  std::size_t offset = 0;
  std::string damaged;
  auto fencing = four_then_flip(server, "journal", &offset, &damaged);
  ASSERT_EQ(fencing.size(), 4u);
  const std::string data = server.dir() + "/data";
  const auto before = contents(data);
  EXPECT_FALSE(server.try_start());
  EXPECT_TRUE(exited_with_error(server.exit_status())) << server.exit_status();
  const std::string log = server.startup_output();
  EXPECT_NE(log.find("refusing to start"), std::string::npos) << log;
  EXPECT_NE(log.find(data + "/journal is corrupt at byte offset " +
                     std::to_string(offset) + ": CRC32C mismatch"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("--repair"), std::string::npos) << log;
  EXPECT_EQ(contents(data), before);  // byte for byte, no new file
}

TEST(BatondCorruption, RepairRestoresTrustedLeasesAndNeverReusesAToken) {
  BatondProcess server;
  std::size_t offset = 0;
  std::string damaged;
  auto fencing = four_then_flip(server, "journal", &offset, &damaged);
  ASSERT_EQ(fencing.size(), 4u);
  const std::string data = server.dir() + "/data";
  EXPECT_FALSE(server.try_start());
  server.set_extra({"--repair"});
  ASSERT_TRUE(server.try_start()) << server.startup_output();
  const std::string repair_output = server.startup_output();
  {
    auto client = Client::open(server.url());
    ASSERT_TRUE(client);
    EXPECT_EQ(held(*client, "l1"), fencing[0]);
    EXPECT_EQ(held(*client, "l2"), 0u);  // its record is the damaged one
    EXPECT_EQ(held(*client, "l3"), fencing[2]);  // after it: resynchronised
    EXPECT_EQ(held(*client, "l4"), fencing[3]);
    // Before: the next grant got fencing[1] again.
    EXPECT_GT(next_token(*client, "next"), fencing[3]);
    EXPECT_GT(next_token(*client, "l2"), fencing[3]);
  }
  auto copies = named(data, "journal.corrupt-");
  ASSERT_EQ(copies.size(), 1u);
  EXPECT_EQ(slurp(data + "/" + copies[0]), damaged);
  EXPECT_EQ(named(data, "snapshot.corrupt-").size(), 1u);
  const std::string log = repair_output;
  EXPECT_NE(log.find("warning batond: repair: journal " + data +
                     "/journal: dropped byte offset " + std::to_string(offset)),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("(1 record lost)"), std::string::npos) << log;
  // The repaired files are clean: a plain restart accepts them.
  server.stop();
  server.set_extra({});
  ASSERT_TRUE(server.try_start()) << server.startup_output();
  auto client = Client::open(server.url());
  ASSERT_TRUE(client);
  EXPECT_EQ(held(*client, "l4"), fencing[3]);
}

TEST(BatondCorruption, RepairKeyInTheConfigFile) {
  BatondProcess server;
  std::size_t offset = 0;
  std::string damaged;
  auto fencing = four_then_flip(server, "journal", &offset, &damaged);
  ASSERT_EQ(fencing.size(), 4u);
  const std::string config = server.dir() + "/batond.yaml";
  spit(config, "repair: true\n");
  server.set_extra({"--config", config});
  ASSERT_TRUE(server.try_start()) << server.startup_output();
  auto client = Client::open(server.url());
  ASSERT_TRUE(client);
  EXPECT_EQ(held(*client, "l3"), fencing[2]);
  EXPECT_GT(next_token(*client, "next"), fencing[3]);
}

// A crash in the middle of a write (the last record cut short) is normal:
// it is ignored without a warning, as before.
TEST(BatondCorruption, TornJournalTailStillRecoversSilently) {
  BatondProcess server;
  auto fencing = grant_four(server);
  ASSERT_EQ(fencing.size(), 4u);
  server.kill9();
  const std::string path = server.dir() + "/data/journal";
  const std::string bytes = slurp(path);
  auto leases = lease_records(bytes);
  ASSERT_EQ(leases.size(), 4u);
  spit(path, bytes.substr(0, leases[3].offset + leases[3].size - 7));
  ASSERT_TRUE(server.try_start()) << server.startup_output();
  auto client = Client::open(server.url());
  ASSERT_TRUE(client);
  EXPECT_EQ(held(*client, "l3"), fencing[2]);
  EXPECT_EQ(held(*client, "l4"), 0u);
  EXPECT_GT(next_token(*client, "next"), fencing[3]);
  EXPECT_TRUE(named(server.dir() + "/data", "journal.corrupt-").empty());
  // --log-level warn: not a line before "batond ready".
  EXPECT_EQ(server.startup_output(), "");
}

TEST(BatondCorruption, CorruptSnapshotRefusesToStartAndRepairs) {
  BatondProcess server;
  std::size_t offset = 0;
  std::string damaged;
  auto fencing = four_then_flip(server, "snapshot", &offset, &damaged);
  ASSERT_EQ(fencing.size(), 4u);
  const std::string data = server.dir() + "/data";
  const auto before = contents(data);
  EXPECT_FALSE(server.try_start());
  EXPECT_TRUE(exited_with_error(server.exit_status())) << server.exit_status();
  const std::string log = server.startup_output();
  EXPECT_NE(log.find(data + "/snapshot is corrupt at byte offset " +
                     std::to_string(offset) + ":"),
            std::string::npos)
      << log;
  EXPECT_EQ(contents(data), before);
  server.set_extra({"--repair"});
  ASSERT_TRUE(server.try_start()) << server.startup_output();
  auto client = Client::open(server.url());
  ASSERT_TRUE(client);
  EXPECT_EQ(held(*client, "l1"), fencing[0]);
  EXPECT_EQ(held(*client, "l2"), 0u);
  EXPECT_EQ(held(*client, "l3"), fencing[2]);
  EXPECT_GT(next_token(*client, "next"), fencing[3]);
  auto copies = named(data, "snapshot.corrupt-");
  ASSERT_EQ(copies.size(), 1u);
  EXPECT_EQ(slurp(data + "/" + copies[0]), damaged);
}

}  // namespace
}  // namespace baton
