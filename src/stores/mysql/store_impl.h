// stores/mysql/store_impl.h — the mysql:// Store class, shared by
// mysql_store.cc (single-name operations, waiting) and store_more.cc
// (acquire_multi, counters, the factory). Internal to the store.
//
// Thread safety: MysqlStore is safe for concurrent use (Store contract).
#ifndef BATON_STORES_MYSQL_STORE_IMPL_H_
#define BATON_STORES_MYSQL_STORE_IMPL_H_

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <thread>
#include <utility>

#include "core/request.h"
#include "core/validate.h"
#include "stores/busy_names.h"
#include "stores/call_deadline.h"
#include "stores/mysql/doorbell.h"
#include "stores/mysql/mysql_store.h"
#include "stores/mysql/state.h"

namespace baton::store::my_impl {

using my::Clock;
using my::NameState;
using my::TimePoint;
using my::Tx;

constexpr long long kMaxDbWaitMs = 24LL * 3600 * 1000;

inline TimePoint end_of(milliseconds wait) {
  if (core::is_forever(wait)) return TimePoint::max();
  return Clock::now() + wait;
}

inline long long ms_left(TimePoint end) {
  if (end == TimePoint::max()) return kMaxDbWaitMs;
  const auto left = std::chrono::ceil<milliseconds>(end - Clock::now()).count();
  return std::clamp<long long>(left, 0, kMaxDbWaitMs);
}

inline void jitter_sleep(int attempt) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  std::uniform_int_distribution<int> d(1, 2 + std::min(attempt, 8) * 3);
  std::this_thread::sleep_until(
      cap_to_call_deadline(Clock::now() + milliseconds{d(rng)}));
}

// In-process wake-ups, shared by every store of this process on the same
// tables (a process often opens several clients): a release or withdrawal
// rings, and the waiters look again at once.
struct Bell {
  std::mutex mu;
  std::condition_variable cv;
  std::uint64_t gen = 0;  // guarded by mu
};

std::shared_ptr<Bell> bell_for(const std::string& key);

// What one acquire pass answered.
struct Pass {
  std::optional<Grant> grant;
  int position = 0;                      // queued: place in line
  std::optional<my::BellTarget> target;  // queued: whose doorbell to wait on
};

// Process-wide: the doorbell names this process's stores hold (a waiter
// whose target is one of them naps on the Bell instead, which the release
// or withdrawal in this process rings as soon: no server round trip).
void doorbell_mark(const std::string& name, bool held);
bool doorbell_local(const std::string& name);

// A request's doorbell (stores/mysql/doorbell.h): a connection of its own
// holding GET_LOCK(name) once held(). Takes one of the store's
// max_doorbells slots for its lifetime.
struct Doorbell {
  std::unique_ptr<my::Conn> conn;
  std::string name;
  bool tried = false;  // GET_LOCK(name, 0) has run on conn
  std::atomic<int>* slots = nullptr;

  Doorbell() = default;
  Doorbell(Doorbell&& o) noexcept { *this = std::move(o); }
  Doorbell& operator=(Doorbell&& o) noexcept {
    if (this != &o) {
      set_held(false);
      if (slots != nullptr) slots->fetch_sub(1);
      conn = std::move(o.conn);
      name = std::move(o.name);
      tried = o.tried;
      held_ = std::exchange(o.held_, false);
      slots = std::exchange(o.slots, nullptr);
    }
    return *this;
  }
  ~Doorbell() {
    set_held(false);
    if (slots != nullptr) slots->fetch_sub(1);
  }
  bool held() const { return held_; }
  void set_held(bool h) {
    if (h != held_) doorbell_mark(name, h);
    held_ = h;
  }
  bool usable() const { return conn != nullptr && !conn->broken(); }
  // After a failed round trip on conn: a broken connection is gone, and
  // the server let go of its locks with it.
  void check() {
    if (conn != nullptr && conn->broken()) {
      conn.reset();
      set_held(false);
    }
  }

 private:
  bool held_ = false;  // GET_LOCK(name, 0) answered 1
};

// What a transaction does with a doorbell on the connection it runs on.
enum class BellOp { none, take, let_go };

class MysqlStore final : public Store {
 public:
  MysqlStore(my::StoreOptions o, my::ConnParams params, std::string where,
             std::string safe_url)
      : o_(std::move(o)),
        params_(params),
        safe_url_(std::move(safe_url)),
        pool_(std::move(params), where, o_.max_idle),
        bell_(bell_for(where + "/" + o_.prefix)),
        where_(where) {}

  Status open() {
    const TimePoint deadline = cap_to_call_deadline(
        Clock::now() + o_.connect_timeout + o_.request_timeout);
    auto c = pool_.get(deadline);
    if (!c.ok()) return std::move(c).error();
    Status st = my::install_schema(**c, o_, params_, deadline);
    if (st.ok()) pool_.put(std::move(*c));
    return st;
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

  // In-process wake-ups (Bell): a release or a withdrawal rings; waiters of
  // other processes re-check on their timer. Timed waits on the system clock,
  // in slices (libfaketime fakes CLOCK_MONOTONIC but not
  // pthread_cond_clockwait).
  std::uint64_t generation() {
    std::lock_guard<std::mutex> lk(bell_->mu);
    return bell_->gen;
  }
  void ring() {
    {
      std::lock_guard<std::mutex> lk(bell_->mu);
      ++bell_->gen;
    }
    bell_->cv.notify_all();
  }
  void nap(TimePoint until, std::uint64_t seen) {
    std::unique_lock<std::mutex> lk(bell_->mu);
    while (bell_->gen == seen) {
      const TimePoint now = Clock::now();
      if (now >= until) return;
      const auto slice =
          std::min<Clock::duration>(until - now, milliseconds{100});
      bell_->cv.wait_until(
          lk,
          std::chrono::system_clock::now() +
              std::chrono::duration_cast<std::chrono::system_clock::duration>(
                  slice));
    }
  }

  TimePoint request_deadline() const {
    return cap_to_call_deadline(Clock::now() + o_.request_timeout);
  }

  milliseconds place_recheck(int place) const {
    thread_local std::mt19937_64 rng{std::random_device{}()};
    const long long hi =
        std::min<long long>(o_.recheck_max.count(), 2LL * place);
    std::uniform_int_distribution<long long> d(std::max(1LL, hi / 2),
                                               std::max(1LL, hi));
    return milliseconds{d(rng)};
  }

  milliseconds recheck(int round) const {
    thread_local std::mt19937_64 rng{std::random_device{}()};
    const long long hi =
        std::min<long long>(o_.recheck_max.count(), 2LL << std::min(round, 10));
    std::uniform_int_distribution<long long> d(std::max(1LL, hi / 2),
                                               std::max(2LL, hi));
    return milliseconds{d(rng)};
  }

  std::string serial_key(const std::string& name) const {
    switch (o_.serialize) {
      case my::Serialize::center:
        return "center_lock";
      case my::Serialize::segments: {
        char buf[32];
        std::snprintf(buf, sizeof buf, "center_lock_%02u",
                      my::crc32(name) % static_cast<unsigned>(o_.segments));
        return buf;
      }
      case my::Serialize::name:
        return "name:" + name;
    }
    return "center_lock";
  }

  // One query outside any transaction (autocommit), with its own
  // connection from the pool.
  Result<std::vector<my::ResultSet>> simple_query(const std::string& sql) {
    const TimePoint deadline = request_deadline();
    auto c = pool_.get(deadline);
    if (!c.ok()) return std::move(c).error();
    auto r = (*c)->query(sql, deadline);
    if (r.ok()) pool_.put(std::move(*c));
    return r;
  }

  // Runs `fn` in one transaction holding the serialization rows of `names`
  // (in key order), with the names' rows read FOR UPDATE; commits what it
  // wrote (also when it returns an error). Deadlocks and lock-wait
  // timeouts are retried here, until the request deadline. With a usable
  // `bell` it runs on the doorbell's connection: BellOp::take takes the
  // doorbell in the first round trip (before the transaction, so before
  // its rows can be seen), BellOp::let_go lets it go right after COMMIT.
  template <typename T, typename F>
  Result<T> transact(const std::vector<std::string>& names, F&& fn,
                     Doorbell* bell = nullptr, BellOp op = BellOp::none) {
    const TimePoint deadline = request_deadline();
    if (bell != nullptr && !bell->usable()) bell = nullptr;
    if (bell == nullptr) op = BellOp::none;
    std::vector<std::string> keys;
    for (const auto& n : names) keys.push_back(serial_key(n));
    std::sort(keys.begin(), keys.end());
    keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
    std::string key_list = "(";
    for (std::size_t i = 0; i < keys.size(); ++i) {
      key_list += (i ? "," : "") + my::hex_literal(keys[i]);
    }
    key_list += ")";
    const std::string body = "START TRANSACTION;SELECT id FROM " + o_.prefix +
                             "serial WHERE id IN " + key_list +
                             " ORDER BY id FOR UPDATE;" +
                             my::load_sql(o_.prefix, names, true);
    for (int attempt = 0;; ++attempt) {
      const std::size_t skip = op == BellOp::take ? 1 : 0;
      const std::string head =
          (skip ? "SELECT GET_LOCK('" + bell->name + "', 0);" : std::string()) +
          body;
      if (attempt > 0) {
        if (Clock::now() >= deadline) {
          return Error(Errc::unavailable,
                       "mysql " + pool_.where() +
                           ": gave up after repeated deadlocks or lock "
                           "wait timeouts");
        }
        jitter_sleep(attempt);
      }
      std::unique_ptr<my::Conn> owned;
      if (bell == nullptr) {
        auto c = pool_.get(deadline);
        if (!c.ok()) return std::move(c).error();
        owned = std::move(*c);
      }
      my::Conn& conn = owned ? *owned : *bell->conn;
      // A healthy pooled connection goes back; a doorbell's stays with it.
      auto done_with = [&] {
        if (owned) {
          pool_.put(std::move(owned));
        } else {
          bell->check();
        }
      };
      my::DbError db;
      auto r = conn.query(head, deadline, &db);
      if (!r.ok()) {
        if (conn.broken()) {
          done_with();
          if (!owned && bell != nullptr && !bell->usable()) {
            // The doorbell's connection died (a server restart while the
            // lease was held, say): nothing was written, and its locks
            // went with it. Once more on a pooled connection.
            bell = nullptr;
            op = BellOp::none;
            continue;
          }
          return std::move(r).error();
        }
        if (skip) bell->tried = true;  // the GET_LOCK ran (recursively)
        (void)conn.query("ROLLBACK", deadline);
        done_with();
        if (my::retryable(db.code)) continue;
        return std::move(r).error();
      }
      if (skip) {
        bell->tried = true;
        bell->set_held((*r)[0].at(0, 0) == "1");
      }
      if ((*r)[1 + skip].rows.size() < keys.size()) {
        // Serialization rows are created on first use, in their own
        // transaction (no lock is held across it).
        std::string ins =
            "ROLLBACK;INSERT IGNORE INTO " + o_.prefix + "serial (id) VALUES ";
        for (std::size_t i = 0; i < keys.size(); ++i) {
          ins += (i ? ",(" : "(") + my::hex_literal(keys[i]) + ")";
        }
        auto ir = conn.query(ins, deadline, &db);
        if (!ir.ok() && conn.broken()) {
          done_with();
          return std::move(ir).error();
        }
        done_with();
        if (bell != nullptr && !bell->usable()) bell = nullptr;
        continue;
      }
      std::int64_t now = 0;
      std::map<std::string, my::RowExtra> extra;
      auto state = my::parse_state(*r, 2 + skip, names, &now, &extra);
      Tx tx(o_.prefix, sqlstep::Dialect::mysql, std::move(state), now);
      tx.set_fencing_column("high_fencing");
      my::spill(tx, o_.prefix, extra);
      Result<T> out = fn(tx);
      my::count_others(tx, o_.prefix, extra);
      auto done =
          conn.query(tx.writes() + "COMMIT" +
                         (op == BellOp::let_go ? ";DO RELEASE_ALL_LOCKS()"
                                               : std::string()),
                     deadline, &db);
      if (!done.ok()) {
        if (conn.broken()) {
          done_with();
          return std::move(done).error();
        }
        (void)conn.query("ROLLBACK", deadline);
        done_with();
        if (my::retryable(db.code)) continue;
        return std::move(done).error();
      }
      if (op == BellOp::let_go) {
        bell->tried = false;
        bell->set_held(false);
      }
      done_with();
      return out;
    }
  }

  // One acquire pass in `mode`; *arrival is set on the first pass. With a
  // `bell` not yet tried, the pass takes it.
  Result<Pass> pass(const AcquireSpec& spec, const std::string& token,
                    Mode mode, long long wait_ms, std::int64_t* arrival,
                    Doorbell* bell = nullptr);

  // The fast paths (fast_path.cc): the lease, or nullopt when the full
  // transaction must decide (the lock is held, queued for, not plain, or
  // the outcome is unknown). fast_acquire takes `bell` in its round trip.
  bool fast_path_for(const AcquireSpec& spec) const;
  std::optional<Grant> fast_acquire(const AcquireSpec& spec,
                                    const std::string& token, Doorbell* bell);
  std::optional<Grant> fast_extend(const std::string& name,
                                   const std::string& token, milliseconds ttl);
  std::optional<ReleaseResult> fast_release(const std::string& name,
                                            const std::string& token,
                                            Doorbell& bell);

  // The waiting part of acquire (wait > 0) with `bell` (maybe empty).
  Result<Grant> wait_for(const AcquireSpec& spec, const std::string& token,
                         milliseconds wait, Doorbell& bell);

  // Doorbells (doorbell_wait.cc). A new doorbell for (name, token) when
  // doorbell=on, a slot is free, the lease has none yet and a connection
  // can be had; else an empty one (the waiter then uses its timer).
  Doorbell new_doorbell(const std::string& name, const std::string& token);
  // After acquire: a granted lease keeps its doorbell until its release
  // (or its expiry, swept); anything else lets it go.
  void settle(Doorbell bell, bool granted, const std::string& name,
              const std::string& token, milliseconds ttl);
  // The doorbell a held lease keeps (empty if none).
  Doorbell held_doorbell(const std::string& name, const std::string& token);
  // RELEASE_ALL_LOCKS on the doorbell's connection, which then returns to
  // the pool (bounded by the call deadline; closed if it fails).
  void let_go(Doorbell bell);
  // Lets go of the doorbells of leases past their expiry.
  void sweep_doorbells();
  void touch_doorbell(const std::string& name, const std::string& token,
                      milliseconds ttl);
  // Blocks in GET_LOCK on `target`'s doorbell until it is let go (1), until
  // `until` (0) or on an error (-1, with the doorbell dropped if its
  // connection broke).
  int ring_wait(Doorbell& bell, const std::string& target, TimePoint until);
  milliseconds long_recheck() const;

  // A waiter's non-locking look: its grant, or position > 0 when a locking
  // pass could change nothing now (it is queued, its heartbeat is fresh,
  // the lock is full of live leases and nothing is due), else position 0.
  Result<Pass> peek(const std::string& name, const std::string& token,
                    std::int64_t arrival);

  Result<std::vector<LockInfo>> infos(const std::vector<std::string>& names);

  Result<std::int64_t> counter(const char* op, std::string_view name,
                               std::int64_t n);

  const my::StoreOptions o_;
  const my::ConnParams params_;
  const std::string safe_url_;
  my::Pool pool_;
  const std::shared_ptr<Bell> bell_;
  const std::string where_;
  BusyNames busy_;  // names to send straight to the transaction

  // Doorbells of held leases by name + '\0' + token, with the local time
  // after which the lease has surely expired.
  struct Kept {
    Doorbell bell;
    TimePoint until;
  };
  std::atomic<int> slots_{0};
  std::mutex kept_mu_;
  std::map<std::string, Kept> kept_;  // guarded by kept_mu_

  friend class MultiPass;
};

}  // namespace baton::store::my_impl

#endif  // BATON_STORES_MYSQL_STORE_IMPL_H_
