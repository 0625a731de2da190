// server/journal.h — batond's durable state: a checksummed append-only
// journal plus a snapshot, fed by core::ChangeSink (see docs/server.md,
// "Durability").
//
// Files in the data directory:
//   snapshot  the fencing reservation, every live lease, every counter and
//             the fencing reservation again; written to snapshot.tmp,
//             fsynced and renamed over `snapshot`.
//   journal   records appended after the snapshot.
// Record framing (both files): u32 payload length, u32 CRC32C of the
// payload, payload (u8 type + fields, little endian).
// Reading back: a record that is not valid (short, bad CRC, malformed) is a
// torn tail if no valid record follows it in the journal (normal after a
// crash, ignored); otherwise, and anywhere in the snapshot, it is corruption
// and open() refuses to start, touching no file, unless options.repair.
// Fencing: before a lease record carries a token above the reserved mark,
// a fence record reserving the next `fencing_block` tokens is appended (it
// rides on the same group commit), so every issued token is covered by two
// records; the restart floor is the highest mark or token read.
// Lease expiries are stored as Unix wall-clock milliseconds and converted
// to/from the table's steady clock, so leases come back with their remaining
// time after a restart.
//
// Thread safety: every member function is for one thread (the server's io
// thread). The only other thread is the Journal's own sync thread, which runs
// fdatasync for start_sync() and touches nothing but the job it was handed
// (fd and sequence, under mu_); its completion callback is invoked on the
// sync thread and must hand the result back (the server asio::posts it).
#ifndef BATON_SERVER_JOURNAL_H_
#define BATON_SERVER_JOURNAL_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "baton/clock.h"
#include "baton/error.h"
#include "core/lock_table.h"

namespace baton::server {

enum class FsyncPolicy { always, batch, never };

struct JournalOptions {
  std::string dir;
  FsyncPolicy fsync = FsyncPolicy::batch;
  // Rewrite the snapshot when the journal exceeds compact_factor x the
  // snapshot size and compact_min_bytes.
  double compact_factor = 4.0;
  std::size_t compact_min_bytes = 1 << 20;
  // Start even if a file is corrupt: keep copies of both files as
  // <file>.corrupt-<UTC time>, restore every record that is still valid
  // (resynchronising after each damaged stretch), log what was dropped, and
  // raise the fencing floor one block per damaged stretch past the highest
  // mark or token read. Without it a corrupt file makes open() fail.
  bool repair = false;
  // Fencing tokens reserved per fence record (>= 1). Every restart starts
  // above the reserved mark, so tokens may jump by up to this much.
  std::uint64_t fencing_block = 1024;
};

// A stretch of a file that did not read as valid records.
struct Damage {
  std::uint64_t offset = 0;  // where the first invalid record starts
  std::uint64_t bytes = 0;   // skipped, up to the next valid record or the end
  std::string what;          // why the record at `offset` is not valid
  // Records lost: 1 when the damaged record's own length led exactly to the
  // next valid record; 0 when unknown (at least one).
  std::size_t records = 0;
  bool at_end = false;  // no valid record follows (a torn tail, in a journal)
};

// The durable facts read back from disk (wall-clock expiries).
struct DurableState {
  std::map<std::pair<std::string, OwnerToken>, core::LeaseRecord> leases;
  std::map<std::string, std::int64_t> counters;
  // The highest fence mark or lease fencing token read.
  std::uint64_t fencing_high_water = 0;
  std::size_t records = 0;  // valid records read
};

// CRC32C (Castagnoli).
std::uint32_t crc32c(const void* data, std::size_t size);

// In records and in DurableState, a LeaseRecord's `expiry` is a Unix
// wall-clock time: that many milliseconds after the Instant epoch.
inline core::Instant wall_expiry(std::int64_t unix_ms) {
  return core::Instant(std::chrono::milliseconds(unix_ms));
}
inline std::int64_t wall_expiry_ms(core::Instant expiry) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             expiry.time_since_epoch())
      .count();
}

// Record codec (exposed for tests).
std::string encode_lease_put(const core::LeaseRecord& lease_wall_ms);
std::string encode_lease_del(std::string_view name, const OwnerToken& token);
std::string encode_counter(std::string_view name, std::int64_t value);
// "No fencing token above `mark` was handed out before the next fence
// record": the reservation record (also the snapshot's high water).
std::string encode_fence(std::uint64_t mark);
// Applies every valid record of `bytes` to `state`, in order. At a record
// that is not valid it resynchronises: searches forward, byte by byte, for
// the next offset where a whole record with a valid CRC and a well-formed
// payload starts, and goes on from there. Returns the damaged stretches in
// file order (empty: the bytes are clean).
std::vector<Damage> scan_records(std::string_view bytes, DurableState* state);
// "offset 120: CRC32C mismatch ...; 2 valid records follow" (for messages).
std::string describe_damage(const Damage& damage);

// What one fdatasync of the sync thread achieved.
struct SyncResult {
  std::uint64_t seq = 0;  // every record up to seq was written before it
  int error = 0;          // errno of a failed fdatasync, 0 if it succeeded
  std::chrono::microseconds took{0};
};

class Journal final : public core::ChangeSink {
 public:
  // Reads the directory (creating it), restores `table` from it, and writes
  // a fresh snapshot so the journal starts empty.
  static Result<std::unique_ptr<Journal>> open(JournalOptions options,
                                               core::LockTable& table,
                                               const Clock& clock);
  ~Journal() override;

  void lease_put(const core::LeaseRecord& lease) override;
  void lease_removed(std::string_view name, const OwnerToken& token) override;
  void counter_put(std::string_view name, std::int64_t value) override;

  FsyncPolicy policy() const { return options_.fsync; }
  std::uint64_t appended_seq() const { return appended_; }
  std::uint64_t durable_seq() const { return durable_; }
  bool failed() const { return failed_; }
  const std::string& failure() const { return failure_; }

  // Every record written to the file (write(2)) so far.
  std::uint64_t written_seq() const { return written_; }
  bool sync_in_flight() const { return in_flight_; }

  // write(2)s the buffered records (no fsync). With policy never they are
  // then durable as far as this policy goes. On failure the journal is
  // failed for good (restart to recover), as for every call below.
  Status write();
  // Group commit: writes the buffer, then has the sync thread fdatasync the
  // file; `done` is called on the sync thread when it returns and must pass
  // the result to finish_sync() on this thread. Returns false (and starts
  // nothing) if a sync is in flight, the journal failed, or everything
  // written is durable already. An fsync covers what was written before it
  // started: records appended meanwhile ride on the next one.
  bool start_sync(std::function<void(const SyncResult&)> done);
  // Applies a result of start_sync(): durable_seq() = result.seq, or fails
  // the journal.
  Status finish_sync(const SyncResult& result);
  // Synchronous: writes the buffer and fsyncs on the calling thread (unless
  // policy never), after waiting for a sync in flight to return. For
  // shutdown and tests.
  Status sync();
  // Rewrites the snapshot if the journal grew too big. Never while a sync is
  // in flight (the sync thread may be using the file descriptor).
  Status maybe_compact(const core::LockTable& table);

  struct Stats {
    std::uint64_t syncs = 0, records = 0, compactions = 0;
    std::uint64_t bytes = 0;  // current journal size
    std::uint64_t snapshot_bytes = 0;
    std::chrono::microseconds last_sync{0}, max_sync{0}, total_sync{0};
    std::size_t restored_leases = 0, restored_counters = 0;
    bool torn_tail = false;  // a torn journal tail was ignored at open()
    std::uint64_t torn_tail_offset = 0, torn_tail_bytes = 0;
    std::size_t repaired_stretches = 0;  // damage dropped by repair at open()
  };
  const Stats& stats() const { return stats_; }

 private:
  Journal(JournalOptions options, const Clock& clock);
  Status compact(const core::LockTable& table);
  // Puts what was read into `table` (newest lease first). With
  // `last_write_ms` (repair) no lease ends before last_write_ms + its ttl.
  void restore(const DurableState& st, core::LockTable& table,
               const Clock& clock, std::optional<std::int64_t> last_write_ms);
  void append(std::string record);
  void fail(std::string why);
  void record_sync(std::chrono::microseconds took);
  void wait_sync_idle();
  void sync_thread_main();
  std::int64_t to_wall_ms(core::Instant expiry) const;
  std::uint64_t fence_mark(const core::LockTable& table) const;

  JournalOptions options_;
  const Clock& clock_;
  int fd_ = -1;
  std::string buffer_;
  std::uint64_t appended_ = 0, written_ = 0, durable_ = 0;
  // Highest fencing token covered by a fence record appended so far (or by
  // the floor read at open()).
  std::uint64_t reserved_ = 0;
  bool in_flight_ = false;  // a start_sync() awaits its finish_sync()
  bool failed_ = false;
  std::string failure_;
  Stats stats_;

  // Shared with the sync thread (started by the first start_sync()).
  struct Job {
    int fd = -1;
    std::uint64_t seq = 0;
    std::function<void(const SyncResult&)> done;
  };
  std::mutex mu_;
  std::condition_variable cv_;
  std::optional<Job> job_;   // guarded by mu_: handed to the sync thread
  bool syncing_ = false;     // guarded by mu_: the thread runs a job
  bool stop_ = false;        // guarded by mu_
  std::thread sync_thread_;  // joined by the destructor
};

}  // namespace baton::server

#endif  // BATON_SERVER_JOURNAL_H_
