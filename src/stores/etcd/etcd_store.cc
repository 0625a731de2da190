// stores/etcd/etcd_store.cc — the etcd:// store's descriptor and open,
// extend, release, describe/list, counters, and its lease thread.
#include "stores/etcd/etcd_store.h"

#include <algorithm>
#include <charconv>
#include <map>

#include "core/duration.h"
#include "core/validate.h"
#include "stores/etcd/etcd_impl.h"
#include "stores/etcd/etcd_security.h"

namespace baton::store {
namespace etcd {
namespace {

Error lost(std::string_view name, std::string_view why) {
  return Error(Errc::lock_lost, "lease on lock " + core::quote_name(name) +
                                    " is not held: " + std::string(why));
}

bool valid_prefix(std::string_view p) {
  if (p.empty() || p.front() == '/' || p.find("//") != std::string::npos) {
    return false;
  }
  return std::all_of(p.begin(), p.end(), [](char ch) {
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
           (ch >= '0' && ch <= '9') || ch == '_' || ch == '-' || ch == '.' ||
           ch == '/';
  });
}

// The store's options from a URL its descriptor parsed: the endpoints, the
// key prefix (the URL's path or `prefix`), TLS and the login
// (etcd_security.h), and the ranges the descriptor's types do not bound.
Result<EtcdOptions> options_of(const StoreUrl& url, TlsFiles* tls) {
  EtcdOptions o;
  o.url = url.safe;
  for (const auto& hp : url.hosts) {
    if (hp.host.empty())
      return bad_url(url, "an endpoint of the list is empty");
    const bool v6 = hp.host.find(':') != std::string::npos;
    o.conn.endpoints.push_back((v6 ? "[" + hp.host + "]" : hp.host) + ":" +
                               std::to_string(hp.port));
  }
  std::string p = url.path;
  if (!p.empty() && url.options.given("prefix")) {
    return bad_url(url, "the key prefix is given twice (the path and prefix=)");
  }
  if (p.empty()) p = url.options.text("prefix");
  while (!p.empty() && p.back() == '/') p.pop_back();
  if (!valid_prefix(p)) {
    return bad_url(url, "key prefix \"" + p +
                            "\" must be /-separated names of [A-Za-z0-9_.-]");
  }
  o.prefix = p;
  const milliseconds timeout = url.options.duration("request_timeout");
  if (timeout < milliseconds(10) || timeout > milliseconds(600000)) {
    return bad_url(url, "request_timeout " + core::format_duration(timeout) +
                            " is out of range (10ms .. 600s)");
  }
  o.conn.request_timeout = timeout;
  o.share_leases = url.options.text("lease") == "shared";
  const std::int64_t ops = url.options.count("max_txn_ops");
  if (ops > static_cast<std::int64_t>(kMaxNamesPerRequest)) {
    return bad_url(url, "max_txn_ops " + std::to_string(ops) +
                            " must be a number from 1 to " +
                            std::to_string(kMaxNamesPerRequest) +
                            " (the server's --max-txn-ops)");
  }
  o.max_txn_ops = static_cast<std::size_t>(ops);
  o.conn.prefix = o.prefix + "/";
  auto sec = security_of(url, &o.conn, tls);
  if (!sec.ok()) return std::move(sec).error();
  return o;
}

Result<std::unique_ptr<baton::Store>> open_etcd(const StoreUrl& url) {
  TlsFiles tls;
  auto o = options_of(url, &tls);
  if (!o.ok()) return std::move(o).error();
  auto conn = std::make_unique<Conn>(o->conn);
  // A wrong password, a missing permission or a TLS mismatch is refused
  // here; a store whose members are down still opens, its calls then say
  // `unavailable` (etcd_security.h).
  auto checked = check_at_open(*conn, o->prefix, tls);
  if (!checked.ok()) return std::move(checked).error();
  return std::unique_ptr<baton::Store>(
      std::make_unique<EtcdStore>(std::move(*o), std::move(conn)));
}

}  // namespace

std::int64_t lease_seconds(milliseconds ttl) {
  return std::max<std::int64_t>(1, (ttl.count() + 999) / 1000);
}

milliseconds shared_window(milliseconds ttl) {
  return std::min(milliseconds(250), ttl / 10);
}

std::int64_t wall_ms() {
  return std::chrono::duration_cast<milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

EtcdStore::EtcdStore(EtcdOptions options, std::unique_ptr<Conn> conn)
    : options_(std::move(options)),
      conn_(std::move(conn)),
      store_id_(OwnerToken::random().to_string().substr(0, 16)),
      revoker_([this] { revoker(); }) {}

EtcdStore::~EtcdStore() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  revoker_.join();
}

void EtcdStore::keep_alive_later(std::int64_t id) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (to_renew_.size() >= 100000) return;
    to_renew_.push_back(id);
  }
  cv_.notify_one();
}

void EtcdStore::revoke_later(std::int64_t id) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (to_revoke_.size() >= 100000) return;  // they expire on their own
    to_revoke_.push_back(id);
  }
  cv_.notify_one();
}

// Revokes the leases of released keys off the caller's path: a release is
// one transaction; the lease would only expire at its TTL otherwise. Left
// over at shutdown: revoked within a second, or left to expire.
void EtcdStore::revoker() {
  using std::chrono::steady_clock;
  std::unique_lock<std::mutex> lk(mu_);
  SteadyTime stop_by{};  // at shutdown: one second for what is left
  for (;;) {
    cv_.wait(lk, [&] {
      return stopping_ || !to_revoke_.empty() || !to_renew_.empty();
    });
    if (to_revoke_.empty() && to_renew_.empty() && stopping_) return;
    if (stopping_ && stop_by == SteadyTime{}) {
      stop_by = steady_clock::now() + milliseconds(1000);
    }
    const SteadyTime until =
        stopping_ ? stop_by : steady_clock::now() + milliseconds(10000);
    // Keep-alives first, and again before every revoke: a granted waiter's
    // renewal is bounded in time, a revoke only tidies up (a long backlog
    // of revokes under contention must not delay it).
    if (!to_renew_.empty()) {
      std::vector<std::int64_t> renew;
      renew.swap(to_renew_);
      const bool last = stopping_;
      lk.unlock();
      if (!last) {
        const CallContext ctx(until);
        for (auto id : renew) (void)conn_->keep_alive(id, ctx);
      }
      lk.lock();
      continue;
    }
    const std::int64_t id = to_revoke_.back();
    to_revoke_.pop_back();
    lk.unlock();
    (void)conn_->lease_revoke(id, CallContext(until));
    lk.lock();
  }
}

Result<std::int64_t> EtcdStore::shared_lease(std::int64_t secs,
                                             milliseconds ttl, SteadyTime* sent,
                                             const CallContext& ctx) {
  const SteadyTime now = std::chrono::steady_clock::now();
  {
    std::lock_guard<std::mutex> lk(mu_);
    auto it = shared_.find(secs);
    if (it != shared_.end() && it->second.sent <= now &&
        now - it->second.sent <= shared_window(ttl)) {
      *sent = it->second.sent;
      return it->second.id;
    }
  }
  *sent = now;
  auto l = conn_->lease_grant(secs, ctx);
  if (!l.ok()) return std::move(l).error();
  std::lock_guard<std::mutex> lk(mu_);
  Shared& sh = shared_[secs];
  if (sh.sent <= now) sh = Shared{l->id(), now};
  return l->id();
}

void EtcdStore::forget_shared(std::int64_t id) {
  std::lock_guard<std::mutex> lk(mu_);
  for (auto it = shared_.begin(); it != shared_.end(); ++it) {
    if (it->second.id == id) {
      shared_.erase(it);
      return;
    }
  }
}

std::string EtcdStore::lock_dir(std::string_view name) const {
  return options_.prefix + "/l/" + escape_name(name) + "/";
}

std::string EtcdStore::counter_key(std::string_view name) const {
  return options_.prefix + "/c/" + escape_name(name);
}

// One per counter call: a random owner token names it.
std::string EtcdStore::counter_marker(std::string_view name) const {
  return options_.prefix + "/co/" + escape_name(name) + "/" +
         OwnerToken::random().to_string();
}

Result<std::int64_t> EtcdStore::parse_counter(const std::string& key,
                                              const std::string& d) {
  std::int64_t value = 0;
  auto [p, ec] = std::from_chars(d.data(), d.data() + d.size(), value);
  if (d.empty() || ec != std::errc() || p != d.data() + d.size()) {
    return Error(Errc::internal,
                 "etcd counter " + key + " holds \"" + d + "\", not a number");
  }
  return value;
}

std::unique_ptr<Request> EtcdStore::request(const AcquireSpec& spec) {
  return make_request(*this, spec);
}

std::unique_ptr<MultiRequest> EtcdStore::request_multi(const MultiSpec& spec) {
  return make_multi(*this, spec);
}

Result<Grant> EtcdStore::extend(std::string_view name, const OwnerToken& token,
                                milliseconds ttl, const CallContext& ctx) {
  const SteadyTime start = std::chrono::steady_clock::now();
  auto e = read_entry(name, token, ctx);
  if (!e.ok()) return std::move(e).error();
  if (!*e || !(*e)->v.held) return lost(name, "it expired or was released");
  SteadyTime refreshed{};
  auto r = renew(**e, ttl, &refreshed, ctx);
  if (!r.ok()) return std::move(r).error();
  return grant_of(name, *r, ttl, start, refreshed);
}

Result<ReleaseResult> EtcdStore::release(std::string_view name,
                                         const OwnerToken& token,
                                         const CallContext& ctx) {
  std::optional<Entry> known;
  {
    std::lock_guard<std::mutex> lk(mu_);
    auto it = granted_.find(id_of(name, token));
    if (it != granted_.end()) {
      known = it->second;
      granted_.erase(it);
    }
  }
  const bool plain_release = known && known->v.holds == 1;
  const std::optional<Entry> next =
      known ? take_next(known->key, plain_release, ctx) : std::nullopt;
  if (plain_release) {
    auto r = release_known(name, token, *known, next, ctx);
    if (!r.ok()) return std::move(r).error();
    if (*r) return **r;
  }
  return release_read(name, token, ctx);
}

Result<std::optional<ReleaseResult>> EtcdStore::release_known(
    std::string_view name, const OwnerToken& token, const Entry& known,
    const std::optional<Entry>& next, const CallContext& ctx) {
  // The lease this store granted, unchanged since (mod revision): one
  // transaction deletes it. A mutex lease whose next in line is known (a
  // single exclusive request that waited, unchanged since: mod revision)
  // is handed to it in the same transaction: the grant is this revision,
  // and the waiter, woken by the delete, finds itself held without a write
  // of its own (one raft commit per handoff instead of two;
  // docs/stores/etcd.md).
  const std::string& key = known.key;
  pb::TxnRequest t;
  compare_mod(&t, key, known.mod_rev);
  pb::TxnRequest* plain = &t;
  if (next) {
    compare_mod(&t, next->key, next->mod_rev);
    // The put first: etcd numbers a transaction's events in op order and
    // sends each watcher's events in the order of its first event (7
    // times in 8: Go's map iteration over 2 watchers), so the waiter's
    // own-key watch usually delivers the grant before the delete wakes it
    // (the waiter then needs no read).
    Value v = next->v;
    v.held = true;
    v.fencing = 0;  // this transaction's revision
    put_same_lease(t.add_success(), next->key, encode(v));
    t.add_success()->mutable_request_delete_range()->set_key(key);
    // The next one left or changed: the plain release.
    plain = t.add_failure()->mutable_request_txn();
    compare_mod(plain, key, known.mod_rev);
  }
  plain->add_success()->mutable_request_delete_range()->set_key(key);
  auto r = conn_->txn(t, ctx);
  if (!r.ok()) return std::move(r).error();
  const bool released =
      r->succeeded() || (next && r->responses_size() > 0 &&
                         r->responses(0).response_txn().succeeded());
  if (!released) return std::optional<ReleaseResult>{};
  key_done(name, token, true);
  if (next && r->succeeded()) handoffs_.fetch_add(1);
  if (!known.v.shared_lease) revoke_later(known.lease);
  return std::optional<ReleaseResult>{ReleaseResult{true, 0}};
}

// Reads the request of `token` and ends it: a queued one is withdrawn, a
// reentrant hold is counted down, a lease is deleted.
Result<ReleaseResult> EtcdStore::release_read(std::string_view name,
                                              const OwnerToken& token,
                                              const CallContext& ctx) {
  for (int attempt = 0; attempt < 100; ++attempt) {
    auto e = read_entry(name, token, ctx);
    if (!e.ok()) return std::move(e).error();
    if (!*e) {
      key_done(name, token, true);
      return ReleaseResult{};
    }
    const Entry& en = **e;
    if (!en.v.held) {  // a queued request: withdrawn (its waiter, if any,
                       // sees the key go with its lease alive)
      auto r = remove(en, ctx, false);
      if (!r.ok()) return std::move(r).error();
      return ReleaseResult{};
    }
    if (en.v.holds > 1) {
      Value v = en.v;
      v.holds -= 1;
      v.fencing = static_cast<std::int64_t>(en.fencing());
      pb::TxnRequest t;
      compare_mod(&t, en.key, en.mod_rev);
      put_same_lease(t.add_success(), en.key, encode(v));
      auto r = conn_->txn(t, ctx);
      if (!r.ok()) return std::move(r).error();
      if (r->succeeded()) return ReleaseResult{true, v.holds};
      continue;  // changed meanwhile: read again
    }
    auto r = remove(en, ctx);
    if (!r.ok()) return std::move(r).error();
    if (*r) {
      key_done(name, token, true);
      return ReleaseResult{true, 0};
    }
  }
  return Error(Errc::unavailable, "etcd at " + conn_->where() + ": lock " +
                                      core::quote_name(name) +
                                      " kept changing while released");
}

Result<LockInfo> EtcdStore::describe(std::string_view name,
                                     const CallContext& ctx) {
  auto q = read_queue(name, ctx);
  if (!q.ok()) return std::move(q).error();
  return info_of(name, *q, ctx);
}

LockInfo EtcdStore::info_of(std::string_view name, const Queue& q,
                            const CallContext& ctx) {
  LockInfo info;
  info.name = std::string(name);
  info.capacity = q.entries.empty() ? 1 : q.capacity();
  info.holders = holders_of(q, ctx);
  const std::int64_t now = wall_ms();
  for (const auto& e : q.entries) {
    if (e.v.held) continue;
    WaiterInfo w;
    w.label = e.v.label;
    w.waited = milliseconds(std::max<std::int64_t>(0, now - e.v.queued_at_ms));
    w.all_or_nothing = e.v.all;
    w.shared = e.v.shared;
    info.waiters.push_back(std::move(w));
  }
  // The newest grant of a mutex is its holder; otherwise the read's
  // revision is >= every revision, so every fencing token, given so far.
  if (info.capacity == 1 && info.holders.size() == 1) {
    info.last_fencing_token = info.holders[0].fencing_token;
  } else {
    info.last_fencing_token = static_cast<std::uint64_t>(q.revision);
  }
  return info;
}

Result<std::vector<LockInfo>> EtcdStore::list(std::string_view prefix,
                                              std::size_t limit,
                                              const CallContext& ctx) {
  const std::string base = options_.prefix + "/l/";
  const std::string from = base + escape_name(prefix);
  pb::RangeRequest req;
  req.set_key(from);
  req.set_range_end(prefix_end(from));
  auto r = conn_->range(req, ctx);
  if (!r.ok()) return std::move(r).error();
  std::map<std::string, Queue> by_dir;  // escaped name -> queue
  for (const auto& kv : r->kvs()) {
    const std::string& key = kv.key();
    const auto slash = key.find('/', base.size());
    if (slash == std::string::npos) continue;
    const std::string esc = key.substr(base.size(), slash - base.size());
    Entry e;
    if (!parse_entry(base + esc + "/", key, kv.create_revision(),
                     kv.mod_revision(), kv.lease(), kv.value(), &e)) {
      continue;
    }
    Queue& q = by_dir[esc];
    q.revision = r->header().revision();
    q.entries.push_back(std::move(e));
  }
  std::vector<std::pair<std::string, Queue*>> named;
  for (auto& [esc, q] : by_dir) {
    std::sort(q.entries.begin(), q.entries.end(),
              [](const Entry& a, const Entry& b) {
                return a.create_rev < b.create_rev;
              });
    named.emplace_back(unescape_name(esc), &q);
  }
  std::sort(named.begin(), named.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<LockInfo> out;
  for (auto& [name, q] : named) {
    if (out.size() >= limit) break;
    out.push_back(info_of(name, *q, ctx));
  }
  return out;
}

Result<std::int64_t> EtcdStore::counter_get(std::string_view name,
                                            const CallContext& ctx) {
  return counter_update(name, false, 0, ctx);
}

Result<std::int64_t> EtcdStore::counter_add(std::string_view name,
                                            std::int64_t delta,
                                            const CallContext& ctx) {
  return counter_update(name, false, delta, ctx);
}

Result<std::int64_t> EtcdStore::counter_take(std::string_view name,
                                             std::int64_t n,
                                             const CallContext& ctx) {
  return counter_update(name, true, n, ctx);
}

// Reads the counter (0 if missing) and writes the new value only over
// exactly what was read (compare-and-swap on the key's mod revision).
//
// Exactly once: Conn sends a request again on the next member when an
// attempt fails (a member killed, a leader lost, no answer in time), and
// an attempt that failed may still have been applied. A CAS sent again
// after its first copy landed fails its compare — which alone is a race
// lost to another client, so the loop would read again and add twice. So
// the write also creates a marker key of this call, on a lease (it goes
// by itself), and the transaction's failure branch reads that marker: if
// it is there, a copy of this very write was applied, and its value is
// the answer.
Result<std::int64_t> EtcdStore::counter_update(std::string_view name, bool take,
                                               std::int64_t delta,
                                               const CallContext& ctx) {
  const std::string key = counter_key(name);
  const std::string marker = counter_marker(name);
  std::int64_t marker_lease = 0;
  for (;;) {
    pb::RangeRequest req;
    req.set_key(key);
    auto r = conn_->range(req, ctx);
    if (!r.ok()) return std::move(r).error();
    std::int64_t value = 0, mod = 0;
    if (r->kvs_size() > 0) {
      auto v = parse_counter(key, r->kvs(0).value());
      if (!v.ok()) return v;
      value = *v;
      mod = r->kvs(0).mod_revision();
    }
    if (!take && delta == 0) return value;
    std::int64_t next = 0;
    if (take) {
      if (value < delta) {
        return Error(Errc::not_acquired, "counter " + core::quote_name(name) +
                                             " is " + std::to_string(value) +
                                             ", less than " +
                                             std::to_string(delta));
      }
      next = value - delta;
    } else if (__builtin_add_overflow(value, delta, &next)) {
      return Error(Errc::invalid_argument,
                   "counter " + core::quote_name(name) + " would overflow");
    }
    if (marker_lease == 0) {
      SteadyTime sent;
      const std::int64_t secs = counter_marker_seconds();
      auto l = shared_lease(secs, std::chrono::seconds(secs), &sent, ctx);
      if (!l.ok()) return std::move(l).error();
      marker_lease = *l;
    }
    pb::TxnRequest t;
    compare_mod(&t, key, mod);  // 0: still missing
    auto* put = t.add_success()->mutable_request_put();
    put->set_key(key);
    put->set_value(std::to_string(next));
    auto* mark = t.add_success()->mutable_request_put();
    mark->set_key(marker);
    mark->set_value(std::to_string(next));
    mark->set_lease(marker_lease);
    t.add_failure()->mutable_request_range()->set_key(marker);
    auto w = conn_->txn(t, ctx);
    if (!w.ok()) {
      // The shared lease ran out under the marker: take a new one.
      if (w.error().code() == Errc::lock_lost) {
        forget_shared(marker_lease);
        marker_lease = 0;
        continue;
      }
      return std::move(w).error();
    }
    if (w->succeeded()) return next;
    if (w->responses_size() > 0 &&
        w->responses(0).response_range().kvs_size() > 0) {
      return parse_counter(marker,
                           w->responses(0).response_range().kvs(0).value());
    }
  }
}

}  // namespace etcd

const StoreDescriptor& etcd_descriptor() {
  static const StoreDescriptor d = [] {
    StoreDescriptor e;
    e.name = "etcd";
    e.schemes = {"etcd", "etcds"};
    e.summary =
        "etcd v3 over gRPC: one key per request, FIFO by create revision, "
        "a watch on the key ahead";
    e.url_form =
        "etcd[s]://[user@]host:port[,host:port...][/prefix][?option=value...]";
    e.default_port = 2379;
    OptionSpec timeout = request_timeout_option("5s");
    timeout.help =
        "longest wait for one answer, over all endpoints (10ms .. 600s)";
    timeout.aliases = {"timeout"};
    e.options = {
        timeout,
        prefix_option("baton",
                      "every key starts with <prefix>/ (/-separated names of "
                      "[A-Za-z0-9_.-]; the URL's path sets it too)"),
        choice_option("lease", "shared", {"shared", "own"},
                      "shared: a lock granted at once with a TTL >= 1s joins "
                      "the store's etcd lease of that length granted within "
                      "min(250ms, TTL/10); own: an etcd lease per key"),
        count_option("max_txn_ops", "128", 1,
                     "the server's --max-txn-ops (1 .. 1024): acquire_some "
                     "and acquire_all of more names are refused"),
    };
    for (auto& opt : etcd::security_options()) e.options.push_back(opt);
    e.open = etcd::open_etcd;
    return e;
  }();
  return d;
}

}  // namespace baton::store
