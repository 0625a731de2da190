// stores/etcd/etcd_acquire.cc — one acquire on etcd:// as a Request
// (baton/store.h). ask: the fast path, one transaction that creates the
// key granted when the lock has no key at all, else creates a blocking
// request's key waiting (on the same lease, the store's shared one) and
// reads the queue; a request that found its key already queued, a
// reentrant one and a try use the queue read instead (a try never queues;
// the enqueue of a reentrant request, on a lease of its own, follows its
// look for a hold to join); then, with room, the claim. A key queued on
// the shared lease moves to a lease of its own when its renewal is due
// (etcd_acquire_wait.cc), keeping its place. withdraw: deletes the key.
// Reentrancy and retries by owner token (rules 12, 17) are found in the
// queue.
#include <algorithm>

#include "core/validate.h"
#include "stores/etcd/etcd_impl.h"
#include "stores/etcd/etcd_request.h"

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

Value EtcdRequest::value(bool held) const {
  Value v;
  v.held = held;
  v.capacity = spec_.capacity;
  v.lease_s = lease_seconds(spec_.ttl);
  v.queued_at_ms = wall_ms();
  v.label = spec_.label;
  v.reentrancy_key = spec_.reentrancy_key;
  v.shared = spec_.shared;
  v.owner = spec_.token.to_string();
  return v;
}

Status EtcdRequest::own_lease(const CallContext& ctx) {
  drop_spare();
  const SteadyTime sent = steady_clock::now();
  auto lease = s_.conn().lease_grant(lease_seconds(spec_.ttl), ctx);
  if (!lease.ok()) return std::move(lease).error();
  spare_ = lease->id();
  spare_shared_ = false;
  granted_s_ = lease->ttl();
  kept_alive(sent, ctx);
  return {};
}

void EtcdRequest::drop_spare() {
  if (spare_ != 0 && !spare_shared_) s_.revoke_later(spare_);
  spare_ = 0;
  spare_shared_ = false;
}

void EtcdRequest::kept_alive(SteadyTime at, const CallContext& ctx) {
  last_keepalive_ = at;
  const auto next = at + keepalive_every(granted_s_) - steady_clock::now();
  keepalive_at_ = ctx.now() + std::max(next, steady_clock::duration::zero());
}

Result<Answer> EtcdRequest::ask(AskMode mode, milliseconds,
                                const CallContext& ctx) {
  if (start_ == SteadyTime{}) start_ = steady_clock::now();
  if (key_.empty()) key_ = s_.key_for(spec_.name, spec_.token);
  try_only_ = mode == AskMode::try_only;
  auto fast = fast_path(ctx);
  if (!fast.ok()) return std::move(fast).error();
  if (*fast) return std::move(**fast);
  return settle(ctx);
}

// A lease (the store's shared one, or one of its own with lease=own), then
// one transaction: if the lock has no key at all, the request's key is
// created granted (fencing: this write's revision); otherwise (a shared
// request: unless every key is shared) a blocking request's key is created
// waiting, on the same lease, and the transaction reads the queue into q_
// (nullopt). Rule 8 orders requests by their arrival at the store: queued
// in a later transaction, a request that found the lock taken would let
// one that came between the two (a try finding the lock just released)
// get ahead of it.
Result<std::optional<Answer>> EtcdRequest::fast_path(const CallContext& ctx) {
  const std::int64_t secs = lease_seconds(spec_.ttl);
  granted_s_ = secs;
  Value mine = value(true);
  // Below 1 s no sharing: such a lock is extended within a fraction of a
  // second, and the first extend of a key on a shared lease moves it (a
  // LeaseGrant and a Txn) where a key of its own needs only a keep-alive.
  SteadyTime refreshed{};
  if (s_.options().share_leases && spec_.ttl >= kShareFrom) {
    auto l = s_.shared_lease(secs, spec_.ttl, &refreshed, ctx);
    if (!l.ok()) return std::move(l).error();
    drop_spare();
    spare_ = *l;
    spare_shared_ = true;
    kept_alive(refreshed, ctx);
  } else if (Status st = own_lease(ctx); !st.ok()) {
    return st.error();
  }
  // Not a try (it never queues), nor a reentrant request (it first looks
  // for a hold to join, settle()).
  const bool queue_now = !try_only_ && spec_.reentrancy_key.empty();
  Value waiting = value(false);
  pb::TxnRequest fast;
  pb::TxnRequest* enqueue = nullptr;  // creates the key waiting
  auto set_puts = [&] {
    mine.shared_lease = spare_shared_;
    waiting.shared_lease = spare_shared_;
    if (enqueue != nullptr) {
      pb::PutRequest* put = enqueue->mutable_success(0)->mutable_request_put();
      put->set_key(key_);
      put->set_value(encode(waiting));
      put->set_lease(spare_);
    }
    for (pb::PutRequest* put : {fast.mutable_success(0)->mutable_request_put(),
                                spec_.shared ? fast.mutable_failure(0)
                                                   ->mutable_request_txn()
                                                   ->mutable_success(0)
                                                   ->mutable_request_put()
                                             : nullptr}) {
      if (put == nullptr) continue;
      put->set_key(key_);
      put->set_value(encode(mine));
      put->set_lease(spare_);
    }
  };
  auto* c = fast.add_compare();
  c->set_key(dir_);
  c->set_range_end(prefix_end(dir_));
  c->set_target(pb::Compare::CREATE);
  c->set_create_revision(0);  // no key in the lock's range
  fast.add_success()->mutable_request_put();
  if (spec_.shared) {
    // Rule 18: a shared request is granted at once too if every key of
    // the lock is shared (no writer holds or waits) and it has no key yet
    // (a retry finds its own in the queue).
    auto* inner = fast.add_failure()->mutable_request_txn();
    compare_create(inner, key_, 0);
    auto* readers = inner->add_compare();
    readers->set_key(dir_);
    readers->set_range_end(prefix_end(dir_));
    readers->set_target(pb::Compare::VALUE);
    readers->set_result(pb::Compare::GREATER);
    readers->set_value(std::string(kSharedFloor));
    inner->add_success()->mutable_request_put();
    if (queue_now) enqueue = inner->add_failure()->mutable_request_txn();
  } else if (queue_now) {
    enqueue = fast.add_failure()->mutable_request_txn();
  }
  if (enqueue != nullptr) {
    compare_create(enqueue, key_, 0);  // a retry finds its key queued
    enqueue->add_success()->mutable_request_put();
  }
  *fast.add_failure()->mutable_request_range() = dir_range(dir_);
  set_puts();
  auto r = s_.conn().txn(fast, ctx);
  if (!r.ok() && r.error().code() == Errc::lock_lost) {
    // etcd no longer knows the lease: the shared one (a stall, a restored
    // member), or its own that ran out before the transaction came (a
    // lease of etcd's minimum and a stalled client). Nothing was written:
    // once more on a new lease of its own.
    if (spare_shared_) s_.forget_shared(spare_);
    spare_ = 0;
    if (Status st = own_lease(ctx); !st.ok()) return st.error();
    set_puts();
    r = s_.conn().txn(fast, ctx);
  }
  if (!r.ok()) return std::move(r).error();
  const bool shared_fast = spec_.shared && !r->succeeded() &&
                           r->responses(0).response_txn().succeeded();
  if (r->succeeded() || shared_fast) {
    Entry e;
    e.key = key_;
    e.token = spec_.token;
    e.create_rev = e.mod_rev = r->header().revision();
    e.lease = spare_;
    e.v = mine;
    spare_ = 0;  // the key's now
    return std::optional<Answer>{Answer::granted_with(
        s_.grant_of(spec_.name, e, spec_.ttl, start_, last_keepalive_))};
  }
  const int range_at = spec_.shared || queue_now ? 1 : 0;
  const pb::TxnResponse* enq = nullptr;
  if (enqueue != nullptr) {
    const pb::TxnResponse& first = r->responses(0).response_txn();
    enq = !spec_.shared                ? &first
          : first.responses_size() > 0 ? &first.responses(0).response_txn()
                                       : nullptr;
  }
  if (enq != nullptr && enq->succeeded()) {
    queued_ = true;
    spare_ = 0;  // the key's now; settle() moves a shared one off it
    spare_shared_ = false;
  }
  q_ = queue_of(dir_, r->responses(range_at).response_range());
  q_.revision = r->header().revision();
  return std::optional<Answer>{};
}

// Decides from q_: joins, enqueues, claims, or answers queued.
Result<Answer> EtcdRequest::settle(const CallContext& ctx) {
  for (int round = 0; round < kRounds; ++round) {
    const int pos = q_.index_of(spec_.token);
    if (pos < 0 && !queued_) {
      if (!spec_.reentrancy_key.empty()) {
        bool changed = false;
        auto joined = join(&changed, ctx);
        if (!joined.ok()) return std::move(joined).error();
        if (*joined) return std::move(**joined);
        if (changed) continue;
      }
      if (!q_.entries.empty() && q_.capacity() != spec_.capacity) {
        drop_spare();
        end_key(true);
        return Answer::refused_with(
            wrong_capacity(spec_.name, q_.capacity(), spec_.capacity));
      }
      // A try that could not be granted leaves no key behind.
      if (try_only_ &&
          q_.blocked(q_.entries.size(), spec_.shared, spec_.capacity)) {
        drop_spare();
        end_key(true);
        return Answer::refused_with(busy(spec_.name, s_.holders_of(q_, ctx)));
      }
      if (Status st = enqueue(ctx); !st.ok()) return st.error();
      continue;
    }
    if (pos < 0) return vanished(ctx);
    const Entry& me = q_.entries[static_cast<std::size_t>(pos)];
    if (me.key != key_) {  // a retry found the request under another key
      key_ = me.key;
      s_.key_is(spec_.name, spec_.token, key_);
    }
    if (spare_ != 0 && me.lease == spare_) {
      spare_ = 0;  // its key, made by this request (a reply was lost)
    } else {
      drop_spare();  // a retry of this request made its key and lease
    }
    // Queued by this request before and now held: a release granted it
    // (the handoff) before the watch could show it.
    if (queued_ && me.v.held) s_.count_handed(false);
    queued_ = true;
    me_ = me;
    // A retry (rule 17): the lease this token already holds.
    if (me.v.held) return renewed(me, ctx);
    if (q_.entries[0].v.capacity != spec_.capacity) {
      auto r = s_.remove(me_, ctx);
      end_key(r.ok() && *r);
      return Answer::refused_with(
          wrong_capacity(spec_.name, q_.entries[0].v.capacity, spec_.capacity));
    }
    const auto at = static_cast<std::size_t>(pos);
    if (q_.blocked(at, me.v.shared, spec_.capacity)) {
      if (!try_only_) return queued(pos);
      auto r = s_.remove(me_, ctx);
      end_key(r.ok() && *r);
      return Answer::refused_with(busy(spec_.name, s_.holders_of(q_, ctx)));
    }
    auto claimed = s_.claim(q_, at, ctx);
    if (!claimed.ok()) return std::move(claimed).error();
    if (*claimed) return granted(std::move(**claimed), ctx);
    auto again = s_.read_queue(spec_.name, ctx);  // the key changed
    if (!again.ok()) return std::move(again).error();
    q_ = std::move(*again);
  }
  Answer a = queued(q_.index_of(spec_.token));
  a.look_at = Clock::time_point::min();  // look again at once
  return a;
}

// Rule 12: joins a live lease with the same reentrancy key. nullopt: none
// to join, or (`*changed`) it changed meanwhile and q_ was read again.
Result<std::optional<Answer>> EtcdRequest::join(bool* changed,
                                                const CallContext& ctx) {
  for (const auto& h : q_.entries) {
    if (!h.v.held || h.v.reentrancy_key != spec_.reentrancy_key) continue;
    Value v = h.v;
    v.holds += 1;
    v.fencing = static_cast<std::int64_t>(h.fencing());
    pb::TxnRequest t;
    compare_mod(&t, h.key, h.mod_rev);
    put_same_lease(t.add_success(), h.key, encode(v));
    auto w = s_.conn().txn(t, ctx);
    if (!w.ok()) return std::move(w).error();
    if (!w->succeeded()) {
      auto again = s_.read_queue(spec_.name, ctx);
      if (!again.ok()) return std::move(again).error();
      q_ = std::move(*again);
      *changed = true;
      return std::optional<Answer>{};
    }
    Entry e = h;
    e.v = v;
    e.mod_rev = w->header().revision();
    drop_spare();
    end_key(true);  // the join's grant is the holder's key
    SteadyTime ref{};
    auto renewed = s_.renew(e, spec_.ttl, &ref, ctx);
    if (!renewed.ok()) return std::move(renewed).error();
    return std::optional<Answer>{Answer::granted_with(
        s_.grant_of(spec_.name, *renewed, spec_.ttl, start_, ref))};
  }
  return std::optional<Answer>{};
}

// Creates the key waiting, on a lease of its own (its waiter keeps it
// alive), unless a retry of this request made it already, and reads the
// queue in the same transaction.
Status EtcdRequest::enqueue(const CallContext& ctx) {
  if (spare_ == 0 || spare_shared_) {
    if (Status st = own_lease(ctx); !st.ok()) return st;
  }
  pb::TxnRequest t;
  compare_create(&t, key_, 0);
  auto* put = t.add_success()->mutable_request_put();
  put->set_key(key_);
  put->set_value(encode(value(false)));
  put->set_lease(spare_);
  *t.add_success()->mutable_request_range() = dir_range(dir_);
  *t.add_failure()->mutable_request_range() = dir_range(dir_);
  auto w = s_.conn().txn(t, ctx);
  if (!w.ok() && w.error().code() == Errc::lock_lost) {
    // Its lease ran out before the transaction came (see fast_path):
    // nothing was written; once more on a new one.
    spare_ = 0;
    if (Status st = own_lease(ctx); !st.ok()) return st;
    put->set_lease(spare_);
    w = s_.conn().txn(t, ctx);
  }
  if (!w.ok()) return w.error();
  if (w->succeeded()) {
    queued_ = true;
    spare_ = 0;  // the key's now
  }
  q_ = queue_of(dir_, w->responses(w->succeeded() ? 1 : 0).response_range());
  q_.revision = w->header().revision();
  if (!w->succeeded() && q_.index_of(spec_.token) < 0) {
    // The key is taken by an older request of this store (its create was
    // applied after this store saw it gone): a new key.
    key_ = s_.new_key(spec_.name, spec_.token);
  }
  return {};
}

// A key queued on the lease its request came with (the store's shared
// one, never kept alive: keeping it would keep its other keys too) moves
// to a lease of its own when its renewal is due, as one enqueue() makes.
// Its create revision, its place in the queue, stays. False: the key
// changed meanwhile (a release granted it, or withdrew it).
Result<bool> EtcdRequest::own_waiting_lease(const CallContext& ctx) {
  if (Status st = own_lease(ctx); !st.ok()) return st.error();
  Value v = me_.v;
  v.shared_lease = false;
  pb::TxnRequest t;
  compare_mod(&t, me_.key, me_.mod_rev);
  auto* put = t.add_success()->mutable_request_put();
  put->set_key(me_.key);
  put->set_value(encode(v));
  put->set_lease(spare_);
  auto w = s_.conn().txn(t, ctx);
  if (!w.ok() && w.error().code() == Errc::lock_lost) {
    // Its new lease ran out before the transaction came (see fast_path).
    spare_ = 0;
    if (Status st = own_lease(ctx); !st.ok()) return st.error();
    put->set_lease(spare_);
    w = s_.conn().txn(t, ctx);
  }
  if (!w.ok()) return std::move(w).error();
  if (!w->succeeded()) return false;
  me_.v = v;
  me_.lease = spare_;
  me_.mod_rev = w->header().revision();
  spare_ = 0;  // the key's now
  const int pos = q_.index_of(spec_.token);
  if (pos >= 0) q_.entries[static_cast<std::size_t>(pos)] = me_;
  return true;
}

// The key went while it waited. With its lease alive, someone released the
// request by its token (rule 5: withdrawn); with the lease gone, this
// process stalled past the lease's TTL and etcd dropped the key (the
// engine retries with the same token).
Result<Answer> EtcdRequest::vanished(const CallContext& ctx) {
  auto left = s_.conn().time_to_live(me_.lease, ctx);
  drop_spare();
  end_key(true);
  if (left.ok() && *left >= 0 && !me_.v.shared_lease) {
    s_.revoke_later(me_.lease);
  }
  if (left.ok() && *left < 0) {
    return Error(Errc::unavailable,
                 "the request for lock " + core::quote_name(spec_.name) +
                     " vanished while it waited (its etcd lease ran out); "
                     "retry with the same token");
  }
  return Answer::refused_with(
      Error(Errc::not_acquired, "the request for lock " +
                                    core::quote_name(spec_.name) +
                                    " was withdrawn while it waited"));
}

// A waiter's lease was last renewed at last_keepalive_ (its validity counts
// from there: honest, shorter). It is renewed before the grant is answered
// if that would leave the grant less than 3/4 of its TTL.
bool EtcdRequest::needs_keepalive() const {
  return waited_ && steady_clock::now() - last_keepalive_ > spec_.ttl / 4;
}

// A claimed request (or one a release granted). Renewed in the background,
// off the handoff's path, if its lease's last renewal is older than
// shared_window(ttl) (the validity a shared lease may cost too).
Result<Answer> EtcdRequest::granted(Entry e, const CallContext& ctx) {
  if (e.v.shared_lease) {
    // Queued on the shared lease and granted before its move: renewed by
    // moving it (the shared lease is never kept alive), else its validity
    // counts from the shared lease's grant.
    if (needs_keepalive()) {
      SteadyTime ref{};
      auto moved = s_.renew(e, spec_.ttl, &ref, ctx);
      if (!moved.ok()) return std::move(moved).error();
      e = std::move(*moved);
      last_keepalive_ = ref;
    }
  } else if (needs_keepalive()) {
    const SteadyTime sent = steady_clock::now();
    auto ka = s_.conn().keep_alive(e.lease, ctx);
    if (!ka.ok()) return std::move(ka).error();
    if (*ka == 0) {
      return Error(Errc::lock_lost, "lease of lock " +
                                        core::quote_name(spec_.name) +
                                        " ran out as it was granted");
    }
    last_keepalive_ = sent;
  } else if (waited_ &&
             steady_clock::now() - last_keepalive_ > shared_window(spec_.ttl)) {
    s_.keep_alive_later(e.lease);
  }
  if (spec_.capacity == 1 && !spec_.shared) s_.remember_next(e.key, q_);
  return Answer::granted_with(
      s_.grant_of(spec_.name, e, spec_.ttl, start_, last_keepalive_));
}

Result<Answer> EtcdRequest::renewed(const Entry& e, const CallContext& ctx) {
  SteadyTime ref{};
  auto r = s_.renew(e, spec_.ttl, &ref, ctx);
  if (!r.ok()) return std::move(r).error();
  return Answer::granted_with(
      s_.grant_of(spec_.name, *r, spec_.ttl, start_, ref));
}

Answer EtcdRequest::queued(int pos) const {
  Answer a;
  a.kind = Answer::Kind::queued;
  // Answer::position counts waiting requests only: holders ahead are not
  // ahead in the wait.
  if (pos >= 0) {
    const auto ahead = q_.entries.begin() +
                       std::min<std::ptrdiff_t>(pos, std::ssize(q_.entries));
    a.position = static_cast<std::uint32_t>(
        std::count_if(q_.entries.begin(), ahead,
                      [](const Entry& e) { return !e.v.held; }) +
        1);
  }
  a.look_at = keepalive_at_;
  return a;
}

// The wait is over: deletes the key at once, without reading first (the
// delete must fit in the call's reply grace, rule 7). A grant that came in
// meanwhile goes with it.
Result<Answer> EtcdRequest::withdraw(const CallContext& ctx) {
  watch_.close();
  drop_spare();
  if (queued_ && !me_.key.empty()) {
    auto r = s_.remove(me_, ctx);
    end_key(r.ok() && *r);
    if (!r.ok()) return std::move(r).error();
  } else {
    auto r = s_.release(spec_.name, spec_.token, ctx);
    if (!r.ok()) return std::move(r).error();
  }
  Answer a;
  a.kind = Answer::Kind::expired;
  a.gone = true;
  return a;
}

std::unique_ptr<Request> make_request(EtcdStore& s, const AcquireSpec& spec) {
  return std::make_unique<EtcdRequest>(s, spec);
}

}  // namespace baton::store::etcd
