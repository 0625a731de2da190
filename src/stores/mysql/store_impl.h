// stores/mysql/store_impl.h — the mysql:// Store class and its requests,
// shared by the store's .cc files. Internal to the store.
//
// Thread safety: MysqlStore is safe for concurrent use (Store contract); a
// request belongs to one calling thread, interrupt() aside.
#ifndef BATON_STORES_MYSQL_STORE_IMPL_H_
#define BATON_STORES_MYSQL_STORE_IMPL_H_

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>

#include "baton/store.h"
#include "core/jitter.h"
#include "stores/busy_names.h"
#include "stores/mysql/doorbell.h"
#include "stores/mysql/mysql_store.h"
#include "stores/mysql/state.h"
#include "stores/sqlstep/sql_request.h"
#include "stores/sqlstep/sql_store.h"

namespace baton::store::my_impl {

using my::Tx;
using sqlstep::SteadyTime;

// In-process wake-ups, shared by every store of this process on the same
// tables (a process often opens several clients): a release or withdrawal
// rings, and the waiters look again at once.
std::shared_ptr<sqlstep::LocalBell> bell_for(const std::string& key);

// Process-wide: the doorbell names this process's stores hold (a waiter
// whose target is one of them naps on the LocalBell instead, which the
// release or withdrawal in this process rings as soon: no server round
// trip).
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

class MysqlStore;

// One acquire: the scheduling passes of sqlstep::StepRequest, plus the
// fast path and the doorbell. The first ask takes a doorbell (when one is
// free) and tries the fast path; a queued request waits in GET_LOCK on the
// doorbell of the entry it waits for, or naps on the in-process bell.
class MyRequest final : public sqlstep::StepRequest {
 public:
  MyRequest(MysqlStore& s, const AcquireSpec& spec);
  ~MyRequest() override;

  Result<Answer> ask(AskMode mode, milliseconds wait_left,
                     const CallContext& ctx) override;
  std::optional<Grant> wait_change(Clock::time_point until,
                                   const CallContext& ctx) override;
  void interrupt() override;

 private:
  Result<sqlstep::AcquireOutcome> pass(const CallContext& ctx,
                                       sqlstep::MultiMode mode,
                                       long long wait_ms) override;
  Result<sqlstep::AcquireOutcome> peek(const CallContext& ctx) override;
  Clock::time_point next_look(const CallContext& ctx) override;
  void ring() override;
  void finished(bool granted, const CallContext& ctx) override;
  // After a pass or look found `target`: a target whose doorbell rang
  // although it is still there has none to wait on.
  void saw(std::optional<my::BellTarget> target, int place);

  MysqlStore& s_;
  Doorbell door_;
  SteadyTime deadline_{};  // of the last call that did I/O
  bool asked_ = false;
  int place_ = 0;                         // queued: place in line
  int round_ = 0;                         // looks without a place
  std::optional<my::BellTarget> target_;  // whose doorbell to wait on
  std::string target_bell_;  // the next wait's doorbell ("" = the bell)
  // A target whose doorbell was found free although it is still there (it
  // has none: no slot, acquire_some/all, a reentrant alias, or its
  // connection died): waiting on it again would not block.
  std::string silent_, waited_on_;
  bool rang_ = false;
  std::mutex mu_;
  my::Conn* in_get_lock_ = nullptr;  // guarded by mu_: interrupt() ends it
};

class MysqlStore final : public sqlstep::StepStore {
 public:
  MysqlStore(my::StoreOptions o, my::ConnParams params, std::string where,
             std::string safe_url)
      : StepStore(std::move(safe_url), o.recheck),
        o_(std::move(o)),
        params_(params),
        pool_(std::move(params), where, o_.max_idle),
        bell_(bell_for(where + "/" + o_.prefix)),
        where_(where) {}

  Status open() {
    const SteadyTime deadline =
        my::Clock::now() + o_.connect_timeout + o_.request_timeout;
    auto c = pool_.get(deadline);
    if (!c.ok()) return std::move(c).error();
    Status st = my::install_schema(**c, o_, params_, deadline);
    if (st.ok()) pool_.put(std::move(*c));
    return st;
  }

  std::unique_ptr<baton::Request> request(const AcquireSpec& spec) override {
    return std::make_unique<MyRequest>(*this, spec);
  }
  std::unique_ptr<MultiRequest> request_multi(const MultiSpec& spec) override;

  Result<Grant> extend(std::string_view name, const OwnerToken& token,
                       milliseconds ttl, const CallContext& ctx) override;
  Result<ReleaseResult> release(std::string_view name, const OwnerToken& token,
                                const CallContext& ctx) override;
  Result<std::vector<LockInfo>> list(std::string_view prefix, std::size_t limit,
                                     const CallContext& ctx) override;

 private:
  friend class MyRequest;
  using Mode = sqlstep::MultiMode;

  void ring() { bell_->ring(); }

  SteadyTime deadline(const CallContext& ctx) const {
    return sqlstep::io_deadline(ctx, o_.request_timeout);
  }

  // A short random pause before a transaction is tried again after a
  // deadlock or lock wait timeout, never past `deadline`.
  static void retry_pause(int attempt, SteadyTime deadline) {
    const milliseconds pause{
        core::random_between(1, 2 + std::min(attempt, 8) * 3)};
    std::this_thread::sleep_until(std::min(deadline, my::Clock::now() + pause));
  }

  // A waiter without a doorbell looks again after about 1-2 ms per place
  // in line (the releaser's transaction grants the head, so it moves up one
  // place per handoff), at most recheck_interval.
  milliseconds place_recheck(int place) const {
    const long long hi = std::min<long long>(o_.recheck.count(), 2LL * place);
    return milliseconds{
        core::random_between(std::max(1LL, hi / 2), std::max(1LL, hi))};
  }
  // Without a place (its request is not plainly queued): 2, 4, 8 ... ms,
  // at most recheck_interval.
  milliseconds recheck(int round) const {
    const long long hi =
        std::min<long long>(o_.recheck.count(), 2LL << std::min(round, 10));
    return milliseconds{
        core::random_between(std::max(1LL, hi / 2), std::max(2LL, hi))};
  }
  // On a doorbell whose release is the one event that can grant the
  // waiter: recheck_interval / 2 .. recheck_interval.
  milliseconds long_recheck() const {
    const long long hi = std::max<long long>(2, o_.recheck.count());
    return milliseconds{core::random_between(hi / 2, hi)};
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
  Result<std::vector<my::ResultSet>> simple_query(const CallContext& ctx,
                                                  const std::string& sql) {
    const SteadyTime d = deadline(ctx);
    auto c = pool_.get(d);
    if (!c.ok()) return std::move(c).error();
    auto r = (*c)->query(sql, d);
    if (r.ok()) pool_.put(std::move(*c));
    return r;
  }

  // Runs `fn` in one transaction holding the serialization rows of `names`
  // (in key order), with the names' rows read FOR UPDATE; commits what it
  // wrote (also when it returns an error). Deadlocks and lock-wait
  // timeouts are retried here, until the call's deadline. With a usable
  // `bell` it runs on the doorbell's connection: BellOp::take takes the
  // doorbell in the first round trip (before the transaction, so before
  // its rows can be seen), BellOp::let_go lets it go right after COMMIT.
  template <typename T, typename F>
  Result<T> transact(const CallContext& ctx,
                     const std::vector<std::string>& names, F&& fn,
                     Doorbell* bell = nullptr, BellOp op = BellOp::none);

  // One acquire pass in `mode`; *arrival is set on the first pass. With a
  // `bell` not yet tried, the pass takes it. `*target`: whose doorbell a
  // queued request waits on.
  Result<sqlstep::AcquireOutcome> pass(const CallContext& ctx,
                                       const AcquireSpec& spec,
                                       const std::string& token, Mode mode,
                                       long long wait_ms, std::int64_t* arrival,
                                       Doorbell* bell,
                                       std::optional<my::BellTarget>* target);

  // A waiter's non-locking look (sqlstep::quiet_look).
  Result<sqlstep::AcquireOutcome> peek(const CallContext& ctx,
                                       const std::string& name,
                                       const std::string& token,
                                       std::int64_t arrival,
                                       std::optional<my::BellTarget>* target);

  // The fast paths (fast_path.cc): the lease, or nullopt when the full
  // transaction must decide (the lock is held, queued for, not plain, or
  // the outcome is unknown). fast_acquire takes `bell` in its round trip.
  bool fast_path_for(const AcquireSpec& spec) const;
  std::optional<Grant> fast_acquire(SteadyTime d, const AcquireSpec& spec,
                                    const std::string& token, Doorbell* bell);
  std::optional<Grant> fast_extend(const CallContext& ctx,
                                   const std::string& name,
                                   const std::string& token, milliseconds ttl);
  std::optional<ReleaseResult> fast_release(SteadyTime d,
                                            const std::string& name,
                                            const std::string& token,
                                            Doorbell& bell);

  // Doorbells (doorbell_wait.cc). A new doorbell for (name, token) when
  // doorbell=on, a slot is free, the lease has none yet and a connection
  // can be had; else an empty one (the waiter then uses its timer).
  Doorbell new_doorbell(const std::string& name, const std::string& token,
                        SteadyTime d);
  // After acquire: a granted lease keeps its doorbell until its release
  // (or its expiry, swept); anything else lets it go.
  void settle(Doorbell bell, bool granted, const std::string& name,
              const std::string& token, milliseconds ttl, SteadyTime deadline);
  // The doorbell a held lease keeps (empty if none).
  Doorbell held_doorbell(const std::string& name, const std::string& token);
  // RELEASE_ALL_LOCKS on the doorbell's connection, which then returns to
  // the pool (bounded by `deadline`; closed if it fails).
  void let_go(Doorbell bell, SteadyTime deadline);
  // Lets go of the doorbells of leases past their expiry.
  void sweep_doorbells(SteadyTime deadline);
  void touch_doorbell(const std::string& name, const std::string& token,
                      milliseconds ttl);
  // Blocks in GET_LOCK on `target`'s doorbell on `conn` until it is let go
  // (1), until `until` (0) or on an error (-1). `deadline`: the call's.
  int ring_wait(my::Conn& conn, const std::string& target, SteadyTime until,
                SteadyTime deadline);

  Result<std::vector<LockInfo>> infos(
      const CallContext& ctx, const std::vector<std::string>& names) override;
  Result<std::int64_t> counter(const CallContext& ctx, sqlstep::CounterOp op,
                               std::string_view name, std::int64_t n) override;

  const my::StoreOptions o_;
  const my::ConnParams params_;
  my::Pool pool_;
  const std::shared_ptr<sqlstep::LocalBell> bell_;
  const std::string where_;
  BusyNames busy_;  // names to send straight to the transaction

  // Doorbells of held leases by name + '\0' + token, with the local time
  // after which the lease has surely expired.
  struct Kept {
    Doorbell bell;
    SteadyTime until;
  };
  std::atomic<int> slots_{0};
  std::mutex kept_mu_;
  std::map<std::string, Kept> kept_;  // guarded by kept_mu_
};

template <typename T, typename F>
Result<T> MysqlStore::transact(const CallContext& ctx,
                               const std::vector<std::string>& names, F&& fn,
                               Doorbell* bell, BellOp op) {
  const SteadyTime d = deadline(ctx);
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
      if (my::Clock::now() >= d) {
        return Error(Errc::unavailable,
                     "mysql://" + pool_.where() +
                         ": gave up after repeated deadlocks or lock "
                         "wait timeouts");
      }
      retry_pause(attempt, d);
    }
    std::unique_ptr<my::Conn> owned;
    if (bell == nullptr) {
      auto c = pool_.get(d);
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
    auto r = conn.query(head, d, &db);
    if (!r.ok()) {
      if (conn.broken()) {
        done_with();
        if (!owned && bell != nullptr && !bell->usable() &&
            my::Clock::now() < d) {
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
      (void)conn.query("ROLLBACK", d);
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
      auto ir = conn.query(ins, d, &db);
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
    auto done = conn.query(
        tx.writes() + "COMMIT" +
            (op == BellOp::let_go ? ";DO RELEASE_ALL_LOCKS()" : std::string()),
        d, &db);
    if (!done.ok()) {
      if (conn.broken()) {
        done_with();
        return std::move(done).error();
      }
      (void)conn.query("ROLLBACK", d);
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

}  // namespace baton::store::my_impl

#endif  // BATON_STORES_MYSQL_STORE_IMPL_H_
