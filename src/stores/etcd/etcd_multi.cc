// stores/etcd/etcd_multi.cc — acquire_some / acquire_all on etcd:// (rule
// 11). acquire_some queues one single request per name under the
// reservation's token and claims what it may. acquire_all queues a waiting
// request on every name in one transaction (one create revision: its place
// in every queue), counts as the exclusive request it is for every request
// behind it (issue 16), and grants all of its keys in one transaction once
// each of them has room counting every request ahead.
#include <algorithm>

#include "core/validate.h"
#include "stores/etcd/etcd_impl.h"

namespace baton::store::etcd {
namespace {

// True if the reservation has a key in every queue.
bool all_queued(const std::vector<Queue>& qs, const OwnerToken& reservation) {
  for (const auto& q : qs) {
    if (q.index_of(reservation) < 0) return false;
  }
  return true;
}

Error withdrawn() {
  return Error(Errc::not_acquired,
               "the reservation was withdrawn while it waited (released by "
               "its token, or its lease ended)");
}

using std::chrono::steady_clock;

}  // namespace

Result<std::vector<Grant>> EtcdStore::acquire_multi(const MultiSpec& spec,
                                                    milliseconds wait) {
  if (Status s = core::validate(spec, wait); !s.ok()) return s.error();
  if (spec.names.size() > options_.max_txn_ops) {
    return Error(
        Errc::invalid_argument,
        std::string(spec.all_or_nothing ? "acquire_all" : "acquire_some") +
            " of " + std::to_string(spec.names.size()) +
            " names needs etcd transactions of as many operations; "
            "this store allows " +
            std::to_string(options_.max_txn_ops) +
            " (max_txn_ops in the URL; raise it together with the "
            "server's --max-txn-ops, 128 by default)");
  }
  return spec.all_or_nothing ? acquire_all(spec, wait)
                             : acquire_some(spec, wait);
}

namespace {

// Creates, for each name of `spec` without a key of the reservation in
// `qs`, a waiting request (each on a lease of its own), all in one
// transaction: the keys of one acquire_all share one create revision, so
// its place is the same in every queue and waits follow revision order
// (no cycle, rule 11). Returns false if nothing was missing.
Result<bool> enqueue_missing(EtcdStore& s, Conn& conn, const MultiSpec& spec,
                             const std::vector<Queue>& qs, bool all) {
  std::vector<std::int64_t> leases;
  auto revoke_all = [&] {
    for (auto id : leases) (void)conn.lease_revoke(id);
  };
  pb::TxnRequest t;
  for (std::size_t i = 0; i < spec.names.size(); ++i) {
    if (qs[i].index_of(spec.reservation) >= 0) continue;
    auto lease = conn.lease_grant(lease_seconds(spec.ttl));
    if (!lease.ok()) {
      revoke_all();
      return std::move(lease).error();
    }
    leases.push_back(lease->id());
    Value v;
    v.all = all;
    v.capacity = spec.capacity;
    v.lease_s = lease_seconds(spec.ttl);
    v.queued_at_ms = wall_ms();
    v.label = spec.label;
    v.owner = spec.reservation.to_string();
    const std::string key = s.new_key(spec.names[i], spec.reservation);
    auto* c = t.add_compare();
    c->set_key(key);
    c->set_target(pb::Compare::CREATE);
    c->set_create_revision(0);
    auto* put = t.add_success()->mutable_request_put();
    put->set_key(key);
    put->set_value(encode(v));
    put->set_lease(lease->id());
  }
  if (leases.empty()) return false;
  auto r = conn.txn(t);
  if (!r.ok() || !r->succeeded()) revoke_all();  // (a retry made some)
  if (!r.ok()) return std::move(r).error();
  return true;
}

Status check_capacity(const MultiSpec& spec, const std::vector<Queue>& qs) {
  for (std::size_t i = 0; i < qs.size(); ++i) {
    if (!qs[i].entries.empty() && qs[i].capacity() != spec.capacity) {
      return Error(Errc::invalid_argument,
                   "lock " + core::quote_name(spec.names[i]) +
                       " has capacity " + std::to_string(qs[i].capacity()) +
                       "; the request asked for " +
                       std::to_string(spec.capacity));
    }
  }
  return {};
}

std::vector<WatchSpec> dirs_of(EtcdStore& s, const MultiSpec& spec) {
  std::vector<WatchSpec> w;
  for (const auto& n : spec.names) {
    const std::string dir = s.lock_dir(n);
    w.push_back({dir, prefix_end(dir)});
  }
  return w;
}

}  // namespace

Result<std::vector<Grant>> EtcdStore::acquire_some(const MultiSpec& spec,
                                                   milliseconds wait) {
  const SteadyTime start = steady_clock::now();
  const SteadyTime until = start + std::min(wait, core::kForeverWait);
  auto qs = read_queues(spec.names);
  if (!qs.ok()) return std::move(qs).error();
  if (Status st = check_capacity(spec, *qs); !st.ok()) return st.error();
  std::unique_ptr<WatchStream> watch;
  SteadyTime last_keepalive = steady_clock::now();
  const auto keepalive_every =
      std::max(milliseconds(100), milliseconds(lease_seconds(spec.ttl) * 333));
  for (bool enqueued = false;; enqueued = true) {
    // Rule 5: a release by the reservation's token withdraws its waiting
    // requests, and the waiting call ends (AcquireOptions::stop relies on
    // it); a key of ours gone since we queued it is never queued again.
    if (enqueued && !all_queued(*qs, spec.reservation)) return withdrawn();
    auto added = enqueue_missing(*this, *conn_, spec, *qs, false);
    if (!added.ok()) return std::move(added).error();
    if (*added) {
      qs = read_queues(spec.names);
      if (!qs.ok()) return std::move(qs).error();
    }
    bool any = false, changed = false;
    for (auto& q : *qs) {
      const int pos = q.index_of(spec.reservation);
      if (pos < 0) continue;
      Entry& e = q.entries[static_cast<std::size_t>(pos)];
      if (e.v.held) {
        any = true;
      } else if (q.taken_before(static_cast<std::size_t>(pos)) <
                 spec.capacity) {
        auto claimed = claim(q, static_cast<std::size_t>(pos));
        if (!claimed.ok()) return std::move(claimed).error();
        if (*claimed) {
          e = std::move(**claimed);
          any = true;
        } else {
          changed = true;
        }
      }
    }
    if (any) break;
    if (!changed) {
      if (wait.count() == 0 || steady_clock::now() >= until ||
          call_deadline_passed()) {
        return std::vector<Grant>{};  // queued requests stay for their TTL
      }
      const SteadyTime next_keepalive = last_keepalive + keepalive_every;
      if (!watch) {
        watch = std::make_unique<WatchStream>(*conn_, dirs_of(*this, spec),
                                              std::min(until, next_keepalive));
        qs = read_queues(spec.names);  // read after the watch is in place
        if (!qs.ok()) return std::move(qs).error();
        continue;
      }
      if (watch->wait(nullptr)) {
        qs = read_queues(spec.names);
        if (!qs.ok()) return std::move(qs).error();
        continue;
      }
      watch.reset();
      if (steady_clock::now() >= next_keepalive) {
        last_keepalive = steady_clock::now();
        for (const auto& q : *qs) {
          const int pos = q.index_of(spec.reservation);
          if (pos >= 0) {
            (void)conn_->keep_alive(
                q.entries[static_cast<std::size_t>(pos)].lease);
          }
        }
      }
    }
    qs = read_queues(spec.names);
    if (!qs.ok()) return std::move(qs).error();
  }
  // Every lease the reservation holds among the names, each renewed to
  // the TTL (rule 4) so that its validity runs from now.
  std::vector<Grant> out;
  for (std::size_t i = 0; i < qs->size(); ++i) {
    const Queue& q = (*qs)[i];
    const int pos = q.index_of(spec.reservation);
    if (pos < 0 || !q.entries[static_cast<std::size_t>(pos)].v.held) continue;
    SteadyTime ref{};
    auto r = renew(q.entries[static_cast<std::size_t>(pos)], spec.ttl, &ref);
    if (!r.ok()) {
      if (r.error().code() == Errc::lock_lost) continue;
      return std::move(r).error();
    }
    out.push_back(grant_of(spec.names[i], *r, spec.ttl, start, ref));
  }
  return out;
}

Result<std::vector<Grant>> EtcdStore::acquire_all(const MultiSpec& spec,
                                                  milliseconds wait) {
  const SteadyTime start = steady_clock::now();
  const SteadyTime until = start + std::min(wait, core::kForeverWait);
  auto qs = read_queues(spec.names);
  if (!qs.ok()) return std::move(qs).error();
  if (Status st = check_capacity(spec, *qs); !st.ok()) return st.error();
  auto withdraw = [&](const std::vector<Queue>& now) {
    for (const auto& q : now) {
      const int pos = q.index_of(spec.reservation);
      if (pos >= 0) (void)remove(q.entries[static_cast<std::size_t>(pos)]);
    }
  };
  std::unique_ptr<WatchStream> watch;
  SteadyTime last_keepalive = steady_clock::now();
  const auto keepalive_every =
      std::max(milliseconds(100), milliseconds(lease_seconds(spec.ttl) * 333));
  for (bool enqueued = false;; enqueued = true) {
    // Rule 5, as in acquire_some: our keys withdrawn by a release (or gone
    // with their lease) end the wait; the rest are removed too.
    if (enqueued && !all_queued(*qs, spec.reservation)) {
      withdraw(*qs);
      return withdrawn();
    }
    if (!enqueued && !all_queued(*qs, spec.reservation)) {
      // Some of the reservation's keys left (e.g. a lease ended) before
      // this retry: queue all of them again together (one revision), so
      // that no waiting key of ours keeps an older place than the others.
      bool any_held = false, any_waiting = false;
      for (const auto& q : *qs) {
        const int pos = q.index_of(spec.reservation);
        if (pos < 0) continue;
        (q.entries[static_cast<std::size_t>(pos)].v.held ? any_held
                                                         : any_waiting) = true;
      }
      if (any_waiting && !any_held) {
        withdraw(*qs);
        qs = read_queues(spec.names);
        if (!qs.ok()) return std::move(qs).error();
      }
    }
    auto added = enqueue_missing(*this, *conn_, spec, *qs, true);
    if (!added.ok()) return std::move(added).error();
    if (*added) {
      qs = read_queues(spec.names);
      if (!qs.ok()) return std::move(qs).error();
      continue;
    }
    bool held_all = true, free_all = true;
    std::size_t blocked = 0;
    for (std::size_t i = 0; i < qs->size(); ++i) {
      const Queue& q = (*qs)[i];
      const auto pos = static_cast<std::size_t>(q.index_of(spec.reservation));
      held_all = held_all && q.entries[pos].v.held;
      if (!q.entries[pos].v.held && q.taken_before(pos) >= spec.capacity) {
        if (free_all) blocked = i;
        free_all = false;
      }
    }
    if (held_all) break;  // a retry of a granted request (rule 17)
    if (free_all) {
      // Each of our keys unchanged since the read (not withdrawn, not
      // granted by a concurrent retry) is all it takes: on every lock the
      // requests ahead of ours can only have left since, keys created
      // since are behind ours, and a grant behind ours counted ours as
      // taken (issue 16; docs/stores/etcd.md, "The queue").
      pb::TxnRequest t;
      for (std::size_t i = 0; i < qs->size(); ++i) {
        const Queue& q = (*qs)[i];
        const Entry& e =
            q.entries[static_cast<std::size_t>(q.index_of(spec.reservation))];
        auto* c = t.add_compare();
        c->set_key(e.key);
        c->set_target(pb::Compare::MOD);
        c->set_mod_revision(e.mod_rev);
        Value v = e.v;
        v.held = true;
        v.fencing = 0;
        auto* put = t.add_success()->mutable_request_put();
        put->set_key(e.key);
        put->set_value(encode(v));
        put->set_ignore_lease(true);
      }
      auto r = conn_->txn(t);
      if (!r.ok()) return std::move(r).error();
      if (r->succeeded()) {
        qs = read_queues(spec.names);
        if (!qs.ok()) return std::move(qs).error();
        continue;  // held_all on the next round
      }
    } else if (wait.count() == 0) {
      const auto holders = holders_of((*qs)[blocked]);
      withdraw(*qs);
      return Error(Errc::not_acquired,
                   "lock " + core::quote_name(spec.names[blocked]) + " is held")
          .with_holders(holders);
    } else if (steady_clock::now() >= until || call_deadline_passed()) {
      withdraw(*qs);
      return Error(Errc::timeout,
                   "not all of the " + std::to_string(spec.names.size()) +
                       " locks came free in time (" +
                       core::quote_name(spec.names[blocked]) + " stayed held)");
    } else {
      const SteadyTime next_keepalive = last_keepalive + keepalive_every;
      if (!watch) {
        watch = std::make_unique<WatchStream>(*conn_, dirs_of(*this, spec),
                                              std::min(until, next_keepalive));
        qs = read_queues(spec.names);  // read after the watch is in place
        if (!qs.ok()) return std::move(qs).error();
        continue;
      }
      if (watch->wait(nullptr)) {
        qs = read_queues(spec.names);
        if (!qs.ok()) return std::move(qs).error();
        continue;
      }
      watch.reset();
      if (steady_clock::now() >= next_keepalive) {
        last_keepalive = steady_clock::now();
        for (const auto& q : *qs) {
          (void)conn_->keep_alive(
              q.entries[static_cast<std::size_t>(q.index_of(spec.reservation))]
                  .lease);
        }
      }
    }
    qs = read_queues(spec.names);
    if (!qs.ok()) return std::move(qs).error();
  }
  std::vector<Grant> out;
  for (std::size_t i = 0; i < qs->size(); ++i) {
    const Queue& q = (*qs)[i];
    const Entry& e =
        q.entries[static_cast<std::size_t>(q.index_of(spec.reservation))];
    SteadyTime ref{};
    auto r = renew(e, spec.ttl, &ref);
    if (!r.ok()) return std::move(r).error();
    out.push_back(grant_of(spec.names[i], *r, spec.ttl, start, ref));
  }
  return out;
}

}  // namespace baton::store::etcd
