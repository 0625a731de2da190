// stores/sqlite/store_more.cc — acquire_some / acquire_all, counters and
// the factory of the sqlite:// store.
#include "stores/sqlite/store_impl.h"

namespace baton::store {
namespace sq_impl {

Result<std::int64_t> SqliteStore::counter(const char* op, std::string_view name,
                                          std::int64_t n) {
  if (Status st = core::validate_name(name, "counter name"); !st.ok()) {
    return st.error();
  }
  const std::string t = o_.prefix + "counters";
  const std::string k = sq::hex_literal(name);
  const std::string op_s = op;
  const std::string select = "SELECT value FROM " + t + " WHERE name = " + k;
  if (op_s == "get") {
    auto c = pool_.get(request_deadline());
    if (!c.ok()) return std::move(c).error();
    auto r = (*c)->query(select);
    pool_.put(std::move(*c));
    if (!r.ok()) return std::move(r).error();
    return r->rows.empty() ? std::int64_t{0} : r->num(0, 0);
  }
  return write_tx<std::int64_t>(
      [&](sq::Conn& conn, std::string* writes) -> Result<std::int64_t> {
        auto r = conn.query(select);
        if (!r.ok()) return std::move(r).error();
        const std::int64_t v = r->rows.empty() ? 0 : r->num(0, 0);
        std::int64_t next = 0;
        if (op_s == "add") {
          if (__builtin_add_overflow(v, n, &next)) {
            return Error(Errc::invalid_argument,
                         "counter " + core::quote_name(name) + ": adding " +
                             std::to_string(n) + " would overflow");
          }
        } else {
          // Seed 003's guarded decrement: never below zero.
          if (v < n) {
            return Error(Errc::not_acquired,
                         "counter " + core::quote_name(name) + " is " +
                             std::to_string(v) + "; cannot take " +
                             std::to_string(n));
          }
          next = v - n;
        }
        *writes = "INSERT INTO " + t + " (name, value) VALUES (" + k + ", " +
                  std::to_string(next) +
                  ") ON CONFLICT (name) DO UPDATE SET value = "
                  "excluded.value;";
        return next;
      });
}

Result<std::vector<Grant>> SqliteStore::acquire_multi(const MultiSpec& spec,
                                                      milliseconds wait) {
  if (Status st = core::validate(spec, wait); !st.ok()) return st.error();
  const bool all = spec.all_or_nothing;
  const bool waits = wait > milliseconds::zero();
  const TimePoint end = end_of(wait);
  std::int64_t arrival = 0;
  auto step = [&](sq::MultiMode mode, long long wait_ms) {
    return transact<sq::MultiOutcome>(
        spec.names, [&](Tx& tx) -> Result<sq::MultiOutcome> {
          if (arrival == 0) arrival = tx.now();
          return sq::multi_step(tx, spec, mode, wait_ms,
                                o_.waiter_timeout.count() * 1000, arrival);
        });
  };
  auto done = [&](const sq::MultiOutcome& m) {
    return all ? m.grants.size() == spec.names.size()
               : (!m.grants.empty() || m.pending == 0);
  };
  std::uint64_t seen = bell_->generation();
  auto r = step(all && !waits ? sq::MultiMode::try_ : sq::MultiMode::wait,
                ms_left(end));
  for (;;) {
    if (r.ok() && (done(*r) || !waits)) return r->grants;
    if (!r.ok() && r.error().code() != Errc::unavailable) {
      return std::move(r).error();
    }
    if (Clock::now() >= end || call_deadline_passed()) break;
    // Multi-name waits re-check on the bell or the timer with a locking
    // pass (expiries of several names are not tracked here).
    bell_->nap(cap_to_call_deadline(std::min(
                   end, Clock::now() + std::min(recheck(), milliseconds{25}))),
               seen);
    if (Clock::now() >= end && !all) break;
    seen = bell_->generation();
    r = step(sq::MultiMode::wait, std::max<long long>(ms_left(end), 1));
  }
  if (!all) {
    auto again = step(sq::MultiMode::wait, 1);
    if (!again.ok()) return std::move(again).error();
    return again->grants;
  }
  Result<sq::MultiOutcome> last = Error(Errc::internal, "not run");
  for (int attempt = 0; attempt < 4; ++attempt) {
    if (attempt > 0) jitter_sleep(attempt * 4);
    last = step(sq::MultiMode::withdraw, 0);
    if (last.ok() || last.error().code() != Errc::unavailable) break;
  }
  bell_->ring();
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

}  // namespace sq_impl

Result<std::unique_ptr<Store>> open_sqlite_store(std::string_view url) {
  auto o = sq::parse_options(url);
  if (!o.ok()) return std::move(o).error();
  auto store = std::make_unique<sq_impl::SqliteStore>(std::move(*o));
  if (Status st = store->open(); !st.ok()) return st.error();
  return std::unique_ptr<Store>(std::move(store));
}

}  // namespace baton::store
