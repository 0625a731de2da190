// stores/etcd/etcd_acquire_wait.cc — an etcd:// acquire's wait: the watch
// on the key just ahead (and on its own key, whose put brings the grant a
// release hands over), and the look after a wake-up: the handoff's claim,
// or, when due, the renewal of the waiter's lease (for a key queued on the
// store's shared lease: its move to a lease of its own) and a read of the
// queue.
#include <algorithm>

#include "stores/etcd/etcd_impl.h"
#include "stores/etcd/etcd_request.h"

namespace baton::store::etcd {

using std::chrono::steady_clock;

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
  if (queued_ && me_.v.shared_lease) {
    // Most waits end before the shared lease needs renewing: the key moves
    // only then (its move fails if it changed; the read below says how).
    if (steady_clock::now() >= last_keepalive_ + keepalive_every(granted_s_)) {
      auto moved = own_waiting_lease(ctx);
      if (!moved.ok()) return std::move(moved).error();
    }
  } else if (queued_ && steady_clock::now() >=
                            last_keepalive_ + keepalive_every(granted_s_)) {
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

}  // namespace baton::store::etcd
