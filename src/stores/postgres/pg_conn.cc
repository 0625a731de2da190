// stores/postgres/pg_conn.cc — libpq connection (async API) and pool.
#include "stores/postgres/pg_conn.h"

#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace baton::store::pg {
namespace {

// The error for I/O that ran out of time: past the caller's call deadline
// it is a timeout (the caller's wait is over), else the server is slow or
// unreachable (unavailable, retryable).
Error out_of_time(Deadline deadline, const std::string& what) {
  if (deadline.cut()) {
    return Error(Errc::timeout,
                 what + " (the call deadline of the caller's wait passed)");
  }
  return Error(Errc::unavailable, what);
}

Error unavailable(std::string msg) {
  return Error(Errc::unavailable, std::move(msg));
}

std::string trimmed(const char* s) {
  std::string out = s == nullptr ? "" : s;
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) {
    out.pop_back();
  }
  return out;
}

// Waits until the socket is readable (or writable). False on timeout.
bool wait_socket(int fd, bool for_write, TimePoint deadline) {
  for (;;) {
    const auto left =
        std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
    if (left.count() < 0) return false;
    pollfd p{fd, static_cast<short>(for_write ? POLLOUT : POLLIN), 0};
    const int n = ::poll(
        &p, 1, static_cast<int>(std::min<long long>(left.count() + 1, 60'000)));
    if (n > 0) return true;
    if (n < 0 && errno != EINTR) return true;  // let libpq report it
  }
}

// SQLSTATEs after which a retry with the same owner token may succeed.
bool retryable_state(const std::string& s) {
  return s.rfind("08", 0) == 0 ||   // connection exception
         s.rfind("57P", 0) == 0 ||  // admin / crash shutdown, cannot connect
         s.rfind("53", 0) == 0 ||   // insufficient resources
         s.rfind("40", 0) == 0 ||   // serialization failure, deadlock
         s == "55P03";              // lock not available
}

}  // namespace

Deadline Deadline::within(const CallContext& ctx, milliseconds timeout) {
  const TimePoint now = Clock::now();
  Deadline d;
  d.own = now + timeout;
  if (ctx.deadline() != CallContext::time_point::max()) {
    d.call = now + (ctx.deadline() - ctx.now());
  }
  return d;
}

PgConn::PgConn(PGconn* c, std::string where)
    : conn_(c),
      where_(std::move(where)),
      created_(Clock::now()),
      last_used_(created_) {}

PgConn::~PgConn() {
  if (conn_ != nullptr) PQfinish(conn_);
}

Result<std::unique_ptr<PgConn>> PgConn::connect(const ConnParams& params,
                                                const std::string& where,
                                                Deadline deadline) {
  if (Clock::now() >= deadline.at()) {
    return out_of_time(deadline,
                       "no time left to connect to postgres " + where);
  }
  std::vector<const char*> keys, values;
  for (const auto& [k, v] : params) {
    keys.push_back(k.c_str());
    values.push_back(v.c_str());
  }
  keys.push_back(nullptr);
  values.push_back(nullptr);
  PGconn* c = PQconnectStartParams(keys.data(), values.data(), 0);
  if (c == nullptr) return unavailable("postgres " + where + ": out of memory");
  std::unique_ptr<PgConn> conn(new PgConn(c, where));
  if (PQstatus(c) == CONNECTION_BAD) {
    return unavailable("cannot connect to postgres " + where + ": " +
                       trimmed(PQerrorMessage(c)));
  }
  PostgresPollingStatusType st = PGRES_POLLING_WRITING;
  while (st != PGRES_POLLING_OK) {
    if (st == PGRES_POLLING_FAILED) {
      std::string msg = trimmed(PQerrorMessage(c));
      if (msg.find("password authentication failed") != std::string::npos ||
          msg.find("no password supplied") != std::string::npos) {
        return Error(Errc::permission_denied, "postgres " + where + ": " + msg);
      }
      return unavailable("cannot connect to postgres " + where + ": " + msg);
    }
    if (!wait_socket(PQsocket(c), st == PGRES_POLLING_WRITING, deadline.at())) {
      // Abandoned half-open: PQfinish (in ~PgConn) closes the socket.
      return out_of_time(deadline,
                         "connecting to postgres " + where + " timed out");
    }
    st = PQconnectPoll(c);
  }
  // Server notices (and FATAL messages) would go to stderr; the store
  // reports problems through its errors instead.
  PQsetNoticeProcessor(
      c, [](void*, const char*) {}, nullptr);
  if (PQsetnonblocking(c, 1) != 0) {
    return unavailable("postgres " + where + ": cannot set non-blocking mode");
  }
  return conn;
}

Error PgConn::lost(const std::string& what) {
  broken_ = true;
  server_lost_ = true;
  return unavailable("postgres " + where_ + ": " + what + ": " +
                     trimmed(PQerrorMessage(conn_)));
}

Error PgConn::abandon(Deadline deadline, const std::string& what) {
  // The reply (if any) is still outstanding: a late one must never be read
  // as the answer to a later call, so this connection is closed, not
  // reused. PQcancel is not sent: it opens a new connection and blocks
  // without a timeout (libpq 15 has no asynchronous cancel), which would
  // defeat the deadline; the server finishes or drops the statement when it
  // notices the closed socket.
  broken_ = true;
  if (!deadline.cut()) server_lost_ = true;
  return out_of_time(deadline, "postgres " + where_ + " " + what);
}

Result<PgResult> PgConn::finish(Deadline deadline) {
  // Flush what is left of the request.
  for (;;) {
    const int f = PQflush(conn_);
    if (f == 0) break;
    if (f < 0) return lost("sending the request failed");
    if (!wait_socket(PQsocket(conn_), true, deadline.at())) {
      return abandon(deadline, "did not accept the request in time");
    }
  }
  PgResult last;
  std::string error;
  bool retry = false;
  for (;;) {
    while (PQisBusy(conn_)) {
      // On TLS, libpq may leave decrypted bytes inside OpenSSL that poll(2)
      // cannot see: read them first (non-blocking) before waiting.
      if (PQsslInUse(conn_) != 0) {
        if (PQconsumeInput(conn_) == 0) return lost("connection lost");
        if (!PQisBusy(conn_)) break;
      }
      if (!wait_socket(PQsocket(conn_), false, deadline.at())) {
        return abandon(deadline, "did not answer in time (outcome unknown)");
      }
      if (PQconsumeInput(conn_) == 0) return lost("connection lost");
    }
    PGresult* r = PQgetResult(conn_);
    if (r == nullptr) break;
    const ExecStatusType st = PQresultStatus(r);
    if (st == PGRES_FATAL_ERROR || st == PGRES_BAD_RESPONSE ||
        st == PGRES_NONFATAL_ERROR) {
      const char* state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
      const std::string s = state == nullptr ? "" : state;
      if (error.empty()) {
        error = trimmed(PQresultErrorMessage(r));
        retry = retryable_state(s) || s.empty();
      }
    }
    last.reset(r);
  }
  touch();
  if (PQstatus(conn_) == CONNECTION_BAD) return lost("connection lost");
  if (!error.empty()) {
    if (retry) return unavailable("postgres " + where_ + ": " + error);
    return Error(Errc::internal, "postgres " + where_ + ": " + error);
  }
  if (!last) return Error(Errc::internal, "postgres " + where_ + ": no result");
  return last;
}

Result<PgResult> PgConn::query(const std::string& sql,
                               const std::vector<std::string>& params,
                               Deadline deadline) {
  if (Status st = time_left(deadline); !st.ok()) return st.error();
  std::vector<const char*> values;
  values.reserve(params.size());
  for (const auto& p : params) values.push_back(p.c_str());
  if (PQsendQueryParams(conn_, sql.c_str(), static_cast<int>(params.size()),
                        nullptr, values.data(), nullptr, nullptr, 0) == 0) {
    return lost("sending the request failed");
  }
  return finish(deadline);
}

Result<PgResult> PgConn::query_prepared(const std::string& name,
                                        const std::string& sql,
                                        const std::vector<std::string>& params,
                                        Deadline deadline) {
  if (Status st = time_left(deadline); !st.ok()) return st.error();
  if (prepared_.count(name) == 0) {
    if (PQsendPrepare(conn_, name.c_str(), sql.c_str(),
                      static_cast<int>(params.size()), nullptr) == 0) {
      return lost("sending the request failed");
    }
    auto r = finish(deadline);
    if (!r.ok()) return r;
    prepared_.insert(name);
  }
  std::vector<const char*> values;
  values.reserve(params.size());
  for (const auto& p : params) values.push_back(p.c_str());
  if (PQsendQueryPrepared(conn_, name.c_str(), static_cast<int>(params.size()),
                          values.data(), nullptr, nullptr, 0) == 0) {
    return lost("sending the request failed");
  }
  return finish(deadline);
}

Status PgConn::time_left(Deadline deadline) const {
  // Nothing is sent once the deadline passed: the connection stays clean.
  if (Clock::now() < deadline.at()) return {};
  return out_of_time(deadline,
                     "no time left to send the request to postgres " + where_);
}

Status PgConn::exec(const std::string& sql, Deadline deadline) {
  if (Status st = time_left(deadline); !st.ok()) return st;
  if (PQsendQuery(conn_, sql.c_str()) == 0) {
    return lost("sending the request failed");
  }
  auto r = finish(deadline);
  if (!r.ok()) return std::move(r).error();
  return {};
}

// ------------------------------------------------------------------ Pool

Pool::Pool(ConnParams params, std::string where, PoolOptions options)
    : params_(std::move(params)), where_(std::move(where)), options_(options) {}

Pool::~Pool() {
  std::lock_guard<std::mutex> lk(mu_);
  idle_.clear();
}

int Pool::open_count() const {
  std::lock_guard<std::mutex> lk(mu_);
  return open_;
}

bool Pool::expired(const PgConn& c, TimePoint now) const {
  if (options_.max_lifetime.count() > 0 &&
      now - c.created() >= options_.max_lifetime) {
    return true;
  }
  return options_.max_idle_time.count() > 0 &&
         now - c.last_used() >= options_.max_idle_time;
}

Result<Pool::Handle> Pool::get(Deadline deadline) {
  // Waiting for a free connection, and opening one, both end at the
  // caller's call deadline too (rule 7).
  std::unique_lock<std::mutex> lk(mu_);
  for (;;) {
    const TimePoint now = Clock::now();
    if (now >= deadline.at() && deadline.cut()) {
      return out_of_time(deadline,
                         "no connection to postgres " + where_ + " in time");
    }
    while (!idle_.empty()) {
      std::unique_ptr<PgConn> c = std::move(idle_.back());
      idle_.pop_back();
      if (expired(*c, now)) {
        --open_;
        lk.unlock();
        c.reset();  // closes outside the lock
        lk.lock();
        continue;
      }
      return Handle(this, std::move(c));
    }
    if (open_ < options_.max_open) {
      if (now < retry_at_) {
        const auto in =
            std::chrono::duration_cast<milliseconds>(retry_at_ - now);
        return unavailable(last_error_ + " (reconnecting in " +
                           std::to_string(in.count()) + "ms)");
      }
      ++open_;
      lk.unlock();
      auto c = PgConn::connect(
          params_, where_,
          deadline.own_until(Clock::now() + options_.connect_timeout));
      lk.lock();
      if (!c.ok()) {
        --open_;
        // A connect cut short by the caller's deadline says nothing about
        // the server: no back-off for the other callers.
        if (c.error().code() != Errc::timeout) {
          backoff_ = backoff_.count() == 0
                         ? milliseconds{50}
                         : std::min(backoff_ * 2, milliseconds{2000});
          retry_at_ = Clock::now() + backoff_;
          last_error_ = c.error().message();
        }
        cv_.notify_one();
        return std::move(c).error();
      }
      backoff_ = milliseconds{0};
      retry_at_ = TimePoint{};
      return Handle(this, std::move(*c));
    }
    // Woken by put() (a connection came back or was dropped).
    const bool freed = wait_until_steady(cv_, lk, deadline.at(), [&] {
      return !idle_.empty() || open_ < options_.max_open;
    });
    if (!freed) {
      return out_of_time(deadline, "no free connection to postgres " + where_ +
                                       " (MaxOpenConnections " +
                                       std::to_string(options_.max_open) +
                                       " in use)");
    }
  }
}

void Pool::put(std::unique_ptr<PgConn> c) {
  std::deque<std::unique_ptr<PgConn>> dropped;
  {
    std::lock_guard<std::mutex> lk(mu_);
    const TimePoint now = Clock::now();
    if (c->broken() && !c->server_lost()) {
      // Abandoned at the caller's deadline with a reply outstanding: only
      // this one is closed; the server may well be fine.
      --open_;
      dropped.push_back(std::move(c));
    } else if (c->broken()) {
      // The server most likely went away: its idle siblings are dead too.
      --open_;
      open_ -= static_cast<int>(idle_.size());
      dropped.swap(idle_);
      dropped.push_back(std::move(c));
    } else if (static_cast<int>(idle_.size()) >= options_.max_idle ||
               expired(*c, now)) {
      --open_;
      dropped.push_back(std::move(c));
    } else {
      idle_.push_back(std::move(c));
    }
    cv_.notify_all();
  }
  // `dropped` closes its connections here, outside the lock.
}

Result<std::unique_ptr<PgConn>> Pool::open_dedicated(Deadline deadline) {
  return PgConn::connect(
      params_, where_,
      deadline.own_until(Clock::now() + options_.connect_timeout));
}

}  // namespace baton::store::pg
