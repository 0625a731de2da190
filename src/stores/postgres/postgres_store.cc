// stores/postgres/postgres_store.cc — the postgres:// store's single calls
// (extend, release, describe, list, counters), its statements and its
// descriptor.
#include "stores/postgres/postgres_store.h"

#include <algorithm>
#include <cstdlib>
#include <functional>

#include "stores/postgres/schema.h"
#include "stores/postgres/store_impl.h"

namespace baton::store::pg {
namespace {

// A queued request's database deadline is refreshed by every look, so it
// never needs to be further away than this.
constexpr milliseconds kMaxDbWait{24LL * 3600 * 1000};

std::string ms_param(milliseconds wait_left) {
  return std::to_string(
      std::clamp(wait_left, milliseconds::zero(), kMaxDbWait).count());
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

}  // namespace

Stmt::Stmt(std::string sql)
    : name("baton_" + std::to_string(std::hash<std::string>{}(sql))),
      text(std::move(sql)) {}

// The fast paths are one statement each: an UPDATE of the name's locks
// row that decides from that row alone (its holder, and whether the name
// may have requests or holders rows; docs/stores/postgres.md "Fast
// paths"). No
// row: the function decides. The name's advisory lock is taken in the
// condition (after the column tests); if a pass held it and changed the
// row, the UPDATE checks the row's newest version again. Times are the
// statement's start, before any wait. The acquire returns the fencing token
// and that start (µs); the rest of the grant is the request's own.
Statements::Statements(const std::string& s)
    : acquire("SELECT * FROM " + s +
              ".acquire($1::text, $2::uuid, $3::bigint, $4::int, $5::text, "
              "$6::text, $7::text, $8::bigint, $9::bigint, $10::boolean)"),
      multi("SELECT * FROM " + s +
            ".acquire_multi($1::text[], $2::uuid, $3::bigint, $4::int, "
            "$5::text, $6::boolean, $7::text, $8::bigint, $9::bigint)"),
      extend("SELECT * FROM " + s + ".extend($1::text, $2::uuid, $3::bigint)"),
      release("SELECT * FROM " + s + ".release($1::text, $2::uuid)"),
      describe("SELECT * FROM " + s + ".describe($1::text)"),
      list("SELECT * FROM " + s + ".list($1::text, $2::int)"),
      counter("SELECT * FROM " + s +
              ".counter($1::text, $2::text, $3::bigint)"),
      fast_acquire(
          "UPDATE " + s +
          ".locks l SET capacity = $4::int, last_fencing = l.last_fencing + "
          "1, h_token = $2::uuid, h_fencing = l.last_fencing + 1, h_ttl_ms = "
          "$3::bigint, h_expires = statement_timestamp() + " +
          s +
          "._ms($3::bigint), h_label = $5::text, h_rkey = '', h_shared = "
          "false, h_granted = statement_timestamp() WHERE l.name = $1::text "
          "AND (l.h_token IS NULL OR l.h_expires <= statement_timestamp()) "
          "AND NOT l.has_queue AND NOT l.has_holders AND "
          "pg_advisory_xact_lock(" +
          s +
          "._key($1::text))::text IS NOT NULL AND "
          // A grant commits durably, whatever the server's default.
          "(current_setting('synchronous_commit') <> 'off' OR "
          "set_config('synchronous_commit', 'on', true) IS NOT NULL) "
          "RETURNING l.h_fencing, " +
          s + "._us(statement_timestamp())"),
      fast_release(
          "UPDATE " + s +
          ".locks l SET h_token = NULL WHERE l.name = $1::text AND l.h_token "
          "= $2::uuid AND l.h_expires > statement_timestamp() AND "
          "NOT l.has_queue AND pg_advisory_xact_lock(" +
          s +
          "._key($1::text))::text IS NOT NULL AND "
          // Nothing is handed over: the commit need not wait for the
          // flush (docs/stores/postgres.md, "Durability").
          "set_config('synchronous_commit', 'off', true) IS NOT NULL "
          "RETURNING 1") {}

PgStore::PgStore(StoreOptions o, ConnParams params, std::string where,
                 std::string safe_url)
    : o_(std::move(o)),
      safe_url_(std::move(safe_url)),
      sql_(o_.schema),
      pool_(std::move(params), std::move(where), o_.pool) {}

Status PgStore::open() {
  const Deadline deadline{Clock::now() + o_.pool.connect_timeout +
                          o_.request_timeout};
  {
    auto c = pool_.get(deadline);
    if (!c.ok()) return std::move(c).error();
    if (Status st = install_schema(**c, o_.schema, deadline); !st.ok()) {
      return st;
    }
  }
  listener_ = std::make_unique<Listener>(pool_, o_.schema + "_wake");
  listener_->wait_ready(Clock::now() + o_.pool.connect_timeout);
  return {};
}

Result<std::vector<Row>> PgStore::rows(const Stmt& sql,
                                       const std::vector<std::string>& params,
                                       const CallContext& ctx,
                                       bool may_be_empty) {
  const Deadline deadline = Deadline::within(ctx, o_.request_timeout);
  auto c = pool_.get(deadline);
  if (!c.ok()) return std::move(c).error();
  auto res = (*c)->query_prepared(sql.name, sql.text, params, deadline);
  if (!res.ok()) return std::move(res).error();
  std::vector<Row> out = parse_rows(res->get());
  if (out.empty() && !may_be_empty) {
    return Error(Errc::internal, "postgres store function returned no row");
  }
  return out;
}

Result<std::vector<Row>> PgStore::call(const Stmt& sql,
                                       const std::vector<std::string>& params,
                                       const CallContext& ctx,
                                       bool may_be_empty) {
  auto r = rows(sql, params, ctx, may_be_empty);
  if (r.ok() && !r->empty() && (*r)[0].kind == "error") return to_error(*r);
  return r;
}

Result<std::vector<Row>> PgStore::call_acquire(const AcquireSpec& spec,
                                               const char* mode,
                                               milliseconds wait_left,
                                               const CallContext& ctx) {
  return rows(
      sql_.acquire,
      {spec.name, spec.token.to_string(), std::to_string(spec.ttl.count()),
       std::to_string(spec.capacity), spec.label, spec.reentrancy_key, mode,
       ms_param(wait_left), std::to_string(o_.waiter_timeout.count()),
       spec.shared ? "true" : "false"},
      ctx);
}

Result<std::vector<Row>> PgStore::call_multi(const MultiSpec& spec,
                                             const char* mode,
                                             milliseconds wait_left,
                                             const CallContext& ctx) {
  return rows(sql_.multi,
              {pg_array(spec.names), spec.reservation.to_string(),
               std::to_string(spec.ttl.count()), std::to_string(spec.capacity),
               spec.label, spec.all_or_nothing ? "true" : "false", mode,
               ms_param(wait_left), std::to_string(o_.waiter_timeout.count())},
              ctx);
}

bool PgStore::try_fast(const AcquireSpec& spec) {
  return !spec.shared && spec.reentrancy_key.empty() && !busy_.busy(spec.name);
}

std::optional<Grant> PgStore::fast_acquire(const AcquireSpec& spec,
                                           const CallContext& ctx) {
  const Deadline deadline = Deadline::within(ctx, o_.request_timeout);
  auto c = pool_.get(deadline);
  if (!c.ok()) return std::nullopt;
  auto res = (*c)->query_prepared(
      sql_.fast_acquire.name, sql_.fast_acquire.text,
      {spec.name, spec.token.to_string(), std::to_string(spec.ttl.count()),
       std::to_string(spec.capacity), spec.label},
      deadline);
  if (!res.ok() || PQntuples(res->get()) != 1 || PQnfields(res->get()) != 2) {
    return std::nullopt;
  }
  const std::int64_t now_us =
      std::strtoll(PQgetvalue(res->get(), 0, 1), nullptr, 10);
  Grant g;
  g.name = spec.name;
  g.token = spec.token;
  g.fencing_token = std::strtoull(PQgetvalue(res->get(), 0, 0), nullptr, 10);
  g.ttl = spec.ttl;
  g.capacity = spec.capacity;
  // The lease ends at the statement's start + ttl (h_expires).
  g.valid_for = std::chrono::duration_cast<std::chrono::microseconds>(spec.ttl);
  g.store_expires_at_ms = now_us / 1000 + spec.ttl.count();
  return g;
}

Result<Grant> PgStore::extend(std::string_view name, const OwnerToken& token,
                              milliseconds ttl, const CallContext& ctx) {
  auto r = call(
      sql_.extend,
      {std::string(name), token.to_string(), std::to_string(ttl.count())}, ctx);
  if (!r.ok()) return std::move(r).error();
  return to_grant((*r)[0], (*r)[0].now_us);
}

Result<ReleaseResult> PgStore::release(std::string_view name,
                                       const OwnerToken& token,
                                       const CallContext& ctx) {
  // The fast path: the inline lease of a name nobody waits for. An error
  // leaves its outcome unknown; the function then answers (a lease already
  // released is "not held", which is also true). A name where it failed on
  // a lease that was held (a waiter, or a lease in holders) is busy for a
  // while (BusyNames).
  const std::string n(name);
  const bool tried_fast = !busy_.busy(n);
  if (tried_fast) {
    const Deadline deadline = Deadline::within(ctx, o_.request_timeout);
    auto c = pool_.get(deadline);
    if (!c.ok()) return std::move(c).error();
    auto f =
        (*c)->query_prepared(sql_.fast_release.name, sql_.fast_release.text,
                             {n, token.to_string()}, deadline);
    if (f.ok() && PQntuples(f->get()) == 1) return ReleaseResult{true, 0};
  }
  auto r = call(sql_.release, {n, token.to_string()}, ctx);
  if (!r.ok()) return std::move(r).error();
  const Row& row = (*r)[0];
  if (tried_fast && row.flag) busy_.mark(n);
  return ReleaseResult{row.flag, static_cast<std::uint32_t>(row.n)};
}

Result<LockInfo> PgStore::describe(std::string_view name,
                                   const CallContext& ctx) {
  auto r = call(sql_.describe, {std::string(name)}, ctx);
  if (!r.ok()) return std::move(r).error();
  auto infos = to_infos(*r);
  if (infos.empty()) return Error(Errc::internal, "describe returned nothing");
  return infos.front();
}

Result<std::vector<LockInfo>> PgStore::list(std::string_view prefix,
                                            std::size_t limit,
                                            const CallContext& ctx) {
  const std::size_t capped = std::min<std::size_t>(limit, 1'000'000);
  auto r = call(sql_.list, {std::string(prefix), std::to_string(capped)}, ctx,
                /*may_be_empty=*/true);
  if (!r.ok()) return std::move(r).error();
  return to_infos(*r);
}

Result<std::int64_t> PgStore::counter(const char* op, std::string_view name,
                                      std::int64_t n, const CallContext& ctx) {
  auto r = call(sql_.counter, {op, std::string(name), std::to_string(n)}, ctx);
  if (!r.ok()) return std::move(r).error();
  return (*r)[0].n;
}

Result<std::int64_t> PgStore::counter_get(std::string_view name,
                                          const CallContext& ctx) {
  return counter("get", name, 0, ctx);
}

Result<std::int64_t> PgStore::counter_add(std::string_view name,
                                          std::int64_t delta,
                                          const CallContext& ctx) {
  return counter("add", name, delta, ctx);
}

Result<std::int64_t> PgStore::counter_take(std::string_view name,
                                           std::int64_t n,
                                           const CallContext& ctx) {
  return counter("take", name, n, ctx);
}

}  // namespace baton::store::pg

namespace baton::store {
namespace {

Result<std::unique_ptr<baton::Store>> open_postgres(const StoreUrl& url) {
  pg::ConnParams params;
  std::string where;
  auto o = pg::settings(url, &params, &where);
  if (!o.ok()) return std::move(o).error();
  auto store = std::make_unique<pg::PgStore>(std::move(*o), std::move(params),
                                             std::move(where), url.safe);
  if (Status st = store->open(); !st.ok()) return st.error();
  return std::unique_ptr<baton::Store>(std::move(store));
}

}  // namespace

const StoreDescriptor& postgres_descriptor() {
  static const StoreDescriptor d = [] {
    StoreDescriptor p;
    p.name = "postgres";
    p.schemes = {"postgres", "postgresql"};
    p.summary = "PostgreSQL tables and PL/pgSQL functions (libpq)";
    p.url_form = "postgres://user[:password]@host[:port][,host2...]/db";
    p.default_port = 5432;
    p.options = pg::options();
    p.open = open_postgres;
    return p;
  }();
  return d;
}

}  // namespace baton::store
