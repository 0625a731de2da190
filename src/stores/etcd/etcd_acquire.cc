// stores/etcd/etcd_acquire.cc — one acquire on etcd:// as a Request
// (baton/store.h). ask: the fast path (one transaction creates the key
// already granted when the lock has no key at all, or reads the queue),
// then the enqueue (one transaction creates the waiting key on a lease of
// its own and reads the queue) and, with room, the claim. The wake-up
// source is a watch on the key just ahead and on the request's own key
// (opened before the read it guards); the grant a release hands over
// comes with its event. look: after the delete of the key ahead, one
// transaction claims if nothing is ahead any more (else reads the queue);
// otherwise it renews the waiter's lease when due and reads the queue.
// withdraw: deletes the key. Reentrancy and retries by owner token
// (rules 12, 17) are found in the queue.
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

// What the last wait_change() saw, for the look() that follows it.
enum class Wake {
  none,        // nothing known: renew the lease if due, read the queue
  read,        // the queue was read after the watch was opened
  ahead_gone,  // the key just ahead went (a mutex or a shared request)
  carried,     // the watch event carried the grant (carried_)
};

class EtcdRequest final : public Request {
 public:
  EtcdRequest(EtcdStore& s, const AcquireSpec& spec)
      : s_(s), spec_(spec), dir_(s.lock_dir(spec.name)) {}
  ~EtcdRequest() override { drop_spare(); }

  Result<Answer> ask(AskMode mode, milliseconds wait_left,
                     const CallContext& ctx) override;
  Result<Answer> look(milliseconds wait_left, const CallContext& ctx) override;
  Result<Answer> withdraw(const CallContext& ctx) override;
  std::optional<Grant> wait_change(Clock::time_point until,
                                   const CallContext& ctx) override;
  void interrupt() override {
    Request::interrupt();
    watch_.cancel();
  }

 private:
  // The value of its key, granted (`held`) or waiting.
  Value value(bool held) const;
  Status own_lease(const CallContext& ctx);
  void drop_spare();
  Result<std::optional<Answer>> fast_path(const CallContext& ctx);
  Result<Answer> settle(const CallContext& ctx);
  Result<std::optional<Answer>> join(bool* changed, const CallContext& ctx);
  Status enqueue(const CallContext& ctx);
  Result<Answer> vanished(const CallContext& ctx);
  Result<Answer> handoff(const CallContext& ctx);
  bool needs_keepalive() const;
  Result<Answer> granted(Entry e, const CallContext& ctx);
  Result<Answer> renewed(const Entry& e, const CallContext& ctx);
  Answer queued(int pos) const;
  void kept_alive(SteadyTime at, const CallContext& ctx);
  void end_key(bool gone) { s_.key_done(spec_.name, spec_.token, gone); }
  // The key a waiter at `pos` of q_ watches: the key just ahead (a mutex),
  // the nearest exclusive request ahead (a shared request); "" = the
  // lock's range (a semaphore, or nothing ahead).
  std::string ahead_of(int pos) const;
  // Whether q_ shows this request still waiting behind `ahead`.
  bool still_behind(const std::string& ahead) const;

  EtcdStore& s_;
  const AcquireSpec spec_;
  const std::string dir_;
  std::string key_;  // the request's key (chosen at the first ask)
  bool try_only_ = false;
  SteadyTime start_{};  // just before the first ask: valid_for's start
  // A lease this request got that no key holds (revoked when unused).
  std::int64_t spare_ = 0;
  bool spare_shared_ = false;
  std::int64_t granted_s_ = 0;  // the length etcd gave the waiter's lease
  Queue q_;                     // the last read of the lock's queue
  bool queued_ = false;         // its key is in the queue (made or found)
  Entry me_;                    // its key as last read (queued_)
  bool waited_ = false;         // it waited for a change
  // The waiter's lease: last renewed (sent) at, and the next renewal on
  // the call's clock (the queued answers' look_at).
  SteadyTime last_keepalive_{};
  Clock::time_point keepalive_at_ = Clock::time_point::max();
  Wake wake_ = Wake::none;
  Entry carried_;
  WatchSlot watch_;
  std::string watched_ahead_;  // what watch_ covers, and until when
  Clock::time_point watch_until_{};
};

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
// request: unless every key is shared) the transaction reads the queue
// into q_ (nullopt).
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
  pb::TxnRequest fast;
  auto set_puts = [&] {
    mine.shared_lease = spare_shared_;
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
  q_ = queue_of(dir_, r->responses(spec_.shared ? 1 : 0).response_range());
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

// The key went while it waited. With its lease alive, someone released the
// request by its token (rule 5: withdrawn); with the lease gone, this
// process stalled past the lease's TTL and etcd dropped the key (the
// engine retries with the same token).
Result<Answer> EtcdRequest::vanished(const CallContext& ctx) {
  auto left = s_.conn().time_to_live(me_.lease, ctx);
  drop_spare();
  end_key(true);
  if (left.ok() && *left >= 0) s_.revoke_later(me_.lease);
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
  if (needs_keepalive()) {
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

std::string EtcdRequest::ahead_of(int pos) const {
  if (spec_.capacity != 1 || pos <= 0) return {};
  const int at = me_.v.shared
                     ? q_.exclusive_before(static_cast<std::size_t>(pos))
                     : pos - 1;
  return at < 0 ? std::string() : q_.entries[static_cast<std::size_t>(at)].key;
}

bool EtcdRequest::still_behind(const std::string& ahead) const {
  const int pos = q_.index_of(spec_.token);
  if (pos < 0) return false;
  const auto at = static_cast<std::size_t>(pos);
  const Entry& me = q_.entries[at];
  return !me.v.held && me.create_rev == me_.create_rev &&
         q_.entries[0].v.capacity == spec_.capacity &&
         q_.blocked(at, me.v.shared, spec_.capacity) && ahead_of(pos) == ahead;
}

// Waits for the key just ahead to go (a mutex, whether the key ahead is a
// single request or a waiting acquire_all, which counts as the exclusive
// request it is; or its own key, withdrawn by a release), else (a
// semaphore) for any key of the lock to go. A shared request waits for the
// nearest exclusive request ahead instead (rule 18): the shared requests
// between two exclusive ones all go when the first of them does, and a
// release wakes only those and the exclusive request right behind it. The
// watch covers just those two keys (else the lock's keys: etcd then sends
// every waiter every delete) and is opened before the read it guards,
// again when the key ahead or the wait's end changed.
std::optional<Grant> EtcdRequest::wait_change(Clock::time_point until,
                                              const CallContext& ctx) {
  wake_ = Wake::none;
  waited_ = true;
  const Clock::time_point end = ctx.cap(until);
  if (end <= ctx.now()) return std::nullopt;  // a look is due now
  const std::string ahead = ahead_of(q_.index_of(spec_.token));
  if (watch_.get() == nullptr || !watch_.get()->usable() ||
      watched_ahead_ != ahead || watch_until_ != end) {
    std::vector<WatchSpec> keys;
    if (ahead.empty()) {
      keys.push_back({dir_, prefix_end(dir_)});
    } else {
      keys.push_back({ahead, std::string()});
      // Its puts too: a release that grants this request in its own
      // transaction (the handoff) puts its key first, and etcd then sends
      // that event first (7 times in 8): the grant comes with the wake-up.
      keys.push_back({me_.key, std::string(), true});
    }
    watch_.open(s_.conn(), keys, steady_at(end, ctx));
    watched_ahead_ = ahead;
    watch_until_ = end;
    auto q = s_.read_queue(spec_.name, ctx);
    if (!q.ok()) return std::nullopt;  // look() reads again and says why
    q_ = std::move(*q);
    wake_ = Wake::read;
    if (!still_behind(ahead)) return std::nullopt;
  }
  if (interrupted()) return std::nullopt;
  WatchStream& w = *watch_.get();
  const std::string own = me_.key;
  const bool woke = w.wait([&](const std::string& k) {
    return ahead.empty() || k == ahead || k == own;
  });
  wake_ = Wake::none;
  if (!woke) {
    watch_.close();
    return std::nullopt;
  }
  s_.count_wakeup();
  if (ahead.empty() || q_.entries.empty() || q_.entries[0].v.capacity != 1) {
    return std::nullopt;
  }
  wake_ = Wake::ahead_gone;
  const pb::KeyValue* kv = w.put_of(own);
  Entry e;
  if (kv != nullptr && !me_.v.shared &&
      parse_entry(dir_, kv->key(), kv->create_revision(), kv->mod_revision(),
                  kv->lease(), kv->value(), &e) &&
      e.v.held && e.create_rev == me_.create_rev && e.token == spec_.token) {
    // The handoff's put of its key, as etcd committed it: no read.
    s_.count_handed(true);
    wake_ = Wake::carried;
    carried_ = std::move(e);
    if (needs_keepalive()) return std::nullopt;  // look() renews it
    auto g = granted(carried_, ctx);             // no I/O: answered here
    if (!g.ok() || g->kind != Answer::Kind::granted) return std::nullopt;
    wake_ = Wake::none;
    return std::move(g->grant);
  }
  return std::nullopt;
}

// The key ahead went: claim at once if this request is now first, or
// (shared) has no exclusive request ahead any more (the claim reads the
// queue if not).
Result<Answer> EtcdRequest::handoff(const CallContext& ctx) {
  const Entry waiter = me_;
  if (!waiter.v.shared) {
    // The release that woke it may have granted it in its own transaction
    // (the handoff): the member that sent the delete has applied it, so a
    // serializable read of its key there shows it (a read from another
    // member may be behind: then the claim below fails on the key's
    // changed mod revision and the queue read shows it held).
    auto now = s_.read_entry(spec_.name, spec_.token, ctx, true);
    if (!now.ok()) return std::move(now).error();
    if (*now && (*now)->v.held && (*now)->create_rev == waiter.create_rev) {
      s_.count_handed(false);
      return granted(std::move(**now), ctx);
    }
  }
  auto claimed = waiter.v.shared ? s_.claim_shared(waiter, &q_, ctx)
                                 : s_.claim_first(waiter, &q_, ctx);
  if (!claimed.ok()) return std::move(claimed).error();
  if (*claimed) return granted(std::move(**claimed), ctx);
  return settle(ctx);
}

Result<Answer> EtcdRequest::look(milliseconds, const CallContext& ctx) {
  waited_ = true;
  switch (std::exchange(wake_, Wake::none)) {
    case Wake::carried:
      return granted(std::move(carried_), ctx);
    case Wake::ahead_gone:
      return handoff(ctx);
    case Wake::read:
      return settle(ctx);
    case Wake::none:
      break;
  }
  if (queued_ &&
      steady_clock::now() >= last_keepalive_ + keepalive_every(granted_s_)) {
    const SteadyTime sent = steady_clock::now();
    auto ka = s_.conn().keep_alive(me_.lease, ctx);
    if (!ka.ok()) return std::move(ka).error();
    kept_alive(sent, ctx);
  }
  auto q = s_.read_queue(spec_.name, ctx);
  if (!q.ok()) return std::move(q).error();
  q_ = std::move(*q);
  return settle(ctx);
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

}  // namespace

std::unique_ptr<Request> make_request(EtcdStore& s, const AcquireSpec& spec) {
  return std::make_unique<EtcdRequest>(s, spec);
}

}  // namespace baton::store::etcd
