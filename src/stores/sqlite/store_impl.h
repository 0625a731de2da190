// stores/sqlite/store_impl.h — the sqlite:// Store class, shared by
// sqlite_store.cc (single-name operations, waiting) and store_more.cc
// (acquire_multi, counters, the factory). Internal to the store.
//
// Thread safety: SqliteStore is safe for concurrent use (Store contract).
#ifndef BATON_STORES_SQLITE_STORE_IMPL_H_
#define BATON_STORES_SQLITE_STORE_IMPL_H_

#include <algorithm>
#include <cstdio>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <thread>

#include "core/request.h"
#include "core/validate.h"
#include "stores/call_deadline.h"
#include "stores/sqlite/bell.h"
#include "stores/sqlite/db.h"
#include "stores/sqlite/schema.h"
#include "stores/sqlite/sqlite_store.h"
#include "stores/sqlite/state.h"

namespace baton::store::sq_impl {

using sq::Clock;
using sq::NameState;
using sq::TimePoint;
using sq::Tx;

constexpr long long kMaxWaitMs = 24LL * 3600 * 1000;
constexpr std::int64_t kNever = std::numeric_limits<std::int64_t>::max();

inline TimePoint end_of(milliseconds wait) {
  if (core::is_forever(wait)) return TimePoint::max();
  return Clock::now() + wait;
}

inline long long ms_left(TimePoint end) {
  if (end == TimePoint::max()) return kMaxWaitMs;
  const auto left = std::chrono::ceil<milliseconds>(end - Clock::now()).count();
  return std::clamp<long long>(left, 0, kMaxWaitMs);
}

inline void jitter_sleep(int attempt) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  std::uniform_int_distribution<int> d(1, 2 + std::min(attempt, 8) * 3);
  std::this_thread::sleep_until(
      cap_to_call_deadline(Clock::now() + milliseconds{d(rng)}));
}

// The steady-clock instant of store time `due_us` (kNever: max()).
inline TimePoint steady_at(std::int64_t due_us) {
  if (due_us == kNever) return TimePoint::max();
  const std::int64_t in_us =
      std::max<std::int64_t>(0, due_us - sq::store_now_us());
  return Clock::now() + std::chrono::microseconds{in_us};
}

// What one acquire pass answered.
struct Pass {
  std::optional<Grant> grant;
  int position = 0;              // queued: place in line
  std::int64_t due_us = kNever;  // store time when a locking pass is due
};

class SqliteStore final : public Store {
 public:
  explicit SqliteStore(sq::StoreOptions o)
      : o_(std::move(o)),
        safe_url_("sqlite://" + o_.path),
        pool_(o_.path, o_.max_idle) {}

  Status open() {
    const TimePoint deadline = request_deadline();
    auto c = std::make_unique<sq::Conn>();
    if (Status st = c->open(o_.path, true, deadline); !st.ok()) return st;
    // The schema transaction too may meet SQLITE_BUSY without the busy
    // handler while other processes set the file up.
    for (int attempt = 0;; ++attempt) {
      Status st = sq::install_schema(*c, o_);
      if (st.ok()) break;
      if (!c->busy_failure() || Clock::now() >= deadline) return st;
      c->retry_nap(attempt);
    }
    pool_.put(std::move(c));
    bell_ = sq::bell_for(o_.path);
    return {};
  }

  Result<Grant> acquire(const AcquireSpec& spec, milliseconds wait) override;

  Result<Grant> extend(std::string_view name_v, const OwnerToken& token,
                       milliseconds ttl) override;

  Result<ReleaseResult> release(std::string_view name_v,
                                const OwnerToken& token) override;

  Result<LockInfo> describe(std::string_view name) override {
    if (Status st = core::validate_name(name); !st.ok()) return st.error();
    auto r = infos({std::string(name)});
    if (!r.ok()) return std::move(r).error();
    return r->front();
  }

  Result<std::vector<LockInfo>> list(std::string_view prefix,
                                     std::size_t limit) override;

  Result<std::vector<Grant>> acquire_multi(const MultiSpec& spec,
                                           milliseconds wait) override;

  Result<std::int64_t> counter_get(std::string_view name) override {
    return counter("get", name, 0);
  }
  Result<std::int64_t> counter_add(std::string_view name,
                                   std::int64_t delta) override {
    return counter("add", name, delta);
  }
  Result<std::int64_t> counter_take(std::string_view name,
                                    std::int64_t n) override {
    if (n < 1) {
      return Error(Errc::invalid_argument,
                   "counter take of " + std::to_string(n) +
                       " is invalid; it must be at least 1");
    }
    return counter("take", name, n);
  }

  bool supports_shared() const override { return true; }

  std::string safe_url() const override { return safe_url_; }

 private:
  using Mode = sqlstep::MultiMode;

  TimePoint request_deadline() const {
    return cap_to_call_deadline(Clock::now() + o_.request_timeout);
  }

  // The fallback re-check: recheck_max/2 .. recheck_max, jittered.
  milliseconds recheck() const {
    thread_local std::mt19937_64 rng{std::random_device{}()};
    const long long hi = std::max<long long>(2, o_.recheck_max.count());
    std::uniform_int_distribution<long long> d(hi / 2, hi);
    return milliseconds{d(rng)};
  }

  // Runs `fn(conn)` in one BEGIN IMMEDIATE transaction and commits (also
  // when fn returns an error: its writes so far are the decision); a
  // failed write or COMMIT rolls everything back.
  template <typename T, typename F>
  Result<T> write_tx(F&& fn) {
    const TimePoint deadline = request_deadline();
    // Rule 7: once the caller's deadline has passed, the answer is
    // timeout (the outcome is known: nothing was written).
    auto late = [&]() -> std::optional<Error> {
      if (!call_deadline_passed()) return std::nullopt;
      return Error(Errc::timeout, "sqlite database \"" + o_.path +
                                      "\": the call's deadline passed while "
                                      "waiting for the write lock");
    };
    if (!bell_->writer.lock_until(deadline)) {
      if (auto e = late()) return *e;
      return Error(Errc::unavailable,
                   "sqlite database \"" + o_.path +
                       "\": this process's other writers held it until the "
                       "request deadline");
    }
    struct Unlock {
      sq::FifoTurn& t;
      ~Unlock() { t.unlock(); }
    } turn{bell_->writer};
    auto c = pool_.get(deadline);
    if (!c.ok()) {
      if (c.error().code() == Errc::unavailable) {
        if (auto e = late()) return *e;
      }
      return std::move(c).error();
    }
    sq::Conn& conn = **c;
    if (Status st = conn.exec("BEGIN IMMEDIATE"); !st.ok()) {
      pool_.put(std::move(*c));
      if (st.error().code() == Errc::unavailable) {
        if (auto e = late()) return *e;
      }
      return st.error();
    }
    std::string writes;
    Result<T> out = fn(conn, &writes);
    Status st = conn.exec(writes + "COMMIT");
    if (!st.ok()) {
      (void)conn.exec("ROLLBACK");
      pool_.put(std::move(*c));
      return st.error();
    }
    pool_.put(std::move(*c));
    return out;
  }

  // The scheduling step on `names` in one write transaction.
  template <typename T, typename F>
  Result<T> transact(const std::vector<std::string>& names, F&& fn) {
    return write_tx<T>([&](sq::Conn& conn, std::string* writes) -> Result<T> {
      auto state = sq::load_state(conn, o_.prefix, names);
      if (!state.ok()) return std::move(state).error();
      // Read under the write lock: store time never goes back between
      // two transactions of any process on this host.
      const std::int64_t now = sq::store_now_us();
      // Store (boot) time + (wall clock now − store time now) = the Unix
      // epoch time a lease's expiry is reported in (core/request.h).
      Tx tx(o_.prefix, sqlstep::Dialect::sqlite, std::move(*state), now,
            sq::wall_now_us() - now);
      Result<T> out = fn(tx);
      *writes = tx.writes();
      return out;
    });
  }

  // The rows of `names` in one read transaction (WAL: never waits for the
  // writer), with the store time of the read.
  Result<std::map<std::string, NameState>> read_state(
      const std::vector<std::string>& names, std::int64_t* now);

  // One acquire pass in `mode`; *arrival is set on the first pass.
  Result<Pass> pass(const AcquireSpec& spec, const std::string& token,
                    Mode mode, long long wait_ms, std::int64_t* arrival);

  // A waiter's non-locking look: its grant, or position > 0 when a locking
  // pass could change nothing now (then due_us says when it could).
  Result<Pass> peek(const std::string& name, const std::string& token,
                    std::int64_t arrival);

  // When a locking pass for `mine` could next change something.
  std::int64_t next_due(const NameState& s, const sq::Request* mine,
                        std::int64_t now) const;

  Result<std::vector<LockInfo>> infos(const std::vector<std::string>& names);

  Result<std::int64_t> counter(const char* op, std::string_view name,
                               std::int64_t n);

  const sq::StoreOptions o_;
  const std::string safe_url_;
  sq::Pool pool_;
  std::shared_ptr<sq::Bell> bell_;
};

}  // namespace baton::store::sq_impl

#endif  // BATON_STORES_SQLITE_STORE_IMPL_H_
