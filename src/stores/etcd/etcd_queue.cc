// stores/etcd/etcd_queue.cc — the etcd:// store's queue: reading it,
// granting (the claim), withdrawing, renewing leases, grants.
#include <algorithm>

#include "core/validate.h"
#include "stores/etcd/etcd_impl.h"

namespace baton::store::etcd {

using std::chrono::steady_clock;

pb::RangeRequest dir_range(const std::string& dir) {
  pb::RangeRequest req;
  req.set_key(dir);
  req.set_range_end(prefix_end(dir));
  req.set_sort_target(pb::RangeRequest::CREATE);
  req.set_sort_order(pb::RangeRequest::ASCEND);
  return req;
}

Queue queue_of(const std::string& dir, const pb::RangeResponse& r) {
  Queue q;
  q.revision = r.header().revision();
  for (const auto& kv : r.kvs()) {
    Entry e;
    if (parse_entry(dir, kv.key(), kv.create_revision(), kv.mod_revision(),
                    kv.lease(), kv.value(), &e)) {
      q.entries.push_back(std::move(e));
    }
  }
  return q;
}

Result<Queue> EtcdStore::read_queue(std::string_view name,
                                    const CallContext& ctx) {
  const std::string dir = lock_dir(name);
  auto r = conn_->range(dir_range(dir), ctx);
  if (!r.ok()) return std::move(r).error();
  return queue_of(dir, *r);
}

Result<std::vector<Queue>> EtcdStore::read_queues(
    const std::vector<std::string>& names, const CallContext& ctx) {
  pb::TxnRequest t;
  for (const auto& n : names) {
    *t.add_success()->mutable_request_range() = dir_range(lock_dir(n));
  }
  auto r = conn_->txn(t, ctx);
  if (!r.ok()) return std::move(r).error();
  std::vector<Queue> out;
  for (int i = 0; i < r->responses_size(); ++i) {
    Queue q = queue_of(lock_dir(names[static_cast<std::size_t>(i)]),
                       r->responses(i).response_range());
    q.revision = r->header().revision();
    out.push_back(std::move(q));
  }
  return out;
}

Result<std::optional<Entry>> EtcdStore::read_entry(std::string_view name,
                                                   const OwnerToken& token,
                                                   const CallContext& ctx,
                                                   bool serializable) {
  const std::string dir = lock_dir(name);
  const std::optional<std::string> known = known_key(name, token);
  if (!known) {
    // Not a request this store knows the key of (another store's, or an
    // older baton's whose key is the token): find it in the lock's range.
    pb::RangeRequest req = dir_range(dir);
    req.set_serializable(serializable);
    auto r = conn_->range(req, ctx);
    if (!r.ok()) return std::move(r).error();
    Queue q = queue_of(dir, *r);
    const int at = q.index_of(token);
    if (at < 0) return std::optional<Entry>{};
    return std::optional<Entry>{
        std::move(q.entries[static_cast<std::size_t>(at)])};
  }
  pb::RangeRequest req;
  req.set_key(*known);
  req.set_serializable(serializable);
  auto r = conn_->range(req, ctx);
  if (!r.ok()) return std::move(r).error();
  if (r->kvs_size() == 0) return std::optional<Entry>{};
  const auto& kv = r->kvs(0);
  Entry e;
  // The key may hold a later request of this store (this one ended).
  if (!parse_entry(dir, kv.key(), kv.create_revision(), kv.mod_revision(),
                   kv.lease(), kv.value(), &e) ||
      e.token != token) {
    return std::optional<Entry>{};
  }
  return std::optional<Entry>{std::move(e)};
}

Result<std::optional<Entry>> EtcdStore::claim(const Queue& q, std::size_t pos,
                                              const CallContext& ctx) {
  const Entry& me = q.entries[pos];
  pb::TxnRequest t;
  compare_create(&t, me.key, me.create_rev);
  // Nothing else to compare: every request ahead counted as taken
  // (acquire_all too), keys created since the read are behind this one,
  // and any grant behind it counted it (docs/stores/etcd.md, "The queue").
  Value v = me.v;
  v.held = true;
  v.fencing = 0;  // the claim's revision
  put_same_lease(t.add_success(), me.key, encode(v));
  auto r = conn_->txn(t, ctx);
  if (!r.ok()) return std::move(r).error();
  if (!r->succeeded()) return std::optional<Entry>{};
  Entry out = me;
  out.v = v;
  out.mod_rev = r->header().revision();
  return std::optional<Entry>{std::move(out)};
}

Result<std::optional<Entry>> EtcdStore::claim_first(const Entry& me, Queue* q,
                                                    const CallContext& ctx) {
  const std::string dir = me.key.substr(0, me.key.size() - 32);
  pb::TxnRequest t;
  compare_create(&t, me.key, me.create_rev);
  // Still waiting: a release that granted it (the handoff) changed it, and
  // the read of the failure branch then shows it held.
  compare_mod(&t, me.key, me.mod_rev);
  auto* first = t.add_compare();  // every key of the lock: not older
  first->set_key(dir);
  first->set_range_end(prefix_end(dir));
  first->set_target(pb::Compare::CREATE);
  first->set_result(pb::Compare::GREATER);
  first->set_create_revision(me.create_rev - 1);
  return claim_or_read(t, me, dir, q, ctx);
}

Result<std::optional<Entry>> EtcdStore::claim_shared(const Entry& me, Queue* q,
                                                     const CallContext& ctx) {
  const std::string dir = me.key.substr(0, me.key.size() - 32);
  pb::TxnRequest t;
  compare_create(&t, me.key, me.create_rev);
  for (const auto& e : q->entries) {
    if (e.create_rev >= me.create_rev) break;
    if (e.v.shared) continue;
    compare_create(&t, e.key, 0);  // no such key (any more)
  }
  return claim_or_read(t, me, dir, q, ctx);
}

Result<std::optional<Entry>> EtcdStore::claim_or_read(pb::TxnRequest& t,
                                                      const Entry& me,
                                                      const std::string& dir,
                                                      Queue* q,
                                                      const CallContext& ctx) {
  Value v = me.v;
  v.held = true;
  v.fencing = 0;  // the claim's revision
  put_same_lease(t.add_success(), me.key, encode(v));
  *t.add_failure()->mutable_request_range() = dir_range(dir);
  auto r = conn_->txn(t, ctx);
  if (!r.ok()) return std::move(r).error();
  if (!r->succeeded()) {
    *q = queue_of(dir, r->responses(0).response_range());
    q->revision = r->header().revision();
    return std::optional<Entry>{};
  }
  Entry out = me;
  out.v = v;
  out.mod_rev = r->header().revision();
  return std::optional<Entry>{std::move(out)};
}

namespace {

// The request just behind `holder_key` in q if a release may grant it in
// its own transaction: a single exclusive mutex request that waits.
std::optional<Entry> handoff_candidate(const std::string& holder_key,
                                       const Queue& q) {
  std::size_t at = 0;
  while (at < q.entries.size() && q.entries[at].key != holder_key) ++at;
  if (at + 1 >= q.entries.size()) return std::nullopt;
  const Entry& me = q.entries[at];
  const Entry& n = q.entries[at + 1];
  if (me.v.capacity != 1 || me.v.shared || n.v.held || n.v.all || n.v.shared ||
      n.v.capacity != 1 || n.lease == 0) {
    return std::nullopt;
  }
  return n;
}

}  // namespace

void EtcdStore::remember_next(const std::string& holder_key, const Queue& q) {
  // Granted after a wait: the lock is contended. The queue read then is
  // usually older than the requests behind this one, so an empty entry
  // asks the release to look (take_next).
  Entry n = handoff_candidate(holder_key, q).value_or(Entry{});
  std::lock_guard<std::mutex> lk(mu_);
  if (next_of_.size() >= 100000) next_of_.clear();
  next_of_[holder_key] = std::move(n);
}

std::optional<Entry> EtcdStore::take_next(const std::string& holder_key,
                                          bool look, const CallContext& ctx) {
  std::optional<Entry> n;
  {
    std::lock_guard<std::mutex> lk(mu_);
    auto it = next_of_.find(holder_key);
    if (it == next_of_.end()) return std::nullopt;
    n = std::move(it->second);
    next_of_.erase(it);
  }
  if (!look) return std::nullopt;
  if (!n->key.empty()) return n;
  // A serializable read of the lock's first two requests, from the member
  // this store talks to: no round of the leader. It may be behind; the
  // release compares the candidate's mod revision, and any request between
  // this one and the candidate was created before it, so it is in any read
  // that has the candidate.
  const std::string dir = holder_key.substr(0, holder_key.size() - 32);
  pb::RangeRequest req = dir_range(dir);
  req.set_limit(2);
  req.set_serializable(true);
  auto r = conn_->range(req, ctx);
  if (!r.ok()) return std::nullopt;  // the plain release
  return handoff_candidate(holder_key, queue_of(dir, *r));
}

Result<bool> EtcdStore::remove(const Entry& e, const CallContext& ctx,
                               bool revoke) {
  pb::TxnRequest t;
  compare_create(&t, e.key, e.create_rev);
  t.add_success()->mutable_request_delete_range()->set_key(e.key);
  auto r = conn_->txn(t, ctx);
  if (!r.ok()) return std::move(r).error();
  if (r->succeeded() && e.lease != 0 && revoke && !e.v.shared_lease) {
    revoke_later(e.lease);
  }
  return r->succeeded();
}

Result<Entry> EtcdStore::renew(const Entry& e, milliseconds ttl,
                               SteadyTime* refreshed, const CallContext& ctx) {
  const std::string name_q = core::quote_name(e.key);
  auto gone = [&] {
    return Error(Errc::lock_lost,
                 "lease of etcd key " + name_q + " expired or was released");
  };
  const std::int64_t secs = lease_seconds(ttl);
  // A key on a shared lease moves to a lease of its own (keeping the
  // shared one alive would keep its other keys too).
  if (secs == e.v.lease_s && e.lease != 0 && !e.v.shared_lease) {
    *refreshed = steady_clock::now();
    auto ka = conn_->keep_alive(e.lease, ctx);
    if (!ka.ok()) return std::move(ka).error();
    if (*ka == 0) return gone();
    // The lease lives on; make sure the key is still on it (not released).
    pb::RangeRequest req;
    req.set_key(e.key);
    auto r = conn_->range(req, ctx);
    if (!r.ok()) return std::move(r).error();
    if (r->kvs_size() == 0 || r->kvs(0).create_revision() != e.create_rev) {
      return gone();
    }
    return e;
  }
  // A new length: a new lease, and the key moves to it in one transaction
  // that checks it is still the same key.
  *refreshed = steady_clock::now();
  auto lease = conn_->lease_grant(secs, ctx);
  if (!lease.ok()) return std::move(lease).error();
  Value v = e.v;
  v.lease_s = secs;
  v.shared_lease = false;
  if (v.held) v.fencing = static_cast<std::int64_t>(e.fencing());
  pb::TxnRequest t;
  compare_create(&t, e.key, e.create_rev);
  auto* put = t.add_success()->mutable_request_put();
  put->set_key(e.key);
  put->set_value(encode(v));
  put->set_lease(lease->id());
  auto r = conn_->txn(t, ctx);
  if (!r.ok()) {
    // The outcome is unknown: the move may have been applied (its reply
    // lost), and the key then lives on the new lease alone. Revoking it
    // would delete the key under its holder, whose deadline still runs
    // from the last renewal. The new lease is left to run out.
    return std::move(r).error();
  }
  if (!r->succeeded()) {
    revoke_later(lease->id());
    return gone();
  }
  if (e.lease != 0 && !e.v.shared_lease) revoke_later(e.lease);
  Entry out = e;
  out.v = v;
  out.lease = lease->id();
  out.mod_rev = r->header().revision();
  return out;
}

std::vector<HolderInfo> EtcdStore::holders_of(const Queue& q,
                                              const CallContext& ctx) {
  std::vector<HolderInfo> out;
  for (const auto& e : q.entries) {
    if (!e.v.held) continue;
    HolderInfo h;
    h.label = e.v.label;
    h.fencing_token = e.fencing();
    h.holds = e.v.holds;
    h.shared = e.v.shared;
    // etcd reports whole seconds left, rounded down: the lease ends within
    // the next second after that.
    auto left = e.lease == 0 ? Result<std::int64_t>(std::int64_t{0})
                             : conn_->time_to_live(e.lease, ctx);
    const std::int64_t s = left.ok() ? *left : e.v.lease_s;
    h.time_left = s < 0 ? milliseconds(0)
                        : milliseconds(std::min(s + 1, e.v.lease_s) * 1000);
    out.push_back(std::move(h));
  }
  return out;
}

Grant EtcdStore::grant_of(std::string_view name, const Entry& e,
                          milliseconds ttl, SteadyTime call_start,
                          SteadyTime refreshed) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (granted_.size() >= 100000) {  // never released
      granted_.clear();
      next_of_.clear();
    }
    const std::string id = id_of(name, e.token);
    granted_[id] = e;
    if (keys_.size() >= 100000) keys_.clear();
    keys_[id] = e.key;
  }
  Grant g;
  g.name = std::string(name);
  g.token = e.token;
  g.fencing_token = e.fencing();
  g.ttl = ttl;
  g.holds = e.v.holds;
  g.capacity = e.v.capacity;
  g.shared = e.v.shared;
  // A key on a shared lease: the lease's grant was sent before the call
  // (by at most shared_window(ttl)), and validity runs from that send.
  const auto since = refreshed - call_start;
  g.valid_for = std::max(
      std::chrono::microseconds(0),
      std::chrono::duration_cast<std::chrono::microseconds>(since + ttl));
  // etcd has no wall clock a client can read (leases run on the leader's
  // monotonic clock): the expiry is told on this process's wall clock, an
  // estimate that is off by as much as this machine's clock is
  // (docs/stores/etcd.md).
  g.store_expires_at_ms =
      wall_ms() + ttl.count() -
      std::chrono::duration_cast<milliseconds>(steady_clock::now() - refreshed)
          .count();
  return g;
}

}  // namespace baton::store::etcd
