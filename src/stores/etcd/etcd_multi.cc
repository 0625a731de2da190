// stores/etcd/etcd_multi.cc — acquire_some / acquire_all on etcd:// (rule
// 11) as a MultiRequest. acquire_some queues one single request per name
// under the reservation's token and claims what it may. acquire_all
// queues a waiting request on every name in one transaction (one create
// revision: its place in every queue), counts as the exclusive request it
// is for every request behind it, and grants all of its keys in one
// transaction once each of them has room counting every request ahead.
// The wake-up source is a watch on the locks' ranges (any delete).
#include <algorithm>

#include "core/validate.h"
#include "stores/etcd/etcd_impl.h"

namespace baton::store::etcd {
namespace {

using std::chrono::steady_clock;

// True if the reservation has a key in every queue.
bool all_queued(const std::vector<Queue>& qs, const OwnerToken& reservation) {
  for (const auto& q : qs) {
    if (q.index_of(reservation) < 0) return false;
  }
  return true;
}

// The reservation's entry in q (nullptr: none).
const Entry* mine(const Queue& q, const OwnerToken& reservation) {
  const int pos = q.index_of(reservation);
  return pos < 0 ? nullptr : &q.entries[static_cast<std::size_t>(pos)];
}

Error withdrawn() {
  return Error(Errc::not_acquired,
               "the reservation was withdrawn while it waited (released by "
               "its token, or its lease ended)");
}

MultiAnswer refused(Error e) {
  MultiAnswer a;
  a.kind = MultiAnswer::Kind::refused;
  a.error = std::move(e);
  a.gone = true;
  return a;
}

// Creates, for each name of `spec` without a key of the reservation in
// `qs`, a waiting request (each on a lease of its own), all in one
// transaction: the keys of one acquire_all share one create revision, so
// its place is the same in every queue and waits follow revision order
// (no cycle, rule 11). Returns false if nothing was missing.
Result<bool> enqueue_missing(EtcdStore& s, const MultiSpec& spec,
                             const std::vector<Queue>& qs,
                             const CallContext& ctx) {
  std::vector<std::int64_t> leases;
  auto revoke_all = [&] {
    for (auto id : leases) s.revoke_later(id);
  };
  pb::TxnRequest t;
  for (std::size_t i = 0; i < spec.names.size(); ++i) {
    if (qs[i].index_of(spec.reservation) >= 0) continue;
    auto lease = s.conn().lease_grant(lease_seconds(spec.ttl), ctx);
    if (!lease.ok()) {
      revoke_all();
      return std::move(lease).error();
    }
    leases.push_back(lease->id());
    Value v;
    v.all = spec.all_or_nothing;
    v.capacity = spec.capacity;
    v.lease_s = lease_seconds(spec.ttl);
    v.queued_at_ms = wall_ms();
    v.label = spec.label;
    v.owner = spec.reservation.to_string();
    const std::string key = s.new_key(spec.names[i], spec.reservation);
    compare_create(&t, key, 0);
    auto* put = t.add_success()->mutable_request_put();
    put->set_key(key);
    put->set_value(encode(v));
    put->set_lease(lease->id());
  }
  if (leases.empty()) return false;
  auto r = s.conn().txn(t, ctx);
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

class EtcdMulti final : public MultiRequest {
 public:
  EtcdMulti(EtcdStore& s, const MultiSpec& spec) : s_(s), spec_(spec) {}

  Result<MultiAnswer> ask(AskMode mode, milliseconds wait_left,
                          const CallContext& ctx) override;
  Result<MultiAnswer> look(milliseconds wait_left,
                           const CallContext& ctx) override;
  Result<MultiAnswer> withdraw(const CallContext& ctx) override;
  std::optional<Grant> wait_change(Clock::time_point until,
                                   const CallContext& ctx) override;
  void interrupt() override {
    MultiRequest::interrupt();
    watch_.cancel();
  }

 private:
  bool all() const { return spec_.all_or_nothing; }
  Status read(const CallContext& ctx);
  Result<MultiAnswer> settle_some(const CallContext& ctx);
  Result<MultiAnswer> settle_all(const CallContext& ctx);
  Result<bool> claim_all(const CallContext& ctx);
  // Every lease the reservation holds among the names, each renewed to
  // the TTL (rule 4) so that its validity runs from now.
  Result<MultiAnswer> grants(const CallContext& ctx);
  MultiAnswer waiting() const;
  // Deletes the reservation's keys in qs_ (`waiting_only`: the ones not
  // granted).
  void remove_keys(bool waiting_only, const CallContext& ctx);
  // Whether qs_ shows nothing to do but wait.
  bool quiet() const;
  void kept_alive(SteadyTime at, const CallContext& ctx);

  EtcdStore& s_;
  const MultiSpec spec_;
  std::vector<Queue> qs_;  // the last read, one per name
  bool enqueued_ = false;  // its keys were queued
  bool try_ = false;       // acquire_all, try
  bool fresh_ = false;     // qs_ was read after the watch was opened
  SteadyTime start_{};     // just before the first ask: valid_for's start
  SteadyTime last_keepalive_{};
  Clock::time_point keepalive_at_ = Clock::time_point::max();
  WatchSlot watch_;
  Clock::time_point watch_until_{};
};

Status EtcdMulti::read(const CallContext& ctx) {
  auto qs = s_.read_queues(spec_.names, ctx);
  if (!qs.ok()) return std::move(qs).error();
  qs_ = std::move(*qs);
  return {};
}

void EtcdMulti::kept_alive(SteadyTime at, const CallContext& ctx) {
  last_keepalive_ = at;
  const auto next =
      at + keepalive_every(lease_seconds(spec_.ttl)) - steady_clock::now();
  keepalive_at_ = ctx.now() + std::max(next, steady_clock::duration::zero());
}

Result<MultiAnswer> EtcdMulti::ask(AskMode mode, milliseconds,
                                   const CallContext& ctx) {
  if (start_ == SteadyTime{}) start_ = steady_clock::now();
  if (spec_.names.size() > s_.options().max_txn_ops) {
    return Error(Errc::invalid_argument,
                 std::string(all() ? "acquire_all" : "acquire_some") + " of " +
                     std::to_string(spec_.names.size()) +
                     " names needs etcd transactions of as many operations; "
                     "this store allows " +
                     std::to_string(s_.options().max_txn_ops) +
                     " (max_txn_ops in the URL; raise it together with the "
                     "server's --max-txn-ops, 128 by default)");
  }
  try_ = all() && mode == AskMode::try_only;
  kept_alive(steady_clock::now(), ctx);
  if (Status st = read(ctx); !st.ok()) return st.error();
  if (Status st = check_capacity(spec_, qs_); !st.ok()) {
    return refused(st.error());
  }
  return all() ? settle_all(ctx) : settle_some(ctx);
}

Result<MultiAnswer> EtcdMulti::look(milliseconds, const CallContext& ctx) {
  if (!std::exchange(fresh_, false)) {
    if (steady_clock::now() >=
        last_keepalive_ + keepalive_every(lease_seconds(spec_.ttl))) {
      kept_alive(steady_clock::now(), ctx);
      for (const auto& q : qs_) {
        if (const Entry* e = mine(q, spec_.reservation)) {
          (void)s_.conn().keep_alive(e->lease, ctx);
        }
      }
    }
    if (Status st = read(ctx); !st.ok()) return st.error();
  }
  return all() ? settle_all(ctx) : settle_some(ctx);
}

Result<MultiAnswer> EtcdMulti::settle_some(const CallContext& ctx) {
  for (int round = 0; round < kRounds; ++round) {
    // Rule 5: a release by the reservation's token withdraws its waiting
    // requests, and the waiting call ends (AcquireOptions::stop relies on
    // it); a key of ours gone since we queued it is never queued again.
    if (enqueued_ && !all_queued(qs_, spec_.reservation)) {
      return refused(withdrawn());
    }
    auto added = enqueue_missing(s_, spec_, qs_, ctx);
    if (!added.ok()) return std::move(added).error();
    if (*added) {
      if (Status st = read(ctx); !st.ok()) return st.error();
    }
    enqueued_ = true;
    bool any = false, changed = false;
    for (auto& q : qs_) {
      const int pos = q.index_of(spec_.reservation);
      if (pos < 0) continue;
      const auto at = static_cast<std::size_t>(pos);
      if (q.entries[at].v.held) {
        any = true;
      } else if (q.taken_before(at) < spec_.capacity) {
        auto claimed = s_.claim(q, at, ctx);
        if (!claimed.ok()) return std::move(claimed).error();
        if (*claimed) {
          q.entries[at] = std::move(**claimed);
          any = true;
        } else {
          changed = true;
        }
      }
    }
    if (any) return grants(ctx);
    if (!changed) return waiting();
    if (Status st = read(ctx); !st.ok()) return st.error();
  }
  MultiAnswer a = waiting();
  a.look_at = Clock::time_point::min();
  return a;
}

Result<MultiAnswer> EtcdMulti::settle_all(const CallContext& ctx) {
  for (int round = 0; round < kRounds; ++round) {
    const bool queued = all_queued(qs_, spec_.reservation);
    // Rule 5, as in acquire_some: its keys withdrawn by a release (or gone
    // with their lease) end the wait; the rest are removed too.
    if (enqueued_ && !queued) {
      remove_keys(false, ctx);
      return refused(withdrawn());
    }
    if (!queued) {
      // Some of the reservation's keys left (e.g. a lease ended) before
      // this retry: queue all of them again together (one revision), so
      // that no waiting key of ours keeps an older place than the others.
      bool any_held = false, any_waiting = false;
      for (const auto& q : qs_) {
        if (const Entry* e = mine(q, spec_.reservation)) {
          (e->v.held ? any_held : any_waiting) = true;
        }
      }
      if (any_waiting && !any_held) {
        remove_keys(false, ctx);
        if (Status st = read(ctx); !st.ok()) return st.error();
      }
      auto added = enqueue_missing(s_, spec_, qs_, ctx);
      if (!added.ok()) return std::move(added).error();
      if (Status st = read(ctx); !st.ok()) return st.error();
      enqueued_ = true;
      continue;
    }
    enqueued_ = true;
    bool held_all = true, free_all = true;
    std::size_t blocked = 0;
    for (std::size_t i = 0; i < qs_.size(); ++i) {
      const Queue& q = qs_[i];
      const auto pos = static_cast<std::size_t>(q.index_of(spec_.reservation));
      held_all = held_all && q.entries[pos].v.held;
      if (!q.entries[pos].v.held && q.taken_before(pos) >= spec_.capacity) {
        if (free_all) blocked = i;
        free_all = false;
      }
    }
    if (held_all) return grants(ctx);  // also a retry of a granted request
    if (free_all) {
      auto claimed = claim_all(ctx);
      if (!claimed.ok()) return std::move(claimed).error();
      if (Status st = read(ctx); !st.ok()) return st.error();
      continue;  // held_all on the next round, unless a key changed
    }
    if (!try_) return waiting();
    auto holders = s_.holders_of(qs_[blocked], ctx);
    remove_keys(false, ctx);
    return refused(
        Error(Errc::not_acquired,
              "lock " + core::quote_name(spec_.names[blocked]) + " is held")
            .with_holders(std::move(holders)));
  }
  MultiAnswer a = waiting();
  a.look_at = Clock::time_point::min();
  return a;
}

// Each of our keys unchanged since the read (not withdrawn, not granted by
// a concurrent retry) is all it takes: on every lock the requests ahead of
// ours can only have left since, keys created since are behind ours, and a
// grant behind ours counted ours as taken (docs/stores/etcd.md, "The
// queue").
Result<bool> EtcdMulti::claim_all(const CallContext& ctx) {
  pb::TxnRequest t;
  for (const auto& q : qs_) {
    const Entry& e = *mine(q, spec_.reservation);
    compare_mod(&t, e.key, e.mod_rev);
    Value v = e.v;
    v.held = true;
    v.fencing = 0;
    put_same_lease(t.add_success(), e.key, encode(v));
  }
  auto r = s_.conn().txn(t, ctx);
  if (!r.ok()) return std::move(r).error();
  return r->succeeded();
}

Result<MultiAnswer> EtcdMulti::grants(const CallContext& ctx) {
  MultiAnswer a;
  for (std::size_t i = 0; i < qs_.size(); ++i) {
    const Entry* e = mine(qs_[i], spec_.reservation);
    if (e == nullptr || !e->v.held) {
      ++a.pending;
      continue;
    }
    SteadyTime ref{};
    auto r = s_.renew(*e, spec_.ttl, &ref, ctx);
    if (!r.ok()) {
      if (!all() && r.error().code() == Errc::lock_lost) continue;
      return std::move(r).error();
    }
    a.grants.push_back(s_.grant_of(spec_.names[i], *r, spec_.ttl, start_, ref));
  }
  return a;
}

MultiAnswer EtcdMulti::waiting() const {
  MultiAnswer a;
  for (const auto& q : qs_) {
    const Entry* e = mine(q, spec_.reservation);
    if (e == nullptr || !e->v.held) ++a.pending;
  }
  a.look_at = keepalive_at_;
  return a;
}

void EtcdMulti::remove_keys(bool waiting_only, const CallContext& ctx) {
  for (const auto& q : qs_) {
    const Entry* e = mine(q, spec_.reservation);
    if (e != nullptr && !(waiting_only && e->v.held)) {
      (void)s_.remove(*e, ctx);
    }
  }
}

bool EtcdMulti::quiet() const {
  bool free_all = true;
  for (const auto& q : qs_) {
    const int pos = q.index_of(spec_.reservation);
    if (pos < 0) return false;
    const auto at = static_cast<std::size_t>(pos);
    if (q.entries[at].v.held) return false;
    const bool room = q.taken_before(at) < spec_.capacity;
    if (room && !all()) return false;
    free_all = free_all && room;
  }
  return !(all() && free_all);
}

// Waits for any request of its locks to go: it reads all its queues (one
// transaction) after each delete. The watch is opened before the read it
// guards, again when the wait's end changed.
std::optional<Grant> EtcdMulti::wait_change(Clock::time_point until,
                                            const CallContext& ctx) {
  fresh_ = false;
  const Clock::time_point end = ctx.cap(until);
  if (end <= ctx.now()) return std::nullopt;  // a look is due now
  if (watch_.get() == nullptr || !watch_.get()->usable() ||
      watch_until_ != end) {
    std::vector<WatchSpec> dirs;
    for (const auto& n : spec_.names) {
      const std::string dir = s_.lock_dir(n);
      dirs.push_back({dir, prefix_end(dir)});
    }
    watch_.open(s_.conn(), dirs, steady_at(end, ctx));
    watch_until_ = end;
    if (!read(ctx).ok()) return std::nullopt;  // look() reads again
    fresh_ = true;
    if (!quiet()) return std::nullopt;
  }
  if (interrupted()) return std::nullopt;
  const bool woke = watch_.get()->wait(nullptr);
  fresh_ = false;
  if (!woke) watch_.close();
  return std::nullopt;
}

// The wait is over. acquire_all: its keys go, held or not (a grant that
// came in meanwhile goes with them); acquire_some (cancelled): its keys
// not granted go.
Result<MultiAnswer> EtcdMulti::withdraw(const CallContext& ctx) {
  watch_.close();
  if (!all_queued(qs_, spec_.reservation)) (void)read(ctx);
  remove_keys(!all(), ctx);
  MultiAnswer a;
  a.kind = MultiAnswer::Kind::expired;
  a.gone = true;
  return a;
}

}  // namespace

std::unique_ptr<MultiRequest> make_multi(EtcdStore& s, const MultiSpec& spec) {
  return std::make_unique<EtcdMulti>(s, spec);
}

}  // namespace baton::store::etcd
