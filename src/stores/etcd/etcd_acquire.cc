// stores/etcd/etcd_acquire.cc — acquire on etcd://: the fast path (one
// transaction creates the key already granted when the lock has no key at
// all), the queue (one key per request, FIFO by create revision), the wait
// (a watch on the key just ahead), reentrancy and retries by owner token.
#include <algorithm>

#include "core/validate.h"
#include "stores/etcd/etcd_impl.h"

namespace baton::store::etcd {
namespace {

using std::chrono::steady_clock;

Error busy(std::string_view name, std::vector<HolderInfo> holders) {
  return Error(Errc::not_acquired,
               "lock " + core::quote_name(name) + " is held")
      .with_holders(std::move(holders));
}

Error wrong_capacity(std::string_view name, std::uint32_t has,
                     std::uint32_t asked) {
  return Error(Errc::invalid_argument,
               "lock " + core::quote_name(name) + " has capacity " +
                   std::to_string(has) + "; the request asked for " +
                   std::to_string(asked));
}

}  // namespace

Result<Grant> EtcdStore::acquire(const AcquireSpec& spec, milliseconds wait) {
  if (Status s = core::validate(spec, wait); !s.ok()) return s.error();
  const SteadyTime start = steady_clock::now();
  const SteadyTime until = core::is_forever(wait)
                               ? SteadyTime::max()
                               : start + std::min(wait, core::kForeverWait);
  const std::string dir = lock_dir(spec.name);
  // This store's key for the request (a retry's, or a reused one).
  std::string key = key_for(spec.name, spec.token);
  const std::int64_t secs = lease_seconds(spec.ttl);
  Value mine;
  mine.held = true;
  mine.capacity = spec.capacity;
  mine.lease_s = secs;
  mine.queued_at_ms = wall_ms();
  mine.label = spec.label;
  mine.reentrancy_key = spec.reentrancy_key;
  mine.shared = spec.shared;
  mine.owner = spec.token.to_string();

  // 1. A lease (the store's shared one, or one of its own with
  // lease=own), then one transaction: if the lock has no key at all, the
  // request's key is created granted (fencing: this write's revision);
  // otherwise the transaction reads the queue. A queued request gets a
  // lease of its own (step 2): its waiter keeps it alive.
  SteadyTime refreshed = steady_clock::now();
  std::int64_t lease_id = 0;
  bool lease_shared = false;
  std::int64_t granted_s = secs;  // the length etcd gave the own lease
  auto drop_lease = [&] {
    if (lease_id != 0 && !lease_shared) revoke_later(lease_id);
    lease_id = 0;
    lease_shared = false;
  };
  // The request ends here without a grant: its key, if this call knows it
  // is gone (never made, or removed), may be reused.
  auto end_key = [&](bool gone) { key_done(spec.name, spec.token, gone); };
  auto withdraw = [&](const Entry& e) {
    auto r = remove(e);
    end_key(r.ok() && *r);
  };
  auto grant_own = [&]() -> Status {
    refreshed = steady_clock::now();
    auto lease = conn_->lease_grant(secs);
    if (!lease.ok()) return std::move(lease).error();
    lease_id = lease->id();
    lease_shared = false;
    granted_s = lease->ttl();
    return {};
  };
  // Below 1 s no sharing: such a lock is extended within a fraction of a
  // second, and the first extend of a key on a shared lease moves it (a
  // LeaseGrant and a Txn) where a key of its own needs only a keep-alive.
  if (share_leases() && spec.ttl >= kShareFrom) {
    auto l = shared_lease(secs, spec.ttl, &refreshed);
    if (!l.ok()) return std::move(l).error();
    lease_id = *l;
    lease_shared = true;
  } else if (Status s = grant_own(); !s.ok()) {
    return s.error();
  }
  mine.shared_lease = lease_shared;
  pb::TxnRequest fast;
  auto set_put = [&](pb::PutRequest* put) {
    put->set_key(key);
    put->set_value(encode(mine));
    put->set_lease(lease_id);
  };
  {
    auto* c = fast.add_compare();
    c->set_key(dir);
    c->set_range_end(prefix_end(dir));
    c->set_target(pb::Compare::CREATE);
    c->set_create_revision(0);  // no key in the lock's range
    set_put(fast.add_success()->mutable_request_put());
    if (spec.shared) {
      // Rule 18: a shared request is granted at once too if every key of
      // the lock is shared (no writer holds or waits) and it has no key
      // yet (a retry finds its own below).
      auto* inner = fast.add_failure()->mutable_request_txn();
      auto* absent = inner->add_compare();
      absent->set_key(key);
      absent->set_target(pb::Compare::CREATE);
      absent->set_create_revision(0);
      auto* readers = inner->add_compare();
      readers->set_key(dir);
      readers->set_range_end(prefix_end(dir));
      readers->set_target(pb::Compare::VALUE);
      readers->set_result(pb::Compare::GREATER);
      readers->set_value(std::string(kSharedFloor));
      set_put(inner->add_success()->mutable_request_put());
    }
    *fast.add_failure()->mutable_request_range() = dir_range(dir);
  }
  // The response of the failure branch's range (after the shared one's
  // transaction, if any), and whether that transaction granted.
  const int range_at = spec.shared ? 1 : 0;
  auto shared_fast = [&](const pb::TxnResponse& t) {
    return spec.shared && !t.succeeded() &&
           t.responses(0).response_txn().succeeded();
  };
  auto r = conn_->txn(fast);
  if (!r.ok() && lease_shared && r.error().code() == Errc::lock_lost) {
    // etcd no longer knows the shared lease (a stall, a restored member):
    // once more on a lease of this request's own.
    forget_shared(lease_id);
    lease_id = 0;
    if (Status s = grant_own(); !s.ok()) return s.error();
    mine.shared_lease = false;
    set_put(fast.mutable_success(0)->mutable_request_put());
    if (spec.shared) {
      set_put(fast.mutable_failure(0)
                  ->mutable_request_txn()
                  ->mutable_success(0)
                  ->mutable_request_put());
    }
    r = conn_->txn(fast);
  }
  if (!r.ok()) {
    drop_lease();
    return std::move(r).error();
  }
  if (r->succeeded() || shared_fast(*r)) {
    Entry e;
    e.key = key;
    e.token = spec.token;
    e.create_rev = e.mod_rev = r->header().revision();
    e.lease = lease_id;
    e.v = mine;
    return grant_of(spec.name, e, spec.ttl, start, refreshed);
  }
  Queue q = queue_of(dir, r->responses(range_at).response_range());
  q.revision = r->header().revision();

  std::unique_ptr<WatchStream> watch;
  std::string watched_ahead;  // the key ahead that `watch` covers
  bool queued = false;        // this call created the key (or found it queued)
  std::int64_t my_lease = 0;  // the lease of the key found queued
  SteadyTime last_keepalive = refreshed;
  auto keepalive_every =
      std::max(milliseconds(100), milliseconds(granted_s * 1000 / 3));
  // A claimed request. A waiter's lease was last renewed at
  // last_keepalive (its validity counts from there: honest, shorter); it
  // is renewed again in the background, off the handoff's path, if that
  // was longer ago than shared_window(ttl) (the validity a shared lease
  // may cost too), and before returning if it would leave the grant less
  // than 3/4 of its TTL.
  auto granted = [&](Entry e, bool waited) -> Result<Grant> {
    if (waited && steady_clock::now() - last_keepalive > spec.ttl / 4) {
      last_keepalive = steady_clock::now();
      auto ka = conn_->keep_alive(e.lease);
      if (!ka.ok()) return std::move(ka).error();
      if (*ka == 0) {
        return Error(Errc::lock_lost, "lease of lock " +
                                          core::quote_name(spec.name) +
                                          " ran out as it was granted");
      }
    } else if (waited &&
               steady_clock::now() - last_keepalive > shared_window(spec.ttl)) {
      keep_alive_later(e.lease);
    }
    if (spec.capacity == 1 && !spec.shared) remember_next(e.key, q);
    return grant_of(spec.name, e, spec.ttl, start, last_keepalive);
  };
  for (int rounds = 0;; ++rounds) {
    int pos = q.index_of(spec.token);
    if (pos < 0 && !queued) {
      // Rule 12: join a live lease with the same reentrancy key.
      if (!spec.reentrancy_key.empty()) {
        bool joined = false, changed = false;
        Entry grant_entry;
        for (const auto& h : q.entries) {
          if (!h.v.held || h.v.reentrancy_key != spec.reentrancy_key) continue;
          Value v = h.v;
          v.holds += 1;
          v.fencing = static_cast<std::int64_t>(h.fencing());
          pb::TxnRequest t;
          auto* c = t.add_compare();
          c->set_key(h.key);
          c->set_target(pb::Compare::MOD);
          c->set_mod_revision(h.mod_rev);
          auto* put = t.add_success()->mutable_request_put();
          put->set_key(h.key);
          put->set_value(encode(v));
          put->set_ignore_lease(true);
          auto w = conn_->txn(t);
          if (!w.ok()) {
            drop_lease();
            return std::move(w).error();
          }
          if (!w->succeeded()) {
            changed = true;
            break;
          }
          grant_entry = h;
          grant_entry.v = v;
          grant_entry.mod_rev = w->header().revision();
          joined = true;
          break;
        }
        if (joined) {
          drop_lease();
          end_key(true);  // the join's grant is the holder's key
          SteadyTime ref{};
          auto renewed = renew(grant_entry, spec.ttl, &ref);
          if (!renewed.ok()) return std::move(renewed).error();
          return grant_of(spec.name, *renewed, spec.ttl, start, ref);
        }
        if (changed) {
          auto again = read_queue(spec.name);
          if (!again.ok()) {
            drop_lease();
            return std::move(again).error();
          }
          q = std::move(*again);
          continue;
        }
      }
      if (!q.entries.empty() && q.capacity() != spec.capacity) {
        drop_lease();
        end_key(true);
        return wrong_capacity(spec.name, q.capacity(), spec.capacity);
      }
      // A try that could not be granted leaves no key behind.
      if (wait.count() == 0 &&
          q.blocked(q.entries.size(), spec.shared, spec.capacity)) {
        drop_lease();
        end_key(true);
        return busy(spec.name, holders_of(q));
      }
      // 2. Queue: create the key (waiting) unless a retry of this request
      // made it already, and read the queue in the same transaction. The
      // key gets a lease of its own.
      if (lease_shared || lease_id == 0) {
        drop_lease();
        if (Status s = grant_own(); !s.ok()) return s.error();
        last_keepalive = refreshed;
        keepalive_every =
            std::max(milliseconds(100), milliseconds(granted_s * 1000 / 3));
      }
      Value waiting = mine;
      waiting.held = false;
      waiting.shared_lease = false;
      pb::TxnRequest t;
      auto* c = t.add_compare();
      c->set_key(key);
      c->set_target(pb::Compare::CREATE);
      c->set_create_revision(0);
      auto* put = t.add_success()->mutable_request_put();
      put->set_key(key);
      put->set_value(encode(waiting));
      put->set_lease(lease_id);
      *t.add_success()->mutable_request_range() = dir_range(dir);
      *t.add_failure()->mutable_request_range() = dir_range(dir);
      auto w = conn_->txn(t);
      if (!w.ok()) {
        drop_lease();
        return std::move(w).error();
      }
      if (w->succeeded()) {
        queued = true;
      } else {
        drop_lease();  // a retry of this request has its own key and lease
      }
      q = queue_of(dir, w->responses(w->succeeded() ? 1 : 0).response_range());
      q.revision = w->header().revision();
      if (!w->succeeded() && q.index_of(spec.token) < 0) {
        // The key is taken by an older request of this store (its create
        // was applied after this store saw it gone): a new key.
        key = new_key(spec.name, spec.token);
      }
      continue;
    }
    if (pos < 0) {
      // Our key is gone while we waited. With its lease alive, someone
      // released the request by its token (rule 5: withdrawn); with the
      // lease gone, this process stalled past the lease's TTL and etcd
      // dropped the key (the caller may retry with the same token).
      auto left = conn_->time_to_live(my_lease);
      drop_lease();
      end_key(true);
      if (left.ok() && *left >= 0) revoke_later(my_lease);
      if (left.ok() && *left < 0) {
        return Error(Errc::unavailable,
                     "the request for lock " + core::quote_name(spec.name) +
                         " vanished while it waited (its etcd lease ran "
                         "out); retry with the same token");
      }
      return Error(Errc::not_acquired, "the request for lock " +
                                           core::quote_name(spec.name) +
                                           " was withdrawn while it waited");
    }
    const Entry& me = q.entries[static_cast<std::size_t>(pos)];
    if (me.key != key) {  // a retry found the request under another key
      key = me.key;
      key_is(spec.name, spec.token, key);
    }
    if (lease_id != 0 && me.lease != lease_id) drop_lease();
    // Queued by this call in an earlier round and now held: a release
    // granted it (the handoff) before our watch could show it.
    if (queued && me.v.held) handed_.fetch_add(1, std::memory_order_relaxed);
    queued = true;
    my_lease = me.lease;
    if (me.v.held) {
      // A retry (rule 17): the lease this token already holds.
      SteadyTime ref{};
      auto renewed = renew(me, spec.ttl, &ref);
      if (!renewed.ok()) return std::move(renewed).error();
      return grant_of(spec.name, *renewed, spec.ttl, start, ref);
    }
    if (q.entries[0].v.capacity != spec.capacity) {
      withdraw(me);
      return wrong_capacity(spec.name, q.entries[0].v.capacity, spec.capacity);
    }
    if (!q.blocked(static_cast<std::size_t>(pos), me.v.shared, spec.capacity)) {
      auto claimed = claim(q, static_cast<std::size_t>(pos));
      if (!claimed.ok()) return std::move(claimed).error();
      if (*claimed) return granted(std::move(**claimed), rounds > 1);
    } else if (wait.count() == 0) {
      withdraw(me);
      return busy(spec.name, holders_of(q));
    } else if (steady_clock::now() >= until || call_deadline_passed()) {
      withdraw(me);
      return Error(Errc::timeout,
                   "timed out waiting for lock " + core::quote_name(spec.name));
    } else {
      // 3. Wait for the key just ahead to go (a mutex, whether the key
      // ahead is a single request or a waiting acquire_all, which counts as
      // the exclusive request it is; or our own key, withdrawn by a
      // release), else (a semaphore) for any key of the lock to go. A shared
      // request waits for the nearest exclusive request ahead instead (rule
      // 18): the shared requests between two exclusive ones all go when the
      // first of them does, and a release wakes only those and the exclusive
      // request right behind it. The watch covers just those two keys (else the
      // lock's keys: etcd then sends every waiter every delete) and is opened
      // before the read it guards, again when the key ahead changed; it stays
      // open until the next keep-alive.
      const SteadyTime next_keepalive = last_keepalive + keepalive_every;
      const int ahead_at =
          spec.capacity != 1 || pos == 0 ? -1
          : me.v.shared ? q.exclusive_before(static_cast<std::size_t>(pos))
                        : pos - 1;
      const std::string ahead =
          ahead_at < 0 ? std::string()
                       : q.entries[static_cast<std::size_t>(ahead_at)].key;
      if (!watch || watched_ahead != ahead) {
        std::vector<WatchSpec> keys;
        if (ahead.empty()) {
          keys.push_back({dir, prefix_end(dir)});
        } else {
          keys.push_back({ahead, std::string()});
          // Its puts too: a release that grants this request in its own
          // transaction (the handoff) puts its key first, and etcd then
          // sends that event first (7 times in 8; see "The release grants
          // the next in line"): the grant arrives with the wake-up.
          keys.push_back({me.key, std::string(), true});
        }
        watch.reset();
        watch = std::make_unique<WatchStream>(*conn_, keys,
                                              std::min(until, next_keepalive));
        watched_ahead = ahead;
      } else {
        const std::string own = me.key;
        const std::int64_t own_lease = me.lease;
        const bool woke = watch->wait([&](const std::string& k) {
          return ahead.empty() || k == ahead || k == own;
        });
        if (call_deadline_passed()) {
          return Error(Errc::timeout, "waiting for lock " +
                                          core::quote_name(spec.name) +
                                          ": the call deadline passed");
        }
        if (woke) {
          wakeups_.fetch_add(1, std::memory_order_relaxed);
          if (!ahead.empty() && q.entries[0].v.capacity == 1) {
            // The key just ahead went: claim at once if this request is
            // now first, or (shared) has no exclusive request ahead any
            // more (the claim reads the queue if not).
            const Entry waiter = me;
            if (const pb::KeyValue* kv = watch->put_of(own);
                kv != nullptr && !waiter.v.shared) {
              // The handoff's put of our key, as etcd committed it: no read.
              Entry e;
              if (parse_entry(dir, kv->key(), kv->create_revision(),
                              kv->mod_revision(), kv->lease(), kv->value(),
                              &e) &&
                  e.v.held && e.create_rev == waiter.create_rev &&
                  e.token == spec.token) {
                handed_.fetch_add(1, std::memory_order_relaxed);
                handed_by_event_.fetch_add(1, std::memory_order_relaxed);
                return granted(std::move(e), true);
              }
            }
            if (!waiter.v.shared) {
              // The release that woke us may have granted us in its own
              // transaction (the handoff): the member that sent the delete
              // has applied it, so a serializable read of our key there
              // shows it (a read from another member may be behind: then
              // the claim below fails on our key's changed mod revision and
              // the queue read shows us held).
              auto mine_now = read_entry(spec.name, spec.token, true);
              if (!mine_now.ok()) return std::move(mine_now).error();
              if (*mine_now && (*mine_now)->v.held &&
                  (*mine_now)->create_rev == waiter.create_rev) {
                handed_.fetch_add(1, std::memory_order_relaxed);
                return granted(std::move(**mine_now), true);
              }
            }
            auto claimed = waiter.v.shared ? claim_shared(waiter, &q)
                                           : claim_first(waiter, &q);
            if (!claimed.ok()) return std::move(claimed).error();
            if (*claimed) return granted(std::move(**claimed), true);
            continue;
          }
        } else {
          watch.reset();
          if (steady_clock::now() >= until) {
            // The wait is over: withdraw at once, without reading first
            // (the remove must fit in the call's reply grace, rule 7).
            withdraw(me);
            return Error(Errc::timeout, "timed out waiting for lock " +
                                            core::quote_name(spec.name));
          }
          if (steady_clock::now() >= next_keepalive) {
            last_keepalive = steady_clock::now();
            auto ka = conn_->keep_alive(own_lease);
            if (!ka.ok()) return std::move(ka).error();
          }
        }
      }
    }
    auto again = read_queue(spec.name);
    if (!again.ok()) return std::move(again).error();
    q = std::move(*again);
  }
}

}  // namespace baton::store::etcd
