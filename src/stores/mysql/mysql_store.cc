// stores/mysql/mysql_store.cc — Store on MySQL/MariaDB: one InnoDB
// transaction per operation under seed 003's serialization rows; waiting by
// short, growing, jittered re-checks.
#include "stores/mysql/mysql_store.h"

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <thread>

#include "core/request.h"
#include "core/validate.h"
#include "stores/call_deadline.h"
#include "stores/mysql/state.h"

namespace baton::store {
namespace {

using my::Clock;
using my::NameState;
using my::TimePoint;
using my::Tx;

constexpr long long kMaxDbWaitMs = 24LL * 3600 * 1000;

TimePoint end_of(milliseconds wait) {
  if (core::is_forever(wait)) return TimePoint::max();
  return Clock::now() + wait;
}

long long ms_left(TimePoint end) {
  if (end == TimePoint::max()) return kMaxDbWaitMs;
  const auto left = std::chrono::ceil<milliseconds>(end - Clock::now()).count();
  return std::clamp<long long>(left, 0, kMaxDbWaitMs);
}

void jitter_sleep(int attempt) {
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

std::shared_ptr<Bell> bell_for(const std::string& key) {
  static std::mutex mu;
  static auto* bells = new std::map<std::string, std::weak_ptr<Bell>>();
  std::lock_guard<std::mutex> lk(mu);
  auto& w = (*bells)[key];
  auto b = w.lock();
  if (!b) {
    b = std::make_shared<Bell>();
    w = b;
  }
  return b;
}

// What one acquire pass answered.
struct Pass {
  std::optional<Grant> grant;
  int position = 0;  // queued: place in line
};

class MysqlStore final : public Store {
 public:
  MysqlStore(my::StoreOptions o, my::ConnParams params, std::string where,
             std::string safe_url)
      : o_(std::move(o)),
        params_(params),
        safe_url_(std::move(safe_url)),
        pool_(std::move(params), where, o_.max_idle),
        bell_(bell_for(where + "/" + o_.prefix)) {}

  Status open() {
    const TimePoint deadline = cap_to_call_deadline(
        Clock::now() + o_.connect_timeout + o_.request_timeout);
    auto c = pool_.get(deadline);
    if (!c.ok()) return std::move(c).error();
    Status st = my::install_schema(**c, o_, params_, deadline);
    if (st.ok()) pool_.put(std::move(*c));
    return st;
  }

  Result<Grant> acquire(const AcquireSpec& spec, milliseconds wait) override {
    if (Status st = core::validate(spec, wait); !st.ok()) return st.error();
    const std::string token = spec.token.to_string();
    if (wait <= milliseconds::zero()) {
      std::int64_t arrival = 0;
      auto r = pass(spec, token, Mode::try_, 0, &arrival);
      if (!r.ok()) return std::move(r).error();
      return *r->grant;
    }
    const TimePoint end = end_of(wait);
    std::int64_t arrival = 0;
    std::uint64_t seen = generation();
    auto r = pass(spec, token, Mode::wait, ms_left(end), &arrival);
    int round = 0;
    int place = r.ok() ? r->position : 0;
    for (;;) {
      if (r.ok() && r->grant) return *r->grant;
      if (!r.ok() && r.error().code() != Errc::unavailable) {
        return std::move(r).error();
      }
      if (Clock::now() >= end || call_deadline_passed()) break;
      // The releaser's transaction grants the head of the queue, so a
      // waiter looks again after about 1-2 ms per place in line (it moves
      // up one place per handoff), at most recheck_max.
      const milliseconds delay =
          place > 0 ? place_recheck(place) : recheck(round++);
      // Only the first two in line answer the bell (no herd of re-checks
      // after every release); the rest keep their timers.
      const TimePoint until =
          cap_to_call_deadline(std::min(end, Clock::now() + delay));
      if (place == 0 || place <= 2) {
        nap(until, seen);
      } else {
        std::this_thread::sleep_until(until);
      }
      if (Clock::now() >= end) break;
      // A non-locking look first: granted meanwhile, or nothing to do.
      seen = generation();
      auto light = peek(spec.name, token, arrival);
      if (light.ok() && light->grant) return *light->grant;
      if (light.ok() && light->position > 0) {
        place = light->position;
        continue;
      }
      r = pass(spec, token, Mode::wait, ms_left(end), &arrival);
      place = r.ok() ? r->position : 0;
    }
    Result<Pass> last = Error(Errc::internal, "not run");
    for (int attempt = 0; attempt < 4; ++attempt) {
      if (attempt > 0) jitter_sleep(attempt * 4);
      last = pass(spec, token, Mode::withdraw, 0, &arrival);
      if (last.ok() || last.error().code() != Errc::unavailable) break;
    }
    ring();
    if (last.ok() && last->grant) return *last->grant;
    if (!last.ok() && last.error().code() != Errc::timeout) {
      return std::move(last).error();
    }
    return Error(Errc::timeout, "lock " + core::quote_name(spec.name) +
                                    " was not granted within " +
                                    std::to_string(wait.count()) + "ms");
  }

  Result<Grant> extend(std::string_view name_v, const OwnerToken& token,
                       milliseconds ttl) override {
    if (Status st = core::validate_name(name_v); !st.ok()) return st.error();
    if (Status st = core::validate_ttl(ttl); !st.ok()) return st.error();
    const std::string name(name_v), t = token.to_string();
    return transact<Grant>({name}, [&](Tx& tx) -> Result<Grant> {
      tx.schedule(name);
      NameState& s = tx.at(name);
      for (auto& h : s.holders) {
        if (!h.has(t)) continue;
        tx.extend(h, ttl.count());
        return tx.to_grant(h, s.capacity, tx.now());
      }
      return Error(Errc::lock_lost,
                   "lock " + core::quote_name(name) +
                       " is not held with this owner token (expired, "
                       "released or never granted)");
    });
  }

  Result<ReleaseResult> release(std::string_view name_v,
                                const OwnerToken& token) override {
    if (Status st = core::validate_name(name_v); !st.ok()) return st.error();
    const std::string name(name_v), t = token.to_string();
    auto res =
        transact<ReleaseResult>({name}, [&](Tx& tx) -> Result<ReleaseResult> {
          tx.expire(name);
          ReleaseResult out;
          const int left = tx.release_hold(name, t);
          if (left >= 0) {
            out.was_held = true;
            out.holds_left = static_cast<std::uint32_t>(left);
          } else if (auto* q = tx.at(name).request_of(t);
                     q != nullptr && !q->withdrawn) {
            tx.withdraw(name, *q);
          }
          tx.pump(name);
          return out;
        });
    ring();
    return res;
  }

  Result<LockInfo> describe(std::string_view name) override {
    if (Status st = core::validate_name(name); !st.ok()) return st.error();
    auto r = infos({std::string(name)});
    if (!r.ok()) return std::move(r).error();
    return r->front();
  }

  Result<std::vector<LockInfo>> list(std::string_view prefix,
                                     std::size_t limit) override {
    if (prefix.find('\0') != std::string_view::npos) {
      return Error(Errc::invalid_argument, "name prefix contains a NUL byte");
    }
    if (limit == 0) return std::vector<LockInfo>{};
    const std::size_t capped = std::min<std::size_t>(limit, 100'000);
    const std::string p = my::hex_literal(prefix);
    const std::string len = std::to_string(prefix.size());
    const std::string now =
        "TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6))";
    const std::string sql =
        "SELECT name FROM " + o_.prefix + "holders WHERE LEFT(name, " + len +
        ") = " + p + " AND expires_us > " + now + " UNION SELECT name FROM " +
        o_.prefix + "queue WHERE LEFT(name, " + len + ") = " + p +
        " AND withdrawn = 0 AND deadline_us > " + now +
        " AND (heartbeat_us IS NULL OR heartbeat_us > " + now +
        ") ORDER BY name LIMIT " + std::to_string(capped);
    auto rs = simple_query(sql);
    if (!rs.ok()) return std::move(rs).error();
    std::vector<std::string> names;
    for (std::size_t i = 0; i < rs->front().rows.size(); ++i) {
      names.push_back(rs->front().at(i, 0));
    }
    if (names.empty()) return std::vector<LockInfo>{};
    auto r = infos(names);
    if (!r.ok()) return std::move(r).error();
    // Only those still in use.
    std::vector<LockInfo> out;
    for (auto& i : *r) {
      if (!i.holders.empty() || !i.waiters.empty()) out.push_back(std::move(i));
    }
    return out;
  }

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

  std::string safe_url() const override { return safe_url_; }

 private:
  enum class Mode { try_, wait, withdraw };

  // In-process wake-ups: a release (or a withdrawal) through this store
  // rings, and its waiters re-check at once; waiters of other processes
  // re-check on their timer. Timed waits on the system clock, in slices
  // (libfaketime fakes CLOCK_MONOTONIC but not pthread_cond_clockwait).
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
  // timeouts are retried here, until the request deadline.
  template <typename T, typename F>
  Result<T> transact(const std::vector<std::string>& names, F&& fn) {
    const TimePoint deadline = request_deadline();
    std::vector<std::string> keys;
    for (const auto& n : names) keys.push_back(serial_key(n));
    std::sort(keys.begin(), keys.end());
    keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
    std::string key_list = "(";
    for (std::size_t i = 0; i < keys.size(); ++i) {
      key_list += (i ? "," : "") + my::hex_literal(keys[i]);
    }
    key_list += ")";
    const std::string head = "START TRANSACTION;SELECT id FROM " + o_.prefix +
                             "serial WHERE id IN " + key_list +
                             " ORDER BY id FOR UPDATE;" +
                             my::load_sql(o_.prefix, names, true);
    for (int attempt = 0;; ++attempt) {
      if (attempt > 0) {
        if (Clock::now() >= deadline) {
          return Error(Errc::unavailable,
                       "mysql " + pool_.where() +
                           ": gave up after repeated deadlocks or lock "
                           "wait timeouts");
        }
        jitter_sleep(attempt);
      }
      auto c = pool_.get(deadline);
      if (!c.ok()) return std::move(c).error();
      my::Conn& conn = **c;
      my::DbError db;
      auto r = conn.query(head, deadline, &db);
      if (!r.ok()) {
        if (conn.broken()) return std::move(r).error();
        (void)conn.query("ROLLBACK", deadline);
        pool_.put(std::move(*c));
        if (my::retryable(db.code)) continue;
        return std::move(r).error();
      }
      if ((*r)[1].rows.size() < keys.size()) {
        // Serialization rows are created on first use, in their own
        // transaction (no lock is held across it).
        std::string ins =
            "ROLLBACK;INSERT IGNORE INTO " + o_.prefix + "serial (id) VALUES ";
        for (std::size_t i = 0; i < keys.size(); ++i) {
          ins += (i ? ",(" : "(") + my::hex_literal(keys[i]) + ")";
        }
        auto ir = conn.query(ins, deadline, &db);
        if (!ir.ok() && conn.broken()) return std::move(ir).error();
        pool_.put(std::move(*c));
        continue;
      }
      std::int64_t now = 0;
      auto state = my::parse_state(*r, 2, names, &now);
      Tx tx(o_.prefix, std::move(state), now);
      Result<T> out = fn(tx);
      auto done = conn.query(tx.writes() + "COMMIT", deadline, &db);
      if (!done.ok()) {
        if (conn.broken()) return std::move(done).error();
        (void)conn.query("ROLLBACK", deadline);
        pool_.put(std::move(*c));
        if (my::retryable(db.code)) continue;
        return std::move(done).error();
      }
      pool_.put(std::move(*c));
      return out;
    }
  }

  // One acquire pass in `mode`; *arrival is set on the first pass.
  Result<Pass> pass(const AcquireSpec& spec, const std::string& token,
                    Mode mode, long long wait_ms, std::int64_t* arrival) {
    const std::string& name = spec.name;
    const int cap = static_cast<int>(spec.capacity);
    return transact<Pass>({name}, [&](Tx& tx) -> Result<Pass> {
      if (*arrival == 0) *arrival = tx.now();
      tx.schedule(name);
      NameState& s = tx.at(name);
      if (s.active(tx.now()) && s.capacity != cap) {
        return Error(Errc::invalid_argument,
                     "lock " + core::quote_name(name) + " has capacity " +
                         std::to_string(s.capacity) + "; this request asks " +
                         std::to_string(cap));
      }
      if (const my::Holder* h = s.holder_of(token)) {
        return Pass{tx.to_grant(*h, s.capacity, *arrival), 0};
      }
      if (my::Request* q = s.request_of(token)) {
        if (q->withdrawn) {
          tx.remove_request(name, q->id);
          return Error(Errc::not_acquired,
                       "the request for lock " + core::quote_name(name) +
                           " was withdrawn while it waited");
        }
        if (mode != Mode::wait || wait_ms <= 0) {
          tx.remove_request(name, q->id);
          tx.pump(name);
          return Error(Errc::timeout, "wait deadline for lock " +
                                          core::quote_name(name) + " passed");
        }
        if (q->kind == 0 &&
            *q->heartbeat_us <
                tx.now() + o_.waiter_timeout.count() * 1000 / 2) {
          tx.refresh(*q, tx.now() + wait_ms * 1000,
                     tx.now() + o_.waiter_timeout.count() * 1000);
        }
        int pos = 0;
        for (const auto& x : s.queue) {
          if (!x.withdrawn) ++pos;
          if (&x == q) break;
        }
        return Pass{std::nullopt, std::max(pos, 1)};
      }
      if (!spec.reentrancy_key.empty()) {
        for (auto& h : s.holders) {
          if (h.rkey != spec.reentrancy_key) continue;
          if (h.holds >= 2147483647) {
            return Error(Errc::invalid_argument,
                         "lock " + core::quote_name(name) +
                             " has reached the maximum hold count");
          }
          tx.join(h, token, spec.ttl.count());
          return Pass{tx.to_grant(h, s.capacity, *arrival), 0};
        }
      }
      if (s.waiting(tx.now()) == 0 && s.live_holders(tx.now()) < cap) {
        auto& h = tx.grant(name, token, spec.ttl.count(), cap, spec.label,
                           spec.reentrancy_key);
        return Pass{tx.to_grant(h, cap, *arrival), 0};
      }
      if (mode == Mode::try_) {
        std::string why;
        if (s.live_holders(tx.now()) >= s.capacity) {
          why = " is held (" + std::to_string(s.live_holders(tx.now())) +
                " of " + std::to_string(s.capacity) + ")";
        } else {
          why = " has " + std::to_string(s.waiting(tx.now())) +
                " waiters ahead of this request";
        }
        Error e(Errc::not_acquired, "lock " + core::quote_name(name) + why);
        auto hs = tx.holder_infos(name);
        if (!hs.empty()) e.with_holders(std::move(hs));
        return e;
      }
      if (mode == Mode::withdraw || wait_ms <= 0) {
        return Error(Errc::timeout, "wait deadline for lock " +
                                        core::quote_name(name) +
                                        " passed before it was free");
      }
      tx.enqueue(name, token, 0, spec.ttl.count(), cap, spec.label,
                 spec.reentrancy_key, tx.now() + wait_ms * 1000,
                 tx.now() + o_.waiter_timeout.count() * 1000);
      return Pass{std::nullopt, s.waiting(tx.now())};
    });
  }

  // A waiter's non-locking look: its grant, or position > 0 when a locking
  // pass could change nothing now (it is queued, its heartbeat is fresh,
  // the lock is full of live leases and nothing is due), else position 0.
  Result<Pass> peek(const std::string& name, const std::string& token,
                    std::int64_t arrival) {
    auto r = simple_query(my::load_sql(o_.prefix, {name}, false));
    if (!r.ok()) return std::move(r).error();
    std::int64_t now = 0;
    auto st = my::parse_state(*r, 0, {name}, &now);
    NameState& s = st[name];
    for (const auto& h : s.holders) {
      if (h.has(token) && h.expires_us > now) {
        Tx tx(o_.prefix, {}, now);
        return Pass{tx.to_grant(h, s.capacity, arrival), 0};
      }
    }
    Pass p;
    const my::Request* mine = s.request_of(token);
    if (mine == nullptr || mine->withdrawn || !mine->live(now) ||
        mine->kind != 0 ||
        *mine->heartbeat_us < now + o_.waiter_timeout.count() * 1000 / 2) {
      return p;
    }
    for (const auto& h : s.holders) {
      if (h.expires_us <= now) return p;
    }
    for (const auto& q : s.queue) {
      if (!q.live(now)) return p;
    }
    if (static_cast<int>(s.holders.size()) < s.capacity) return p;
    for (const auto& q : s.queue) {
      if (!q.withdrawn) ++p.position;
      if (&q == mine) break;
    }
    return p;
  }

  Result<std::vector<LockInfo>> infos(const std::vector<std::string>& names) {
    auto r = simple_query(my::load_sql(o_.prefix, names, false));
    if (!r.ok()) return std::move(r).error();
    std::int64_t now = 0;
    auto st = my::parse_state(*r, 0, names, &now);
    std::vector<LockInfo> out;
    for (const auto& n : names) {
      const NameState& s = st[n];
      LockInfo info;
      info.name = n;
      info.last_fencing_token = static_cast<std::uint64_t>(s.last_fencing);
      info.capacity =
          s.active(now) ? static_cast<std::uint32_t>(s.capacity) : 1u;
      for (const auto& h : s.holders) {
        if (h.expires_us <= now) continue;
        info.holders.push_back({h.label, static_cast<std::uint64_t>(h.fencing),
                                milliseconds{(h.expires_us - now) / 1000},
                                static_cast<std::uint32_t>(h.holds)});
      }
      for (const auto& q : s.queue) {
        if (q.withdrawn || !q.live(now)) continue;
        info.waiters.push_back(
            {q.label,
             milliseconds{std::max<std::int64_t>(0, now - q.arrived_us) / 1000},
             q.kind == 2});
      }
      out.push_back(std::move(info));
    }
    return out;
  }

  Result<std::int64_t> counter(const char* op, std::string_view name,
                               std::int64_t n) {
    if (Status st = core::validate_name(name, "counter name"); !st.ok()) {
      return st.error();
    }
    const std::string t = o_.prefix + "counters";
    const std::string k = my::hex_literal(name);
    const std::string op_s = op;
    std::string sql;
    if (op_s == "get") {
      sql = "SELECT value FROM " + t + " WHERE name = " + k;
    } else if (op_s == "add") {
      // One statement: the row is created or changed atomically.
      sql = "START TRANSACTION;INSERT INTO " + t + " (name, value) VALUES (" +
            k + ", " + std::to_string(n) +
            ") ON DUPLICATE KEY UPDATE value = value + VALUES(value);"
            "SELECT value FROM " +
            t + " WHERE name = " + k + ";COMMIT";
    } else {
      // Seed 003's guarded decrement: never below zero.
      sql = "START TRANSACTION;UPDATE " + t + " SET value = value - " +
            std::to_string(n) + " WHERE name = " + k +
            " AND value >= " + std::to_string(n) + ";SELECT value FROM " + t +
            " WHERE name = " + k + ";COMMIT";
    }
    const TimePoint deadline = request_deadline();
    for (int attempt = 0;; ++attempt) {
      auto c = pool_.get(deadline);
      if (!c.ok()) return std::move(c).error();
      my::DbError db;
      auto r = (*c)->query(sql, deadline, &db);
      if (!r.ok()) {
        if (!(*c)->broken()) {
          (void)(*c)->query("ROLLBACK", deadline);
          pool_.put(std::move(*c));
        }
        if (my::retryable(db.code) && Clock::now() < deadline) {
          jitter_sleep(attempt);
          continue;
        }
        if (db.code == 1690 || db.code == 1264) {  // out of range
          return Error(Errc::invalid_argument,
                       "counter " + core::quote_name(name) + ": adding " +
                           std::to_string(n) + " would overflow");
        }
        return std::move(r).error();
      }
      pool_.put(std::move(*c));
      // get: one result; add/take: START, the change, SELECT, COMMIT.
      const my::ResultSet& last = r->size() == 1 ? r->front() : (*r)[2];
      const std::int64_t v = last.rows.empty() ? 0 : last.num(0, 0);
      if (op_s == "take" && (*r)[1].affected == 0) {
        return Error(Errc::not_acquired, "counter " + core::quote_name(name) +
                                             " is " + std::to_string(v) +
                                             "; cannot take " +
                                             std::to_string(n));
      }
      return v;
    }
  }

  const my::StoreOptions o_;
  const my::ConnParams params_;
  const std::string safe_url_;
  my::Pool pool_;
  const std::shared_ptr<Bell> bell_;

  friend class MultiPass;
};

}  // namespace

namespace {

Result<std::vector<Grant>> MysqlStore::acquire_multi(const MultiSpec& spec,
                                                     milliseconds wait) {
  if (Status st = core::validate(spec, wait); !st.ok()) return st.error();
  const bool all = spec.all_or_nothing;
  const bool waits = wait > milliseconds::zero();
  const TimePoint end = end_of(wait);
  std::int64_t arrival = 0;
  auto step = [&](my::MultiMode mode, long long wait_ms) {
    return transact<my::MultiOutcome>(
        spec.names, [&](Tx& tx) -> Result<my::MultiOutcome> {
          if (arrival == 0) arrival = tx.now();
          return my::multi_step(tx, spec, mode, wait_ms,
                                o_.waiter_timeout.count() * 1000, arrival);
        });
  };
  auto done = [&](const my::MultiOutcome& m) {
    return all ? m.grants.size() == spec.names.size()
               : (!m.grants.empty() || m.pending == 0);
  };
  std::uint64_t seen = generation();
  auto r = step(all && !waits ? my::MultiMode::try_ : my::MultiMode::wait,
                ms_left(end));
  int round = 0;
  for (;;) {
    if (r.ok() && (done(*r) || !waits)) return r->grants;
    if (!r.ok() && r.error().code() != Errc::unavailable) {
      return std::move(r).error();
    }
    if (Clock::now() >= end || call_deadline_passed()) break;
    nap(cap_to_call_deadline(std::min(end, Clock::now() + recheck(round++))),
        seen);
    if (Clock::now() >= end && !all) break;
    seen = generation();
    r = step(my::MultiMode::wait, std::max<long long>(ms_left(end), 1));
  }
  if (!all) {
    auto again = step(my::MultiMode::wait, 1);
    if (!again.ok()) return std::move(again).error();
    return again->grants;
  }
  Result<my::MultiOutcome> last = Error(Errc::internal, "not run");
  for (int attempt = 0; attempt < 4; ++attempt) {
    if (attempt > 0) jitter_sleep(attempt * 4);
    last = step(my::MultiMode::withdraw, 0);
    if (last.ok() || last.error().code() != Errc::unavailable) break;
  }
  ring();
  if (last.ok() && last->grants.size() == spec.names.size()) {
    return last->grants;
  }
  if (!last.ok() && last.error().code() != Errc::timeout) {
    return std::move(last).error();
  }
  return Error(Errc::timeout, "not all of the " +
                                  std::to_string(spec.names.size()) +
                                  " locks were granted within " +
                                  std::to_string(wait.count()) + "ms");
}

}  // namespace

Result<std::unique_ptr<Store>> open_mysql_store(const core::Url& url) {
  if (url.scheme != "mysql" && url.scheme != "mariadb") {
    return Error(Errc::invalid_argument,
                 "store URL \"" + url.safe() + "\" is not mysql://");
  }
  my::ConnParams params;
  std::string where;
  auto o = my::parse_options(url, &params, &where);
  if (!o.ok()) return std::move(o).error();
  auto store = std::make_unique<MysqlStore>(std::move(*o), std::move(params),
                                            std::move(where), url.safe());
  if (Status st = store->open(); !st.ok()) return st.error();
  return std::unique_ptr<Store>(std::move(store));
}

}  // namespace baton::store
