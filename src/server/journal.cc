#include "server/journal.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>

namespace baton::server {

namespace {

constexpr std::uint8_t kLeasePut = 1, kLeaseDel = 2, kCounter = 3, kFence = 4;
constexpr std::uint32_t kMaxRecord = 64u << 20;

std::array<std::uint32_t, 256> make_table() {
  std::array<std::uint32_t, 256> t{};
  for (std::uint32_t i = 0; i < 256; ++i) {
    std::uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? 0x82F63B78u ^ (c >> 1) : c >> 1;
    t[i] = c;
  }
  return t;
}

class Enc {
 public:
  void u8(std::uint8_t v) { s_ += static_cast<char>(v); }
  void u32(std::uint32_t v) {
    for (int i = 0; i < 4; ++i) s_ += static_cast<char>((v >> (8 * i)) & 0xff);
  }
  void u64(std::uint64_t v) {
    for (int i = 0; i < 8; ++i) s_ += static_cast<char>((v >> (8 * i)) & 0xff);
  }
  void str(std::string_view v) {
    u32(static_cast<std::uint32_t>(v.size()));
    s_.append(v);
  }
  void token(const OwnerToken& t) {
    u64(t.hi);
    u64(t.lo);
  }
  // Frames the payload: length, CRC32C, payload.
  std::string frame() const {
    std::string out;
    Enc h;
    h.u32(static_cast<std::uint32_t>(s_.size()));
    h.u32(crc32c(s_.data(), s_.size()));
    out = h.s_ + s_;
    return out;
  }

 private:
  std::string s_;
};

class Dec {
 public:
  explicit Dec(std::string_view s) : s_(s) {}
  bool u8(std::uint8_t* v) {
    if (s_.size() < 1) return false;
    *v = static_cast<std::uint8_t>(s_[0]);
    s_.remove_prefix(1);
    return true;
  }
  bool u32(std::uint32_t* v) {
    if (s_.size() < 4) return false;
    *v = 0;
    for (int i = 0; i < 4; ++i)
      *v |= std::uint32_t(static_cast<std::uint8_t>(s_[i])) << (8 * i);
    s_.remove_prefix(4);
    return true;
  }
  bool u64(std::uint64_t* v) {
    if (s_.size() < 8) return false;
    *v = 0;
    for (int i = 0; i < 8; ++i)
      *v |= std::uint64_t(static_cast<std::uint8_t>(s_[i])) << (8 * i);
    s_.remove_prefix(8);
    return true;
  }
  bool str(std::string* v) {
    std::uint32_t n = 0;
    if (!u32(&n) || s_.size() < n) return false;
    v->assign(s_.substr(0, n));
    s_.remove_prefix(n);
    return true;
  }
  bool token(OwnerToken* t) { return u64(&t->hi) && u64(&t->lo); }
  bool done() const { return s_.empty(); }

 private:
  std::string_view s_;
};

bool apply(std::string_view payload, DurableState* st) {
  Dec d(payload);
  std::uint8_t type = 0;
  if (!d.u8(&type)) return false;
  switch (type) {
    case kLeasePut: {
      core::LeaseRecord r;
      std::uint64_t fencing = 0, ttl = 0, expiry = 0, n = 0;
      std::uint32_t holds = 0, cap = 0, aliases = 0;
      if (!d.str(&r.name) || !d.token(&r.token) || !d.u64(&fencing) ||
          !d.u64(&ttl) || !d.u64(&expiry) || !d.u32(&holds) || !d.u32(&cap) ||
          !d.str(&r.label) || !d.str(&r.reentrancy_key) || !d.u32(&aliases)) {
        return false;
      }
      for (n = 0; n < aliases; ++n) {
        OwnerToken t;
        if (!d.token(&t)) return false;
        r.aliases.push_back(t);
      }
      r.fencing_token = fencing;
      r.ttl = core::Nanos(static_cast<std::int64_t>(ttl));
      r.expiry = core::Instant(static_cast<std::int64_t>(expiry));
      r.holds = holds;
      r.capacity = cap;
      if (fencing > st->fencing_high_water) st->fencing_high_water = fencing;
      auto key = std::make_pair(r.name, r.token);
      st->leases[key] = std::move(r);
      return d.done();
    }
    case kLeaseDel: {
      std::string name;
      OwnerToken t;
      if (!d.str(&name) || !d.token(&t)) return false;
      st->leases.erase(std::make_pair(name, t));
      return d.done();
    }
    case kCounter: {
      std::string name;
      std::uint64_t v = 0;
      if (!d.str(&name) || !d.u64(&v)) return false;
      st->counters[name] = static_cast<std::int64_t>(v);
      return d.done();
    }
    case kFence: {
      std::uint64_t v = 0;
      if (!d.u64(&v)) return false;
      if (v > st->fencing_high_water) st->fencing_high_water = v;
      return d.done();
    }
    default:
      return false;
  }
}

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

}  // namespace

std::uint32_t crc32c(const void* data, std::size_t size) {
  static const std::array<std::uint32_t, 256> table = make_table();
  std::uint32_t c = 0xFFFFFFFFu;
  const auto* p = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < size; ++i)
    c = table[(c ^ p[i]) & 0xff] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

std::string encode_lease_put(const core::LeaseRecord& r) {
  Enc e;
  e.u8(kLeasePut);
  e.str(r.name);
  e.token(r.token);
  e.u64(r.fencing_token);
  e.u64(static_cast<std::uint64_t>(r.ttl.count()));
  e.u64(static_cast<std::uint64_t>(r.expiry.count()));
  e.u32(r.holds);
  e.u32(r.capacity);
  e.str(r.label);
  e.str(r.reentrancy_key);
  e.u32(static_cast<std::uint32_t>(r.aliases.size()));
  for (const auto& t : r.aliases) e.token(t);
  return e.frame();
}
std::string encode_lease_del(std::string_view name, const OwnerToken& token) {
  Enc e;
  e.u8(kLeaseDel);
  e.str(name);
  e.token(token);
  return e.frame();
}
std::string encode_counter(std::string_view name, std::int64_t value) {
  Enc e;
  e.u8(kCounter);
  e.str(name);
  e.u64(static_cast<std::uint64_t>(value));
  return e.frame();
}
std::string encode_fence(std::uint64_t high_water) {
  Enc e;
  e.u8(kFence);
  e.u64(high_water);
  return e.frame();
}

std::size_t replay_records(std::string_view bytes, DurableState* state) {
  std::size_t at = 0;
  while (bytes.size() - at >= 8) {
    Dec h(bytes.substr(at, 8));
    std::uint32_t len = 0, crc = 0;
    h.u32(&len);
    h.u32(&crc);
    if (len == 0 || len > kMaxRecord || bytes.size() - at - 8 < len) break;
    std::string_view payload = bytes.substr(at + 8, len);
    if (crc32c(payload.data(), payload.size()) != crc) break;
    if (!apply(payload, state)) break;
    ++state->records;
    at += 8 + len;
  }
  if (at != bytes.size()) state->torn_tail = true;
  return at;
}

Journal::Journal(JournalOptions options, const core::Clock& clock)
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
                                               const core::Clock& clock) {
  if (::mkdir(options.dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return errno_error("cannot create data dir " + options.dir).error();
  }
  DurableState st;
  for (const char* file : {"/snapshot", "/journal"}) {
    auto bytes = read_file(options.dir + file);
    if (!bytes) return bytes.error();
    replay_records(*bytes, &st);
  }
  std::unique_ptr<Journal> j(new Journal(std::move(options), clock));
  j->stats_.torn_tail = st.torn_tail;
  table.raise_fencing_floor(st.fencing_high_water);
  std::int64_t now_ms = wall_now_ms();
  core::Instant now = clock.now();
  for (auto& [key, rec] : st.leases) {
    core::LeaseRecord r = rec;
    r.expiry = now + std::chrono::milliseconds(rec.expiry.count() - now_ms);
    if (table.restore_lease(r)) ++j->stats_.restored_leases;
  }
  for (const auto& [name, value] : st.counters) {
    table.restore_counter(name, value);
    ++j->stats_.restored_counters;
  }
  Status s = j->compact(table);
  if (!s) return s.error();
  return j;
}

void Journal::append(std::string record) {
  if (failed_) return;
  buffer_ += record;
  ++appended_;
  ++stats_.records;
}

void Journal::lease_put(const core::LeaseRecord& lease) {
  core::LeaseRecord r = lease;
  r.expiry = core::Instant(to_wall_ms(lease.expiry));
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
  std::string snap = encode_fence(table.fencing_high_water());
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
    r.expiry = core::Instant(to_wall_ms(lease.expiry));
    snap += encode_lease_put(r);
    spill(false);
  });
  for (const auto& [name, value] : table.snapshot_counters()) {
    snap += encode_counter(name, value);
    spill(false);
  }
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
