// stores/postgres/postgres_store.cc — Store on PostgreSQL: one PL/pgSQL
// call per operation, waiting by LISTEN/NOTIFY plus jittered re-checks.
#include "stores/postgres/postgres_store.h"

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <optional>
#include <random>
#include <thread>

#include "core/request.h"
#include "core/validate.h"
#include "stores/busy_names.h"
#include "stores/call_deadline.h"
#include "stores/postgres/listener.h"
#include "stores/postgres/rows.h"
#include "stores/postgres/schema.h"

namespace baton::store {
namespace {

using pg::Clock;
using pg::Row;
using pg::TimePoint;

// Waits at least this long count as "forever".
constexpr milliseconds kForever = core::kForeverWait;
// The database deadline of a queued request is refreshed by every re-check,
// so it never needs to be further away than this.
constexpr long long kMaxDbWaitMs = 24LL * 3600 * 1000;

TimePoint end_of(milliseconds wait) {
  if (wait >= kForever) return TimePoint::max();
  return Clock::now() + wait;
}

long long ms_left(TimePoint end) {
  if (end == TimePoint::max()) return kMaxDbWaitMs;
  const auto left = std::chrono::ceil<milliseconds>(end - Clock::now()).count();
  return std::clamp<long long>(left, 0, kMaxDbWaitMs);
}

std::string pg_array(const std::vector<std::string>& names) {
  std::string out = "{";
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out += ',';
    out += '"';
    for (char c : names[i]) {
      if (c == '"' || c == '\\') out += '\\';
      out += c;
    }
    out += '"';
  }
  return out + "}";
}

class PostgresStore final : public Store {
 public:
  PostgresStore(pg::StoreOptions o, pg::ConnParams params, std::string where,
                std::string safe_url)
      : o_(std::move(o)),
        safe_url_(std::move(safe_url)),
        pool_(std::move(params), std::move(where), o_.pool) {
    const std::string& s = o_.schema;
    sql_acquire_ = "SELECT * FROM " + s +
                   ".acquire($1::text, $2::uuid, $3::bigint, $4::int, "
                   "$5::text, $6::text, $7::text, $8::bigint, $9::bigint, "
                   "$10::boolean)";
    sql_multi_ = "SELECT * FROM " + s +
                 ".acquire_multi($1::text[], $2::uuid, $3::bigint, $4::int, "
                 "$5::text, $6::boolean, $7::text, $8::bigint, $9::bigint)";
    sql_extend_ =
        "SELECT * FROM " + s + ".extend($1::text, $2::uuid, $3::bigint)";
    sql_release_ = "SELECT * FROM " + s + ".release($1::text, $2::uuid)";
    // The fast paths as one statement each (schema version 6, _claim):
    // what acquire's and release's own fast paths do, without the
    // PL/pgSQL call around them. No row: the function decides. Times are
    // the statement's start, before any wait (docs/stores/postgres.md).
    sql_fast_acquire_ =
        "UPDATE " + s +
        ".locks l SET capacity = $4::int, last_fencing = l.last_fencing + "
        "1, h_token = $2::uuid, h_fencing = l.last_fencing + 1, h_ttl_ms = "
        "$3::bigint, h_expires = statement_timestamp() + " +
        s +
        "._ms($3::bigint), h_label = $5::text, h_rkey = '', h_shared = "
        "false, h_granted = statement_timestamp() WHERE l.name = $1::text "
        "AND (l.h_token IS NULL OR l.h_expires <= statement_timestamp()) "
        "AND " +
        s +
        "._claim($1::text, true) RETURNING 'grant'::text, l.name, "
        "l.h_token, l.h_fencing, l.h_ttl_ms, 1, l.capacity, " +
        s + "._us(l.h_expires), " + s +
        "._us(l.h_granted), l.h_label, NULL::bigint, l.h_shared, NULL::text, "
        "NULL::text";
    sql_fast_release_ =
        "UPDATE " + s +
        ".locks l SET h_token = NULL WHERE l.name = $1::text AND l.h_token = "
        "$2::uuid AND l.h_expires > statement_timestamp() AND " +
        s +
        "._claim($1::text, false) RETURNING 'status'::text, l.name, "
        "NULL::uuid, NULL::bigint, NULL::bigint, 0, NULL::int, NULL::bigint, " +
        s +
        "._us(statement_timestamp()), NULL::text, 0::bigint, true, "
        "NULL::text, NULL::text";
    sql_describe_ = "SELECT * FROM " + s + ".describe($1::text)";
    sql_list_ = "SELECT * FROM " + s + ".list($1::text, $2::int)";
    sql_counter_ =
        "SELECT * FROM " + s + ".counter($1::text, $2::text, $3::bigint)";
  }

  Status open() {
    const TimePoint deadline =
        Clock::now() + o_.pool.connect_timeout + o_.request_timeout;
    {
      auto c = pool_.get(deadline);
      if (!c.ok()) return std::move(c).error();
      if (Status st = pg::install_schema(**c, o_.schema, deadline); !st.ok()) {
        return st;
      }
    }
    listener_ = std::make_unique<pg::Listener>(pool_, o_.schema + "_wake");
    listener_->wait_ready(Clock::now() + o_.pool.connect_timeout);
    return {};
  }

  Result<Grant> acquire(const AcquireSpec& spec, milliseconds wait) override {
    if (Status st = core::validate(spec, wait); !st.ok()) return st.error();
    const bool tried_fast = try_fast(spec);
    if (tried_fast) {
      if (auto g = fast_acquire(spec)) return std::move(*g);
    }
    // A name the fast path failed on whose full pass did not grant at once
    // is busy: its next calls skip the fast path for a while.
    auto note = [&](const Result<std::vector<Row>>& r) {
      if (tried_fast && (!r.ok() || (*r)[0].kind != "grant")) {
        busy_.mark(spec.name);
      }
    };
    if (wait <= milliseconds::zero()) {
      auto r = call_acquire(spec, "try", 0);
      note(r);
      if (!r.ok()) return std::move(r).error();
      return single_grant(*r, (*r)[0].now_us, spec.name);
    }
    const TimePoint end = end_of(wait);
    pg::Listener::Slot slot(*listener_, spec.token);
    const TimePoint sent = Clock::now();
    auto r = call_acquire(spec, "wait", ms_left(end));
    note(r);
    if (!r.ok()) return std::move(r).error();
    const std::int64_t arrival_us = (*r)[0].now_us;
    for (;;) {
      if (r.ok() && (*r)[0].kind == "grant") {
        return pg::to_grant((*r)[0], arrival_us);
      }
      if (!r.ok() && r.error().code() != Errc::unavailable) {
        return std::move(r).error();
      }
      if (Clock::now() >= end) break;
      // 'queued' with code 'recheck' (queued without the name's lock) or
      // 'full' (the light re-check saw something due): call again at once.
      if (r.ok() && ((*r)[0].code == "recheck" || (*r)[0].code == "full")) {
        const char* mode = (*r)[0].code == "full" ? "full" : "recheck";
        r = call_acquire(spec, mode, ms_left(end));
        continue;
      }
      slot.wait(std::min(end, Clock::now() + recheck_delay()));
      // The notification carried the grant (committed before it was
      // sent): no re-check needed. Reentrant joins and anything else
      // re-check.
      if (auto g = slot.take_grant(); g && g->name == spec.name) {
        Grant grant;
        grant.name = spec.name;
        grant.token = spec.token;
        grant.fencing_token = static_cast<std::uint64_t>(g->fencing);
        grant.ttl = milliseconds{g->ttl_ms};
        grant.holds = 1;
        grant.capacity = spec.capacity;
        grant.shared = spec.shared;
        grant.valid_for = std::chrono::microseconds{g->expires_us - arrival_us};
        grant.store_expires_at_ms = g->expires_us / 1000;
        // A lease that may have expired on the way re-checks instead.
        if (grant.valid_for > Clock::now() - sent) return grant;
      }
      if (Clock::now() >= end) break;
      r = call_acquire(spec, "recheck", ms_left(end));
    }
    // The wait is over: leave the queue, or take the grant that came in.
    Result<std::vector<Row>> last = Error(Errc::internal, "not run");
    for (int attempt = 0; attempt < 4; ++attempt) {
      if (attempt > 0) {
        std::this_thread::sleep_until(
            cap_to_call_deadline(Clock::now() + milliseconds{50 << attempt}));
      }
      last = call_acquire(spec, "withdraw", 0);
      if (last.ok() || last.error().code() != Errc::unavailable) break;
    }
    if (!last.ok()) {
      if (last.error().code() != Errc::timeout) return std::move(last).error();
      return Error(Errc::timeout, "lock " + core::quote_name(spec.name) +
                                      " was not granted within " +
                                      std::to_string(wait.count()) + "ms");
    }
    return single_grant(*last, arrival_us, spec.name);
  }

  Result<Grant> extend(std::string_view name, const OwnerToken& token,
                       milliseconds ttl) override {
    if (Status st = core::validate_name(name); !st.ok()) return st.error();
    if (Status st = core::validate_ttl(ttl); !st.ok()) return st.error();
    auto r = call(sql_extend_, {std::string(name), token.to_string(),
                                std::to_string(ttl.count())});
    if (!r.ok()) return std::move(r).error();
    return pg::to_grant((*r)[0], (*r)[0].now_us);
  }

  Result<ReleaseResult> release(std::string_view name,
                                const OwnerToken& token) override {
    if (Status st = core::validate_name(name); !st.ok()) return st.error();
    // The fast path: the inline lease of a name nobody waits for. An
    // error leaves its outcome unknown; the function then answers (a lease
    // already released is "not held", which is also true).
    // A name where it failed on a lease that was held (a waiter, or a lease
    // in holders) is busy for a while (BusyNames).
    const std::string n(name);
    const bool tried_fast = !busy_.busy(n);
    if (tried_fast) {
      auto f = call(sql_fast_release_, {n, token.to_string()},
                    /*may_be_empty=*/true);
      if (f.ok() && !f->empty()) return ReleaseResult{true, 0};
    }
    auto r = call(sql_release_, {n, token.to_string()});
    if (!r.ok()) return std::move(r).error();
    const Row& row = (*r)[0];
    if (tried_fast && row.flag) busy_.mark(n);
    return ReleaseResult{row.flag, static_cast<std::uint32_t>(row.n)};
  }

  Result<LockInfo> describe(std::string_view name) override {
    if (Status st = core::validate_name(name); !st.ok()) return st.error();
    auto r = call(sql_describe_, {std::string(name)});
    if (!r.ok()) return std::move(r).error();
    auto infos = pg::to_infos(*r);
    if (infos.empty())
      return Error(Errc::internal, "describe returned nothing");
    return infos.front();
  }

  Result<std::vector<LockInfo>> list(std::string_view prefix,
                                     std::size_t limit) override {
    if (prefix.find('\0') != std::string_view::npos) {
      return Error(Errc::invalid_argument, "name prefix contains a NUL byte");
    }
    if (limit == 0) return std::vector<LockInfo>{};
    const std::size_t capped = std::min<std::size_t>(limit, 1'000'000);
    auto r = call(sql_list_, {std::string(prefix), std::to_string(capped)},
                  /*may_be_empty=*/true);
    if (!r.ok()) return std::move(r).error();
    return pg::to_infos(*r);
  }

  Result<std::vector<Grant>> acquire_multi(const MultiSpec& spec,
                                           milliseconds wait) override {
    if (Status st = core::validate(spec, wait); !st.ok()) return st.error();
    const bool all = spec.all_or_nothing;
    const bool waits = wait > milliseconds::zero();
    const TimePoint end = end_of(wait);
    std::optional<pg::Listener::Slot> slot;
    if (waits) slot.emplace(*listener_, spec.reservation);
    const char* mode = all && !waits ? "try" : "wait";
    auto r = call_multi(spec, mode, ms_left(end));
    if (!r.ok()) return std::move(r).error();
    const std::int64_t arrival_us = r->back().now_us;
    auto done = [&](const std::vector<Row>& rows) {
      const std::size_t granted = rows.size() - 1;
      const std::int64_t pending = rows.back().n;
      return all ? granted == spec.names.size() : (granted > 0 || pending == 0);
    };
    for (;;) {
      if (r.ok() && (done(*r) || !waits)) {
        return pg::to_grants(*r, arrival_us);
      }
      if (!r.ok() && r.error().code() != Errc::unavailable) {
        return std::move(r).error();
      }
      if (Clock::now() >= end) break;
      slot->wait(std::min(end, Clock::now() + recheck_delay()));
      if (Clock::now() >= end && !all) break;
      r = call_multi(spec, "recheck", std::max<long long>(ms_left(end), 1));
    }
    if (!all) {
      // acquire_some: report what the reservation holds (and refresh it).
      auto again = call_multi(spec, "wait", 1);
      if (!again.ok()) return std::move(again).error();
      return pg::to_grants(*again, arrival_us);
    }
    Result<std::vector<Row>> last = Error(Errc::internal, "not run");
    for (int attempt = 0; attempt < 4; ++attempt) {
      if (attempt > 0) {
        std::this_thread::sleep_until(
            cap_to_call_deadline(Clock::now() + milliseconds{50 << attempt}));
      }
      last = call_multi(spec, "withdraw", 0);
      if (last.ok() || last.error().code() != Errc::unavailable) break;
    }
    if (!last.ok()) {
      if (last.error().code() != Errc::timeout) return std::move(last).error();
      return Error(Errc::timeout, "not all of the " +
                                      std::to_string(spec.names.size()) +
                                      " locks were granted within " +
                                      std::to_string(wait.count()) + "ms");
    }
    if (last->size() - 1 < spec.names.size()) {
      return Error(Errc::timeout, "not all of the " +
                                      std::to_string(spec.names.size()) +
                                      " locks were granted within " +
                                      std::to_string(wait.count()) + "ms");
    }
    return pg::to_grants(*last, arrival_us);
  }

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
      return Error(Errc::invalid_argument, "counter take of " +
                                               std::to_string(n) +
                                               " is invalid; it must be at "
                                               "least 1");
    }
    return counter("take", name, n);
  }

  bool supports_shared() const override { return true; }
  std::string safe_url() const override { return safe_url_; }

 private:
  static Status validate(const AcquireSpec& spec) {
    return core::validate(spec, milliseconds::zero());
  }

  milliseconds recheck_delay() const {
    thread_local std::mt19937_64 rng{std::random_device{}()};
    const long long base = o_.recheck_interval.count();
    std::uniform_int_distribution<long long> d(base, 3 * base);
    return milliseconds{d(rng)};
  }

  // One function call; an 'error' first row becomes the Error it names.
  Result<std::vector<Row>> call(const std::string& sql,
                                const std::vector<std::string>& params,
                                bool may_be_empty = false) {
    const TimePoint deadline = Clock::now() + o_.request_timeout;
    auto c = pool_.get(deadline);
    if (!c.ok()) return std::move(c).error();
    // Prepared once per connection, named after a hash of its text.
    auto res = (*c)->query_prepared(
        "baton_" + std::to_string(std::hash<std::string>{}(sql)), sql, params,
        deadline);
    if (!res.ok()) return std::move(res).error();
    std::vector<Row> rows = pg::parse_rows(res->get());
    if (rows.empty()) {
      if (may_be_empty) return rows;
      return Error(Errc::internal, "postgres store function returned no row");
    }
    if (rows[0].kind == "error") return pg::to_error(rows);
    return rows;
  }

  Result<std::vector<Row>> call_acquire(const AcquireSpec& spec,
                                        const char* mode, long long wait_ms) {
    return call(
        sql_acquire_,
        {spec.name, spec.token.to_string(), std::to_string(spec.ttl.count()),
         std::to_string(spec.capacity), spec.label, spec.reentrancy_key, mode,
         std::to_string(wait_ms), std::to_string(o_.waiter_timeout.count()),
         spec.shared ? "true" : "false"});
  }

  // An idle name's plain acquire as one statement (sql_fast_acquire_), or
  // nullopt: the name is busy or new, the request is not plain, or the
  // outcome is unknown (an error; the function's pass with the same owner
  // token then finds the lease if the statement committed, rule 17).
  bool try_fast(const AcquireSpec& spec) {
    return !spec.shared && spec.reentrancy_key.empty() &&
           !busy_.busy(spec.name);
  }
  std::optional<Grant> fast_acquire(const AcquireSpec& spec) {
    auto f = call(
        sql_fast_acquire_,
        {spec.name, spec.token.to_string(), std::to_string(spec.ttl.count()),
         std::to_string(spec.capacity), spec.label},
        /*may_be_empty=*/true);
    if (!f.ok() || f->empty() || (*f)[0].kind != "grant") return std::nullopt;
    return pg::to_grant((*f)[0], (*f)[0].now_us);
  }

  Result<std::vector<Row>> call_multi(const MultiSpec& spec, const char* mode,
                                      long long wait_ms) {
    return call(
        sql_multi_,
        {pg_array(spec.names), spec.reservation.to_string(),
         std::to_string(spec.ttl.count()), std::to_string(spec.capacity),
         spec.label, spec.all_or_nothing ? "true" : "false", mode,
         std::to_string(wait_ms), std::to_string(o_.waiter_timeout.count())});
  }

  static Result<Grant> single_grant(const std::vector<Row>& rows,
                                    std::int64_t arrival_us,
                                    const std::string& name) {
    if (rows[0].kind == "grant") return pg::to_grant(rows[0], arrival_us);
    return Error(Errc::not_acquired,
                 "the request for lock " + core::quote_name(name) +
                     " is queued (" + std::to_string(rows[0].n) + " in line)");
  }

  Result<std::int64_t> counter(const char* op, std::string_view name,
                               std::int64_t n) {
    if (Status st = core::validate_name(name, "counter name"); !st.ok()) {
      return st.error();
    }
    auto r = call(sql_counter_, {op, std::string(name), std::to_string(n)});
    if (!r.ok()) return std::move(r).error();
    return (*r)[0].n;
  }

  const pg::StoreOptions o_;
  const std::string safe_url_;
  pg::Pool pool_;
  std::unique_ptr<pg::Listener> listener_;
  BusyNames busy_;
  std::string sql_acquire_, sql_multi_, sql_extend_, sql_release_,
      sql_describe_, sql_list_, sql_counter_, sql_fast_acquire_,
      sql_fast_release_;
};

}  // namespace

Result<std::unique_ptr<Store>> open_postgres_store(const core::Url& url) {
  if (url.scheme != "postgres" && url.scheme != "postgresql") {
    return Error(Errc::invalid_argument,
                 "store URL \"" + url.safe() + "\" is not postgres://");
  }
  pg::ConnParams params;
  std::string where;
  auto o = pg::parse_options(url, &params, &where);
  if (!o.ok()) return std::move(o).error();
  auto store = std::make_unique<PostgresStore>(std::move(*o), std::move(params),
                                               std::move(where), url.safe());
  if (Status st = store->open(); !st.ok()) return st.error();
  return std::unique_ptr<Store>(std::move(store));
}

}  // namespace baton::store
