#include "server/journal.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <ctime>

namespace baton::server {

namespace {

Status errno_error(const std::string& what) {
  return Error(Errc::unavailable, what + ": " + std::strerror(errno));
}

Result<std::string> read_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return std::string();
    return errno_error("open " + path).error();
  }
  std::string out;
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      Status s = errno_error("read " + path);
      ::close(fd);
      return s.error();
    }
    if (n == 0) break;
    out.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return out;
}

bool write_all(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

std::int64_t wall_now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::uint64_t saturating_add(std::uint64_t a, std::uint64_t b) {
  return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

// One data file as read at open().
struct DataFile {
  std::string path;
  std::string name;  // "snapshot" or "journal"
  std::string bytes;
  std::vector<Damage> damage;
};

std::string refusal_message(const std::vector<DataFile>& files) {
  std::string out = "refusing to start: ";
  bool first = true;
  for (const auto& f : files) {
    if (f.damage.empty()) continue;
    if (!first) out += "; also ";
    first = false;
    out += f.name + " " + f.path + " is corrupt at " +
           describe_damage(f.damage[0]);
    if (f.damage.size() > 1) {
      out += " (and " + std::to_string(f.damage.size() - 1) +
             " more damaged stretch(es) after it)";
    }
  }
  out +=
      ". The data files were left untouched. Start once with --repair "
      "(config: repair: true) to restore every record that is still valid; "
      "copies of the original files are then kept as "
      "<file>.corrupt-<UTC time>";
  return out;
}

std::string utc_stamp() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y%m%dT%H%M%SZ", &tm);
  return buf;
}

Status fsync_dir(const std::string& dir) {
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) return errno_error("open " + dir);
  const bool ok = ::fsync(dfd) == 0;
  ::close(dfd);
  if (!ok) return errno_error("fsync " + dir);
  return {};
}

// Writes `bytes` to a new file (never over an existing one), fsynced.
Status write_new_file(const std::string& path, std::string_view bytes) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return errno_error("create " + path);
  const bool ok = write_all(fd, bytes) && ::fsync(fd) == 0;
  Status s = ok ? Status{} : errno_error("write " + path);
  ::close(fd);
  return s;
}

// Repair: copies every non-empty data file to <path>.corrupt-<UTC time>
// (one suffix for both, unused so far) before anything is rewritten.
Status keep_copies(const std::vector<DataFile>& files) {
  const std::string stamp = utc_stamp();
  std::string suffix;
  for (int n = 0;; ++n) {
    suffix = ".corrupt-" + stamp + (n == 0 ? "" : "-" + std::to_string(n));
    bool free = true;
    for (const auto& f : files) {
      free = free && ::access((f.path + suffix).c_str(), F_OK) != 0;
    }
    if (free) break;
    if (n == 100) {
      return Error(Errc::unavailable, "repair: no free name for the copies (" +
                                          files[0].path + suffix + ")");
    }
  }
  std::string kept;
  std::string dir;
  for (const auto& f : files) {
    if (f.bytes.empty()) continue;
    Status s = write_new_file(f.path + suffix, f.bytes);
    if (!s) return Error(Errc::unavailable, "repair: " + s.error().message());
    kept += (kept.empty() ? "" : ", ") + f.path + suffix;
    dir = f.path.substr(0, f.path.rfind('/'));
  }
  if (!dir.empty()) {
    Status s = fsync_dir(dir);
    if (!s) return Error(Errc::unavailable, "repair: " + s.error().message());
  }
  spdlog::warn("repair: kept copies of the original files: {}", kept);
  return {};
}

// When the data files were last written (wall-clock ms): the latest instant
// at which a lost record can have been appended.
std::int64_t last_write_wall_ms(const std::vector<DataFile>& files) {
  std::int64_t latest = 0;
  for (const auto& f : files) {
    struct stat sb {};
    if (::stat(f.path.c_str(), &sb) != 0) continue;
    const std::int64_t ms =
        std::int64_t{sb.st_mtim.tv_sec} * 1000 + sb.st_mtim.tv_nsec / 1000000;
    latest = std::max(latest, ms);
  }
  return latest == 0 ? wall_now_ms() : latest;
}

}  // namespace

Journal::Journal(JournalOptions options, const Clock& clock)
    : options_(std::move(options)), clock_(clock) {}

Journal::~Journal() {
  if (sync_thread_.joinable()) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    sync_thread_.join();  // finishes a job in flight first
  }
  if (fd_ >= 0) {
    if (!failed_ && durable_ != appended_) (void)sync();
    ::close(fd_);
  }
}

void Journal::sync_thread_main() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return stop_ || job_.has_value(); });
    if (!job_) return;  // stop_ and nothing left to do
    Job job = std::move(*job_);
    job_.reset();
    syncing_ = true;
    lock.unlock();
    auto start = std::chrono::steady_clock::now();
    SyncResult r;
    r.seq = job.seq;
    if (::fdatasync(job.fd) != 0) r.error = errno;
    r.took = std::chrono::duration_cast<std::chrono::microseconds>(
        std::chrono::steady_clock::now() - start);
    job.done(r);
    lock.lock();
    syncing_ = false;
    cv_.notify_all();
  }
}

void Journal::wait_sync_idle() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return !job_ && !syncing_; });
}

std::int64_t Journal::to_wall_ms(core::Instant expiry) const {
  auto left = expiry - clock_.now();
  return wall_now_ms() +
         std::chrono::duration_cast<std::chrono::milliseconds>(left).count();
}

Result<std::unique_ptr<Journal>> Journal::open(JournalOptions options,
                                               core::LockTable& table,
                                               const Clock& clock) {
  if (options.fencing_block == 0) {
    return Error(Errc::invalid_argument, "fencing_block must be at least 1");
  }
  if (::mkdir(options.dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return errno_error("cannot create data dir " + options.dir).error();
  }
  // Nothing is written before both files have been read and judged: a
  // refused start leaves them byte for byte as they were.
  DurableState st;
  std::vector<DataFile> files(2);
  files[0].name = "snapshot";
  files[1].name = "journal";
  for (auto& f : files) {
    f.path = options.dir + "/" + f.name;
    auto bytes = read_file(f.path);
    if (!bytes) return bytes.error();
    f.bytes = std::move(*bytes);
    f.damage = scan_records(f.bytes, &st);
  }
  const DataFile& journal = files[1];
  // The journal's only damage running to its end is a torn tail (the last
  // writes before a crash, never acknowledged). The snapshot is fsynced
  // before it is renamed into place, so any damage in it is corruption.
  const bool torn = journal.damage.size() == 1 && journal.damage[0].at_end;
  const bool corrupt =
      !files[0].damage.empty() || (!journal.damage.empty() && !torn);
  std::uint64_t stretches = 0;
  if (options.repair && !corrupt) {
    spdlog::info("repair: {} and {} are not corrupt, nothing to repair",
                 files[0].path, journal.path);
  }
  if (corrupt) {
    if (!options.repair) {
      return Error(Errc::internal, refusal_message(files));
    }
    Status kept = keep_copies(files);
    if (!kept) return kept.error();
    for (const auto& f : files) {
      for (const auto& d : f.damage) {
        spdlog::warn("repair: {} {}: dropped {}", f.name, f.path,
                     describe_damage(d));
        ++stretches;
      }
    }
  }
  // The restart floor (docs/server.md, "Why no fencing token is reused"):
  // every token handed out is covered by a fence mark and by its own lease
  // record, so the highest of them read is past it even if one record was
  // lost. Each damaged stretch may also have swallowed the fence record of
  // the newest block: one more block per stretch.
  const std::uint64_t block = options.fencing_block;
  std::uint64_t floor = st.fencing_high_water;
  for (std::uint64_t i = 0; i < stretches; ++i)
    floor = saturating_add(floor, block);
  if (corrupt) {
    spdlog::warn(
        "repair: fencing floor {} (highest fence mark or token read {} + {} "
        "damaged stretch(es) x fencing block {}): every token issued before "
        "is below the next one",
        floor, st.fencing_high_water, stretches, block);
  }
  std::unique_ptr<Journal> j(new Journal(std::move(options), clock));
  if (torn) {
    j->stats_.torn_tail = true;
    j->stats_.torn_tail_offset = journal.damage[0].offset;
    j->stats_.torn_tail_bytes = journal.damage[0].bytes;
  }
  j->stats_.repaired_stretches = static_cast<std::size_t>(stretches);
  j->reserved_ = floor;
  table.raise_fencing_floor(floor);
  // A damaged stretch may have held an extend: no restored lease ends
  // before the last write to the files + its ttl (when such an extend could
  // have ended it at the latest).
  std::optional<std::int64_t> last_write_ms;
  if (corrupt) last_write_ms = last_write_wall_ms(files);
  j->restore(st, table, clock, last_write_ms);
  Status s = j->compact(table);
  if (!s) return s.error();
  return j;
}

void Journal::restore(const DurableState& st, core::LockTable& table,
                      const Clock& clock,
                      std::optional<std::int64_t> last_write_ms) {
  // Newest first: if a lost release left two leases competing for one
  // place, the later grant (the one its holder was told about last) wins.
  std::vector<const core::LeaseRecord*> order;
  order.reserve(st.leases.size());
  for (const auto& [key, rec] : st.leases) order.push_back(&rec);
  std::sort(order.begin(), order.end(), [](const auto* a, const auto* b) {
    return a->fencing_token > b->fencing_token;
  });
  const std::int64_t now_ms = wall_now_ms();
  const core::Instant now = clock.now();
  for (const core::LeaseRecord* rec : order) {
    core::LeaseRecord r = *rec;
    std::int64_t expiry_ms = wall_expiry_ms(rec->expiry);
    if (last_write_ms) {
      const std::int64_t ttl_ms =
          std::chrono::duration_cast<std::chrono::milliseconds>(rec->ttl)
              .count();
      expiry_ms = std::max(expiry_ms, *last_write_ms + ttl_ms);
    }
    r.expiry = now + std::chrono::milliseconds(expiry_ms - now_ms);
    Status s = table.restore_lease(r);
    if (s) {
      ++stats_.restored_leases;
    } else {
      spdlog::warn("lease of {} with fencing token {} not restored: {}", r.name,
                   r.fencing_token, s.error().message());
    }
  }
  for (const auto& [name, value] : st.counters) {
    table.restore_counter(name, value);
    ++stats_.restored_counters;
  }
}

void Journal::append(std::string record) {
  if (failed_) return;
  buffer_ += record;
  ++appended_;
  ++stats_.records;
}

void Journal::lease_put(const core::LeaseRecord& lease) {
  if (lease.fencing_token > reserved_) {
    // Reserve a block of tokens before this one is handed out: the fence
    // record goes first into the same buffer, so the fsync that makes the
    // grant durable (and lets its reply out) covers it too.
    reserved_ = saturating_add(lease.fencing_token, options_.fencing_block - 1);
    append(encode_fence(reserved_));
  }
  core::LeaseRecord r = lease;
  r.expiry = wall_expiry(to_wall_ms(lease.expiry));
  append(encode_lease_put(r));
}
void Journal::lease_removed(std::string_view name, const OwnerToken& token) {
  append(encode_lease_del(name, token));
}
void Journal::counter_put(std::string_view name, std::int64_t value) {
  append(encode_counter(name, value));
}

void Journal::fail(std::string why) {
  failed_ = true;
  failure_ = std::move(why);
}

Status Journal::write() {
  if (failed_) return Error(Errc::unavailable, failure_);
  if (!buffer_.empty()) {
    if (!write_all(fd_, buffer_)) {
      fail(std::string("journal write failed: ") + std::strerror(errno));
      return Error(Errc::unavailable, failure_);
    }
    stats_.bytes += buffer_.size();
    buffer_.clear();
  }
  written_ = appended_;
  if (options_.fsync == FsyncPolicy::never) durable_ = written_;
  return {};
}

bool Journal::start_sync(std::function<void(const SyncResult&)> done) {
  if (in_flight_ || failed_) return false;
  if (!write()) return false;
  if (durable_ == written_) return false;
  if (!sync_thread_.joinable()) {
    sync_thread_ = std::thread([this] { sync_thread_main(); });
  }
  in_flight_ = true;
  {
    std::lock_guard<std::mutex> lock(mu_);
    job_ = Job{fd_, written_, std::move(done)};
  }
  cv_.notify_all();
  return true;
}

Status Journal::finish_sync(const SyncResult& result) {
  in_flight_ = false;
  if (failed_) return Error(Errc::unavailable, failure_);
  if (result.error != 0) {
    fail(std::string("journal fsync failed: ") + std::strerror(result.error));
    return Error(Errc::unavailable, failure_);
  }
  // A synchronous sync() or a compaction may have gone further meanwhile.
  if (result.seq > durable_) durable_ = result.seq;
  record_sync(result.took);
  return {};
}

void Journal::record_sync(std::chrono::microseconds took) {
  ++stats_.syncs;
  stats_.last_sync = took;
  stats_.total_sync += took;
  if (took > stats_.max_sync) stats_.max_sync = took;
}

Status Journal::sync() {
  if (failed_) return Error(Errc::unavailable, failure_);
  if (buffer_.empty() && durable_ == appended_) return {};
  auto start = std::chrono::steady_clock::now();
  Status s = write();
  if (!s) return s;
  if (options_.fsync != FsyncPolicy::never) {
    // One fdatasync at a time on the file (the sync thread may be in one).
    wait_sync_idle();
    if (::fdatasync(fd_) != 0) {
      fail(std::string("journal fsync failed: ") + std::strerror(errno));
      return Error(Errc::unavailable, failure_);
    }
  }
  durable_ = written_;
  record_sync(std::chrono::duration_cast<std::chrono::microseconds>(
      std::chrono::steady_clock::now() - start));
  return {};
}

std::uint64_t Journal::fence_mark(const core::LockTable& table) const {
  return std::max(reserved_, table.fencing_high_water());
}

Status Journal::maybe_compact(const core::LockTable& table) {
  if (failed_ || in_flight_) return {};
  double limit =
      options_.compact_factor * static_cast<double>(stats_.snapshot_bytes);
  if (stats_.bytes < options_.compact_min_bytes ||
      static_cast<double>(stats_.bytes) < limit) {
    return {};
  }
  Status s = compact(table);
  if (!s) fail(s.error().message());
  return s;
}

Status Journal::compact(const core::LockTable& table) {
  // Streamed to the file in ~1 MiB pieces: a snapshot of a million leases
  // must not need a copy of the table in memory.
  const std::string tmp = options_.dir + "/snapshot.tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return errno_error("open " + tmp);
  constexpr std::size_t kChunk = 1 << 20;
  // The fence mark twice, first and last: losing one record never loses it.
  const std::uint64_t mark = fence_mark(table);
  std::string snap = encode_fence(mark);
  std::uint64_t total = 0;
  bool ok = true;
  auto spill = [&](bool force) {
    if (ok && (force || snap.size() >= kChunk)) {
      ok = write_all(fd, snap);
      total += snap.size();
      snap.clear();
    }
  };
  table.for_each_lease([&](const core::LeaseRecord& lease) {
    core::LeaseRecord r = lease;
    r.expiry = wall_expiry(to_wall_ms(lease.expiry));
    snap += encode_lease_put(r);
    spill(false);
  });
  for (const auto& [name, value] : table.snapshot_counters()) {
    snap += encode_counter(name, value);
    spill(false);
  }
  snap += encode_fence(mark);
  spill(true);
  std::string().swap(snap);
  ok = ok && ::fsync(fd) == 0;
  ::close(fd);
  if (!ok) return errno_error("write " + tmp);
  if (::rename(tmp.c_str(), (options_.dir + "/snapshot").c_str()) != 0) {
    return errno_error("rename snapshot");
  }
  int dfd = ::open(options_.dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  // Replaying the old journal over the new snapshot yields the same state,
  // so a crash between the rename and this truncation is harmless.
  const std::string jpath = options_.dir + "/journal";
  int jfd = ::open(jpath.c_str(),
                   O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0600);
  if (jfd < 0) return errno_error("open " + jpath);
  // The snapshot holds every record appended so far (durable or not).
  if (fd_ >= 0) ::close(fd_);
  fd_ = jfd;
  buffer_.clear();
  written_ = durable_ = appended_;
  stats_.bytes = 0;
  stats_.snapshot_bytes = total;
  ++stats_.compactions;
  return {};
}

}  // namespace baton::server
