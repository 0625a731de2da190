// stores/sqlite/db.h — one SQLite connection (sqlite3*, no mutex: one thread
// at a time) with a busy handler bounded by the deadline of the running
// operation (rule 7), a small pool of them, and the store clock.
//
// Store clock: CLOCK_MONOTONIC in microseconds, read by a raw syscall (no
// vDSO, no LD_PRELOAD interposer such as libfaketime can move it). It never
// steps with the wall clock, and it is the clock every client on the host
// computes its safe local deadline with (std::chrono::steady_clock), so the
// two agree exactly (rule 14), also across a suspend, which both skip
// (CLOCK_BOOTTIME would count the suspend and end a lease its holder still
// believes valid). It restarts at each boot, so the database records the
// boot id (/proc/sys/kernel/random/boot_id) and a different one means every
// lease and queued request has expired.
//
// Thread safety: a Conn is used by one thread at a time; Pool is safe for
// concurrent use.
#ifndef BATON_STORES_SQLITE_DB_H_
#define BATON_STORES_SQLITE_DB_H_

#include <sqlite3.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "baton/error.h"
#include "stores/sqlstep/sql_state.h"

namespace baton::store::sq {

using Clock = std::chrono::steady_clock;
using TimePoint = Clock::time_point;
using std::chrono::milliseconds;

// Store time: CLOCK_MONOTONIC, microseconds.
std::int64_t store_now_us();
// The host's wall clock (CLOCK_REALTIME by raw syscall), microseconds since
// the Unix epoch: only to report expiries as epoch times, never to decide.
std::int64_t wall_now_us();
// This boot's id (36 characters), or "" when /proc does not say.
const std::string& boot_id();

// One result set: rows of nullable byte strings (integers as decimal text).
struct ResultSet {
  std::vector<std::vector<std::optional<std::string>>> rows;
  const std::string& at(std::size_t r, std::size_t c) const;
  std::int64_t num(std::size_t r, std::size_t c) const;
};

class Conn {
 public:
  Conn() = default;
  ~Conn();
  Conn(const Conn&) = delete;
  Conn& operator=(const Conn&) = delete;

  // Opens `path` (creating it if `create`), WAL + synchronous=FULL. Errors
  // name the path: a missing directory, a read-only file, not a database.
  Status open(const std::string& path, bool create, TimePoint deadline);

  // Sets the deadline the busy handler waits until (lock contention).
  void set_deadline(TimePoint d) { deadline_ = d; }

  // Runs one or more ';'-separated statements with no result rows.
  Status exec(const std::string& sql);
  // Runs one statement and returns its rows.
  Result<ResultSet> query(const std::string& sql);
  bool broken() const { return db_ == nullptr || broken_; }
  // The last failure was SQLITE_BUSY / SQLITE_LOCKED (kept across later
  // successes, e.g. a ROLLBACK after it).
  bool busy_failure() const;
  // A short jittered pause before retrying after busy_failure(), capped at
  // the deadline.
  void retry_nap(int attempt) const;
  const std::string& path() const { return path_; }

 private:
  static int busy(void* self, int count);
  Status setup();
  Error error(const char* what, int rc);

  sqlite3* db_ = nullptr;
  std::string path_;
  TimePoint deadline_ = TimePoint::max();
  int last_failure_ = 0;
  bool broken_ = false;
};

class Pool {
 public:
  Pool(std::string path, int max_idle)
      : path_(std::move(path)), max_idle_(max_idle) {}

  // An idle connection or a new one, its busy deadline set to `deadline`;
  // timeout (and nothing opened) once `deadline` has passed.
  Result<std::unique_ptr<Conn>> get(TimePoint deadline);
  // Returns a healthy connection to the pool; a broken one is closed.
  void put(std::unique_ptr<Conn> c);
  const std::string& path() const { return path_; }

 private:
  const std::string path_;
  const int max_idle_;
  std::mutex mu_;
  std::vector<std::unique_ptr<Conn>> idle_;  // guarded by mu_
};

// X'..' literal of arbitrary bytes (a BLOB: safe for any input).
using sqlstep::hex_literal;

}  // namespace baton::store::sq

#endif  // BATON_STORES_SQLITE_DB_H_
