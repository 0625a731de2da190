// stores/postgres/pg_conn.h — one libpq connection driven by the async API
// (PQconnectStartParams/PQconnectPoll, PQsendQueryParams/PQconsumeInput with
// poll() deadlines), and the connection pool (MaxOpenConnections and the
// other database/sql-style settings).
//
// Errors: connection failures, timeouts, server shutdown, too many
// connections, serialization failures and deadlocks are `unavailable` (the
// caller may retry with the same owner token, rule 17); anything else is
// `internal`. A connection that saw a connection-level error is never
// reused; the pool then also drops its idle connections (they most likely
// point at the same dead server) and backs off new connects (50 ms doubling
// to 2 s).
//
// Deadlines (rule 7): every wait here — the asynchronous connect, sending
// a request, waiting for its reply, waiting for a free pooled connection —
// ends at a Deadline: the store's own timeout (request_timeout,
// connect_timeout; past it the server is slow: `unavailable`) or the
// caller's call deadline (CallContext::deadline(); past it the caller's
// wait is over: `timeout`, the message names the call deadline), whichever
// comes first. A connection with a reply outstanding at that point is
// closed (only that one: the server may be fine), and nothing is sent once
// the deadline has passed.
//
// Thread safety: a PgConn is used by one thread at a time. Pool is safe for
// concurrent use.
#ifndef BATON_STORES_POSTGRES_PG_CONN_H_
#define BATON_STORES_POSTGRES_PG_CONN_H_

#include <libpq-fe.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "baton/error.h"
#include "baton/store.h"

namespace baton::store::pg {

using Clock = std::chrono::steady_clock;
using TimePoint = Clock::time_point;
using std::chrono::milliseconds;

// When one piece of I/O must end: `own` (the store's own timeout) or `call`
// (the caller's call deadline), whichever comes first.
struct Deadline {
  TimePoint own = TimePoint::max();
  TimePoint call = TimePoint::max();

  // The store's `timeout` from now, within the call deadline of `ctx`
  // (read on ctx's clock and carried over to the steady clock).
  static Deadline within(const CallContext& ctx, milliseconds timeout);
  TimePoint at() const { return std::min(own, call); }
  // True when the call deadline ends it first.
  bool cut() const { return call < own; }
  Deadline own_until(TimePoint t) const { return {std::min(own, t), call}; }
};

// libpq connection keywords and values (host, port, user, password, ...).
using ConnParams = std::vector<std::pair<std::string, std::string>>;

// cv.wait_until(lk, until, pred) for a steady-clock `until`, in slices of at
// most 100 ms measured on the system clock. A steady-clock timed wait
// (pthread_cond_clockwait on CLOCK_MONOTONIC) never times out under
// libfaketime, which fakes CLOCK_MONOTONIC but not that call (the torture
// test runs its clock-step workers so); the system-clock wait
// (pthread_cond_timedwait) it does translate. Returns pred().
template <typename Pred>
bool wait_until_steady(std::condition_variable& cv,
                       std::unique_lock<std::mutex>& lk, TimePoint until,
                       Pred pred) {
  while (!pred()) {
    const TimePoint now = Clock::now();
    if (now >= until) return false;
    const auto slice =
        std::min<Clock::duration>(until - now, milliseconds{100});
    cv.wait_until(
        lk, std::chrono::system_clock::now() +
                std::chrono::duration_cast<std::chrono::system_clock::duration>(
                    slice));
  }
  return true;
}

struct ResultDeleter {
  void operator()(PGresult* r) const { PQclear(r); }
};
using PgResult = std::unique_ptr<PGresult, ResultDeleter>;

class PgConn {
 public:
  // `where` names the server in messages (never the password).
  static Result<std::unique_ptr<PgConn>> connect(const ConnParams& params,
                                                 const std::string& where,
                                                 Deadline deadline);
  ~PgConn();
  PgConn(const PgConn&) = delete;
  PgConn& operator=(const PgConn&) = delete;

  // One statement with text parameters; the (last) result.
  Result<PgResult> query(const std::string& sql,
                         const std::vector<std::string>& params,
                         Deadline deadline);
  // The same through a prepared statement named `name` (prepared on this
  // connection the first time it is used): no parse or plan per call.
  Result<PgResult> query_prepared(const std::string& name,
                                  const std::string& sql,
                                  const std::vector<std::string>& params,
                                  Deadline deadline);
  // A script of several statements without parameters.
  Status exec(const std::string& sql, Deadline deadline);

  // Never reused: a connection-level error, or a reply left outstanding.
  bool broken() const { return broken_; }
  // Broken by the server or the network (not just abandoned at the
  // caller's call deadline).
  bool server_lost() const { return server_lost_; }
  PGconn* raw() { return conn_; }
  TimePoint created() const { return created_; }
  TimePoint last_used() const { return last_used_; }
  void touch() { last_used_ = Clock::now(); }

 private:
  PgConn(PGconn* c, std::string where);
  Result<PgResult> finish(Deadline deadline);
  Error lost(const std::string& what);
  Error abandon(Deadline deadline, const std::string& what);
  Status time_left(Deadline deadline) const;

  PGconn* conn_;
  std::string where_;
  bool broken_ = false;
  bool server_lost_ = false;
  std::set<std::string> prepared_;  // statement names prepared here
  TimePoint created_;
  TimePoint last_used_;
};

struct PoolOptions {
  int max_open = 16;                          // MaxOpenConnections
  int max_idle = 16;                          // MaxIdleConnections
  milliseconds max_lifetime{30 * 60 * 1000};  // ConnectionMaxLifetime (0 = ∞)
  milliseconds max_idle_time{5 * 60 * 1000};  // ConnectionMaxIdleTime (0 = ∞)
  milliseconds connect_timeout{5000};
};

class Pool {
 public:
  Pool(ConnParams params, std::string where, PoolOptions options);
  ~Pool();

  // A connection borrowed from the pool; returned when destroyed (dropped
  // instead if it broke).
  class Handle {
   public:
    Handle(Pool* pool, std::unique_ptr<PgConn> c)
        : pool_(pool), conn_(std::move(c)) {}
    Handle(Handle&&) = default;
    Handle& operator=(Handle&&) = delete;
    ~Handle() {
      if (conn_) pool_->put(std::move(conn_));
    }
    PgConn* operator->() { return conn_.get(); }
    PgConn& operator*() { return *conn_; }

   private:
    Pool* pool_;
    std::unique_ptr<PgConn> conn_;
  };

  // Waits for a free connection (or opens one) until `deadline`.
  Result<Handle> get(Deadline deadline);
  // Opens a connection outside the pool (the listener's).
  Result<std::unique_ptr<PgConn>> open_dedicated(Deadline deadline);

  const std::string& where() const { return where_; }
  int open_count() const;

 private:
  void put(std::unique_ptr<PgConn> c);
  bool expired(const PgConn& c, TimePoint now) const;

  const ConnParams params_;
  const std::string where_;
  const PoolOptions options_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::unique_ptr<PgConn>> idle_;  // guarded by mu_
  int open_ = 0;                              // guarded by mu_
  TimePoint retry_at_{};                      // guarded by mu_
  milliseconds backoff_{0};                   // guarded by mu_
  std::string last_error_;                    // guarded by mu_
};

}  // namespace baton::store::pg

#endif  // BATON_STORES_POSTGRES_PG_CONN_H_
