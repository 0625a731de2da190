// stores/sqlite/store_impl.h — the sqlite:// Store class and its requests,
// shared by the store's .cc files. Internal to the store.
//
// Thread safety: SqliteStore is safe for concurrent use (Store contract); a
// request belongs to one calling thread, interrupt() aside.
#ifndef BATON_STORES_SQLITE_STORE_IMPL_H_
#define BATON_STORES_SQLITE_STORE_IMPL_H_

#include <algorithm>
#include <limits>
#include <map>
#include <memory>
#include <optional>

#include "baton/store.h"
#include "stores/sqlite/bell.h"
#include "stores/sqlite/db.h"
#include "stores/sqlite/files.h"
#include "stores/sqlite/schema.h"
#include "stores/sqlite/sqlite_store.h"
#include "stores/sqlite/state.h"
#include "stores/sqlstep/sql_request.h"
#include "stores/sqlstep/sql_store.h"

namespace baton::store::sq_impl {

using sq::NameState;
using sq::Tx;
using sqlstep::SteadyTime;

constexpr std::int64_t kNever = std::numeric_limits<std::int64_t>::max();

class SqliteStore;

// One acquire: the scheduling passes of sqlstep::StepRequest; a queued
// request naps on the bell until the next instant a pass could change
// something for it (a lease or a request ahead expiring, its own
// heartbeat), or the jittered fallback.
class SqRequest final : public sqlstep::StepRequest {
 public:
  SqRequest(SqliteStore& s, const AcquireSpec& spec);

 private:
  Result<sqlstep::AcquireOutcome> pass(const CallContext& ctx,
                                       sqlstep::MultiMode mode,
                                       long long wait_ms) override;
  Result<sqlstep::AcquireOutcome> peek(const CallContext& ctx) override;
  Clock::time_point next_look(const CallContext& ctx) override;
  void ring() override;

  SqliteStore& s_;
  std::int64_t due_us_ = kNever;  // store time when a pass is due
};

class SqliteStore final : public sqlstep::StepStore {
 public:
  explicit SqliteStore(sq::StoreOptions o)
      : StepStore("sqlite://" + o.path, o.recheck),
        o_(std::move(o)),
        pool_(o_.path, o_.max_idle) {}

  // Checks and creates the files (files.h: nothing is created or written
  // when refused), opens the database, installs or checks the schema, then
  // gives the files this user owns file_mode.
  Status open() {
    const SteadyTime deadline = sq::Clock::now() + o_.request_timeout;
    const sq::FilePolicy files{static_cast<mode_t>(o_.file_mode),
                               o_.allow_insecure_files};
    if (Status st = sq::prepare_files(o_.path, files); !st.ok()) return st;
    auto c = std::make_unique<sq::Conn>();
    if (Status st = c->open(o_.path, true, deadline); !st.ok()) return st;
    // The schema transaction too may meet SQLITE_BUSY without the busy
    // handler while other processes set the file up.
    for (int attempt = 0;; ++attempt) {
      Status st = sq::install_schema(*c, o_);
      if (st.ok()) break;
      if (!c->busy_failure() || sq::Clock::now() >= deadline) return st;
      c->retry_nap(attempt);
    }
    pool_.put(std::move(c));
    bell_ = sq::bell_for(o_.path, files);
    sq::settle_modes(o_.path, files);
    return {};
  }

  std::unique_ptr<baton::Request> request(const AcquireSpec& spec) override {
    return std::make_unique<SqRequest>(*this, spec);
  }
  std::unique_ptr<MultiRequest> request_multi(const MultiSpec& spec) override;

  Result<Grant> extend(std::string_view name, const OwnerToken& token,
                       milliseconds ttl, const CallContext& ctx) override;
  Result<ReleaseResult> release(std::string_view name, const OwnerToken& token,
                                const CallContext& ctx) override;
  Result<std::vector<LockInfo>> list(std::string_view prefix, std::size_t limit,
                                     const CallContext& ctx) override;
  // The change feed (watch.cc): inotify on the database's files, confirmed
  // by data_version, and the earliest expiry under the prefix.
  Result<std::unique_ptr<Waitable>> watch(std::string_view prefix,
                                          const CallContext& ctx) override;

 private:
  friend class SqRequest;
  using Mode = sqlstep::MultiMode;

  SteadyTime deadline(const CallContext& ctx) const {
    return sqlstep::io_deadline(ctx, o_.request_timeout);
  }

  // Runs `fn(conn, &writes)` in one BEGIN IMMEDIATE transaction and
  // commits `writes` (also when fn returns an error: its writes so far are
  // the decision); a failed write or COMMIT rolls everything back.
  template <typename T, typename F>
  Result<T> write_tx(const CallContext& ctx, F&& fn);

  // The scheduling step on `names` in one write transaction.
  template <typename T, typename F>
  Result<T> transact(const CallContext& ctx,
                     const std::vector<std::string>& names, F&& fn) {
    auto step = [&](sq::Conn& conn, std::string* writes) -> Result<T> {
      auto state = sq::load_state(conn, o_.prefix, names);
      if (!state.ok()) return std::move(state).error();
      // Read under the write lock: store time never goes back between two
      // transactions of any process on this host.
      const std::int64_t now = sq::store_now_us();
      // Store (boot) time + (wall clock now − store time now) = the Unix
      // epoch time a lease's expiry is reported in.
      Tx tx(o_.prefix, sqlstep::Dialect::sqlite, std::move(*state), now,
            sq::wall_now_us() - now);
      Result<T> out = fn(tx);
      *writes = tx.writes();
      return out;
    };
    return write_tx<T>(ctx, step);
  }

  // The rows of `names` in one read transaction (WAL: never waits for the
  // writer), with the store time of the read.
  Result<std::map<std::string, NameState>> read_state(
      const CallContext& ctx, const std::vector<std::string>& names,
      std::int64_t* now);

  // When a locking pass for `mine` could next change something (store
  // time; kNever: nothing is due).
  std::int64_t next_due(const NameState& s, const sq::Request* mine,
                        std::int64_t now) const;

  // The fallback re-check: recheck_interval / 2 .. recheck_interval.
  milliseconds recheck() const;

  Result<std::vector<LockInfo>> infos(
      const CallContext& ctx, const std::vector<std::string>& names) override;
  Result<std::int64_t> counter(const CallContext& ctx, sqlstep::CounterOp op,
                               std::string_view name, std::int64_t n) override;

  const sq::StoreOptions o_;
  sq::Pool pool_;
  std::shared_ptr<sq::Bell> bell_;
};

template <typename T, typename F>
Result<T> SqliteStore::write_tx(const CallContext& ctx, F&& fn) {
  const SteadyTime d = deadline(ctx);
  // Rule 7: once the caller's deadline has passed, the answer is timeout
  // (the outcome is known: nothing was written).
  auto late = [&]() -> std::optional<Error> {
    if (!ctx.expired()) return std::nullopt;
    return Error(Errc::timeout, "sqlite database \"" + o_.path +
                                    "\": the call's deadline passed while "
                                    "waiting for the write lock");
  };
  if (!bell_->writer.lock_until(d)) {
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
  auto c = pool_.get(d);
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

}  // namespace baton::store::sq_impl

#endif  // BATON_STORES_SQLITE_STORE_IMPL_H_
