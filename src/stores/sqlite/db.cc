// stores/sqlite/db.cc — SQLite connections, the pool and the store clock.
#include "stores/sqlite/db.h"

#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <thread>

#include "core/jitter.h"

namespace baton::store::sq {

std::int64_t store_now_us() {
  struct timespec ts {};
  // The raw syscall: an LD_PRELOAD clock faker (libfaketime) interposes
  // clock_gettime(), and a wall-clock step never moves CLOCK_MONOTONIC.
  syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1000000 + ts.tv_nsec / 1000;
}

std::int64_t wall_now_us() {
  struct timespec ts {};
  syscall(SYS_clock_gettime, CLOCK_REALTIME, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1000000 + ts.tv_nsec / 1000;
}

const std::string& boot_id() {
  static const std::string id = [] {
    std::ifstream in("/proc/sys/kernel/random/boot_id");
    std::string line;
    std::getline(in, line);
    return line;
  }();
  return id;
}

const std::string& ResultSet::at(std::size_t r, std::size_t c) const {
  static const std::string empty;
  if (r >= rows.size() || c >= rows[r].size() || !rows[r][c]) return empty;
  return *rows[r][c];
}

std::int64_t ResultSet::num(std::size_t r, std::size_t c) const {
  const std::string& s = at(r, c);
  return s.empty() ? 0 : std::strtoll(s.c_str(), nullptr, 10);
}

Conn::~Conn() {
  if (db_ != nullptr) sqlite3_close_v2(db_);
}

int Conn::busy(void* self, int count) {
  auto* c = static_cast<Conn*>(self);
  const TimePoint end = c->deadline_;
  const TimePoint now = Clock::now();
  if (now >= end) return 0;
  // Short, growing, jittered naps: the write lock is held for a few
  // hundred microseconds per transaction.
  const std::chrono::microseconds nap{
      core::random_between(20, 50 + 50 * std::min(count, 40))};
  std::this_thread::sleep_until(std::min(end, now + nap));
  return 1;
}

Error Conn::error(const char* what, int rc) {
  last_failure_ = rc;
  const int primary = rc & 0xFF;
  std::string msg = "sqlite database \"" + path_ + "\": " + what + ": " +
                    (db_ != nullptr ? sqlite3_errmsg(db_) : sqlite3_errstr(rc));
  switch (primary) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return Error(Errc::unavailable,
                   "sqlite database \"" + path_ +
                       "\" stayed locked by other processes until the "
                       "request deadline");
    case SQLITE_NOTADB:
      return Error(Errc::invalid_argument,
                   "sqlite database \"" + path_ +
                       "\" is not a SQLite database (left untouched)");
    case SQLITE_READONLY:
      return Error(Errc::permission_denied,
                   "sqlite database \"" + path_ + "\" is read-only");
    case SQLITE_PERM:
    case SQLITE_AUTH:
      return Error(Errc::permission_denied, msg);
    case SQLITE_FULL:
    case SQLITE_IOERR:
    case SQLITE_CANTOPEN:
    case SQLITE_PROTOCOL:
      broken_ = primary != SQLITE_FULL;
      return Error(Errc::unavailable, msg);
    case SQLITE_CORRUPT:
      broken_ = true;
      return Error(Errc::internal, msg);
    default:
      return Error(Errc::internal, msg);
  }
}

Status Conn::open(const std::string& path, bool create, TimePoint deadline) {
  path_ = path;
  deadline_ = deadline;
  const std::size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos
                              ? "."
                              : (slash == 0 ? "/" : path.substr(0, slash));
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return Error(Errc::invalid_argument, "sqlite database \"" + path +
                                             "\": directory \"" + dir +
                                             "\" does not exist");
  }
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    return Error(Errc::invalid_argument,
                 "sqlite database \"" + path + "\" is not a regular file");
  }
  int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX;
  if (create) flags |= SQLITE_OPEN_CREATE;
  int rc = sqlite3_open_v2(path.c_str(), &db_, flags, nullptr);
  if (rc != SQLITE_OK) {
    Error e = error("cannot open", rc);
    sqlite3_close_v2(db_);
    db_ = nullptr;
    return e;
  }
  sqlite3_extended_result_codes(db_, 1);
  if (sqlite3_db_readonly(db_, "main") == 1) {
    return Error(Errc::permission_denied,
                 "sqlite database \"" + path +
                     "\" is read-only for this process (the store writes "
                     "every grant); nothing was changed");
  }
  sqlite3_busy_handler(db_, &Conn::busy, this);
  // While processes race to create the file and switch it to WAL, SQLite
  // answers SQLITE_BUSY in places where it does not call the busy handler
  // (it would deadlock); those are retried here until the deadline.
  for (int attempt = 0;; ++attempt) {
    Status s = setup();
    if (s.ok() || !busy_failure() || Clock::now() >= deadline_) {
      return s;
    }
    retry_nap(attempt);
  }
}

bool Conn::busy_failure() const {
  const int primary = last_failure_ & 0xFF;
  return primary == SQLITE_BUSY || primary == SQLITE_LOCKED;
}

void Conn::retry_nap(int attempt) const {
  const std::chrono::microseconds nap{
      core::random_between(100, 500 + 250 * std::min(attempt, 8))};
  std::this_thread::sleep_until(std::min(deadline_, Clock::now() + nap));
}

Status Conn::setup() {
  auto mode = query("PRAGMA journal_mode");
  if (!mode.ok()) return std::move(mode).error();
  if (mode->at(0, 0) != "wal") {
    auto set = query("PRAGMA journal_mode=WAL");
    if (!set.ok()) return std::move(set).error();
    if (set->at(0, 0) != "wal") {
      // Another connection was busy: the switch needs the file alone.
      last_failure_ = SQLITE_BUSY;
      return Error(Errc::unavailable, "sqlite database \"" + path_ +
                                          "\": could not switch to WAL mode "
                                          "(journal mode \"" +
                                          set->at(0, 0) + "\")");
    }
  }
  // FULL: with NORMAL a power loss could roll back a grant in WAL mode and
  // reuse its fencing token.
  // The process's bell thread checkpoints at 4 MB (bell.h); SQLite's own
  // auto-checkpoint inside a COMMIT is only the net.
  return exec(
      "PRAGMA synchronous=FULL;PRAGMA foreign_keys=OFF;"
      "PRAGMA wal_autocheckpoint=10000");
}

Status Conn::exec(const std::string& sql) {
  char* msg = nullptr;
  const int rc = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &msg);
  sqlite3_free(msg);
  if (rc != SQLITE_OK) return error("statement failed", rc);
  return {};
}

Result<ResultSet> Conn::query(const std::string& sql) {
  sqlite3_stmt* stmt = nullptr;
  int rc = sqlite3_prepare_v2(db_, sql.c_str(), static_cast<int>(sql.size()),
                              &stmt, nullptr);
  if (rc != SQLITE_OK) return error("query failed", rc);
  ResultSet out;
  for (;;) {
    rc = sqlite3_step(stmt);
    if (rc == SQLITE_DONE) break;
    if (rc != SQLITE_ROW) {
      sqlite3_finalize(stmt);
      return error("query failed", rc);
    }
    const int n = sqlite3_column_count(stmt);
    auto& row = out.rows.emplace_back();
    for (int i = 0; i < n; ++i) {
      switch (sqlite3_column_type(stmt, i)) {
        case SQLITE_NULL:
          row.emplace_back();
          break;
        case SQLITE_INTEGER:
          row.emplace_back(std::to_string(sqlite3_column_int64(stmt, i)));
          break;
        default: {
          const void* p = sqlite3_column_blob(stmt, i);
          const int len = sqlite3_column_bytes(stmt, i);
          row.emplace_back(len > 0 ? std::string(static_cast<const char*>(p),
                                                 static_cast<std::size_t>(len))
                                   : std::string());
        }
      }
    }
  }
  sqlite3_finalize(stmt);
  return out;
}

Result<std::unique_ptr<Conn>> Pool::get(TimePoint deadline) {
  // No transaction starts once the caller's deadline has passed (rule 7).
  if (Clock::now() >= deadline) {
    return Error(Errc::timeout, "sqlite database \"" + path_ +
                                    "\": the call's deadline passed");
  }
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (!idle_.empty()) {
      auto c = std::move(idle_.back());
      idle_.pop_back();
      c->set_deadline(deadline);
      return c;
    }
  }
  auto c = std::make_unique<Conn>();
  if (Status st = c->open(path_, false, deadline); !st.ok()) return st.error();
  return c;
}

void Pool::put(std::unique_ptr<Conn> c) {
  if (c == nullptr || c->broken()) return;
  std::lock_guard<std::mutex> lk(mu_);
  if (static_cast<int>(idle_.size()) < max_idle_) idle_.push_back(std::move(c));
}

}  // namespace baton::store::sq
