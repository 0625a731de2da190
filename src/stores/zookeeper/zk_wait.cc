// stores/zookeeper/zk_wait.cc — how a queued request waits: what it
// watches, who collects expired holders, and the Waker that watches wake
// (docs/stores/zookeeper.md, "Waiting without a herd").
#include <zookeeper/zookeeper.h>

#include <algorithm>

#include "stores/zookeeper/zk_store.h"

namespace baton::store::zk {

using std::chrono::steady_clock;

void Waker::notify(char what, std::string_view path) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    ++gen_;
    if (!events_.empty() && events_.back().first == what &&
        events_.back().second == path) {
      // The same again (a session event reaches every watch a Waker
      // set): no new news for any reader of the events.
    } else if (events_.size() < keep_) {
      events_.emplace_back(what, path);
    } else {
      dropped_ = true;
    }
  }
  cv_.notify_all();
}

bool Waker::was_deleted(std::string_view path) {
  std::lock_guard<std::mutex> lk(mu_);
  return std::any_of(events_.begin(), events_.end(), [&](const auto& e) {
    return e.first == 'd' && e.second == path;
  });
}

bool Waker::was_changed(std::string_view path) {
  std::lock_guard<std::mutex> lk(mu_);
  return std::any_of(events_.begin(), events_.end(), [&](const auto& e) {
    return e.first == 'c' && e.second == path;
  });
}

bool Waker::only_changed(std::string_view path) {
  std::lock_guard<std::mutex> lk(mu_);
  return !events_.empty() &&
         std::all_of(events_.begin(), events_.end(), [&](const auto& e) {
           return e.first == 'c' && e.second == path;
         });
}

void Waker::forget_events() {
  std::lock_guard<std::mutex> lk(mu_);
  events_.clear();
  dropped_ = false;
}

bool Waker::take_events(std::vector<std::pair<char, std::string>>* out) {
  std::lock_guard<std::mutex> lk(mu_);
  out->clear();
  out->swap(events_);
  return !std::exchange(dropped_, false);
}

bool Waker::wait_until(const Clock& clock, Clock::time_point until,
                       std::uint64_t* seen) {
  std::unique_lock<std::mutex> lk(mu_);
  while (gen_ == *seen && clock.now() < until) {
    clock.wait_until(cv_, lk, until);
  }
  const bool woke = gen_ != *seen;
  *seen = gen_;
  return woke;
}

std::uint64_t Waker::generation() {
  std::lock_guard<std::mutex> lk(mu_);
  return gen_;
}

void Wakeup::arm() {
  if (armed_) return;
  armed_ = true;
  conn_.on_session_event(waker_);
  seen_ = waker_->generation();
}

Clock::time_point Wakeup::at_expiry(std::int64_t expiry_ms,
                                    const CallContext& ctx) const {
  if (expiry_ms == kNever) return Clock::time_point::max();
  // ZooKeeper's clock is at least server_time_lower_bound() now.
  const std::int64_t left = expiry_ms - conn_.server_time_lower_bound() + 1;
  return ctx.now() + milliseconds(std::max<std::int64_t>(left, 1));
}

bool Wakeup::sleep(Clock::time_point until, std::int64_t expiry_ms,
                   const CallContext& ctx) {
  arm();
  const auto t = ctx.cap(std::min(until, at_expiry(expiry_ms, ctx)));
  return waker_->wait_until(ctx.clock(), t, &seen_);
}

Result<bool> ZkStore::reclaim(Queue& q, std::size_t upto,
                              std::int64_t* next_expiry, const CallContext& ctx,
                              bool holders) {
  *next_expiry = kNever;
  const std::size_t front = q.front();
  std::vector<QNode*> due;
  for (std::size_t i = 0; i < upto && i < q.nodes.size(); ++i) {
    QNode& n = q.nodes[i];
    if ((i >= front || !holders) && n.name.kind != Kind::kSome) continue;
    if (!n.loaded) {
      if (Status s = load(n, ctx); !s.ok()) return s.error();
    }
    if (n.gone) return true;  // the queue changed: re-read it
    const std::int64_t e = expiry_of(n);
    if (e == kNever) continue;
    if (e <= conn_->server_time_lower_bound()) {
      due.push_back(&n);
    } else {
      *next_expiry = std::min(*next_expiry, e);
    }
  }
  if (due.empty()) return false;
  // Only ZooKeeper's clock decides: read it, then delete each due node
  // only if it is the version whose expiry passed.
  auto now = server_now(ctx);
  if (!now.ok()) return std::move(now).error();
  bool any = false;
  for (QNode* n : due) {
    if (expiry_of(*n) > *now) {
      *next_expiry = std::min(*next_expiry, expiry_of(*n));
      continue;
    }
    const int rc = conn_->remove(n->path, n->stat.version, ctx);
    if (rc == ZOK || rc == ZNONODE || rc == ZBADVERSION) {
      any = true;  // gone or changed: re-read
    } else {
      return err(rc, "delete expired " + n->path);
    }
  }
  return any;
}

Result<bool> ZkStore::held_back(Queue& q, std::size_t pos,
                                const CallContext& ctx) {
  for (std::size_t i = 0; i < pos && i < q.nodes.size(); ++i) {
    QNode& n = q.nodes[i];
    if (n.name.kind != Kind::kAll) continue;
    if (!n.loaded) {
      if (Status s = load(n, ctx); !s.ok()) return s.error();
    }
    if (!n.gone && n.data.state != State::kHolding) return true;
  }
  return false;
}

Result<bool> ZkStore::watch_ahead(Queue& q, std::size_t pos,
                                  const std::shared_ptr<Waker>& w,
                                  std::int64_t* next_expiry,
                                  const CallContext& ctx) {
  if (pos == 0) return true;
  const std::size_t cap = q.capacity();
  // Our own node too: a release by owner token withdraws it (rule 5), and
  // the waiting call must end at once.
  std::vector<std::size_t> watch = {pos, pos - 1};
  if (q.nodes[pos].name.shared()) {
    // Rule 18: a shared request waits only for the exclusive requests
    // ahead of it; the nearest one leaves last (FIFO), so watch that one.
    for (std::size_t i = pos; i-- > 0;) {
      if (!q.nodes[i].name.shared()) {
        watch[1] = i;
        break;
      }
    }
  } else if (pos == cap) {
    for (std::size_t i = 0; i + 1 < cap; ++i) watch.push_back(i);
  }
  // Data watches fire when a node changes (a waiter ahead becoming a
  // holder writes its node) or goes; each watch also reads the node, so
  // whatever changed between our read of the queue and the watch shows in
  // the watched nodes themselves: one gone, one we had read written since,
  // or one we had not read (a waiter ahead, outside the head) written as
  // a holder since (only a grant makes a node st=h with version > 0). Any
  // other change of the queue cannot let this request in (nothing joins
  // ahead of it; a node ahead that leaves makes the next one's grant write
  // or is the one watched), so no re-read of the queue is needed.
  std::vector<std::string> paths;
  for (std::size_t i : watch) paths.push_back(q.nodes[i].path);
  std::vector<int> rcs;
  std::vector<Stat> stats;
  std::vector<std::string> datas;
  const int rc = conn_->watch(paths, w, &rcs, &stats, &datas, ctx);
  if (rc != ZOK) return err(rc, "watch " + paths[0]);
  for (std::size_t k = 0; k < watch.size(); ++k) {
    if (rcs[k] == ZNONODE) return false;
    if (rcs[k] != ZOK) return err(rcs[k], "watch " + paths[k]);
    const QNode& n = q.nodes[watch[k]];
    if (n.loaded) {
      if (stats[k].version != n.stat.version) return false;  // changed
      continue;
    }
    // Our own node; a request in the head (a holder or about to be: its
    // grant lets no one else in).
    if (k == 0 || watch[k] < q.front()) continue;
    auto d = decode(datas[k]);
    if (!d) return false;  // not baton's: let the re-read say so
    if (d->state == State::kHolding && stats[k].version > 0) return false;
    if (d->state == State::kHolding && next_expiry != nullptr) {
      // A request never written since its create looks like a holder to
      // the next in line once its create's TTL is over (see acquire):
      // look again then, in case it reached the head and its client is
      // not there to take it.
      *next_expiry = std::min(*next_expiry, stats[k].mtime + d->ttl_ms);
    }
  }
  return true;
}

std::optional<Result<ReleaseResult>> ZkStore::hand_over(
    const QNode& n, const NextInLine& next, const CallContext& ctx) {
  // The request behind becomes the holder: the same write its own grant
  // would make (st=h; its zxid the fencing token, its mtime the lease's
  // start), made over the version its reader saw, before the delete in
  // the same transaction, so that its watch on its own node fires before
  // the one on ours. The delete is of the version we hold: if our lease
  // was collected (it expired) or changed, nothing happens. So the grant
  // happens only while nobody else holds, and only to the request first
  // in line then (nothing joins ahead of it). Not our next in line any
  // more (left, or rewritten st=w): nothing happens either.
  NodeData d = next.data;
  d.state = State::kHolding;
  d.fencing = 0;
  const std::vector<Op> ops = {
      Op{Op::kSet, next.path, encode(d), next.version, 0},
      Op{Op::kDelete, n.path, "", n.stat.version, 0}};
  std::vector<OpResult> res;
  const int rc = conn_->multi(ops, &res, ctx);
  if (rc == ZOK) {
    if (steady_clock::now() < n.alive_until) return ReleaseResult{true, 0};
    // Answered late: the write's mtime is the delete's time.
    return ReleaseResult{expiry_of(n) > res[0].stat.mtime, 0};
  }
  if (res.size() == 2 && res[0].rc != ZOK &&
      res[0].rc != ZRUNTIMEINCONSISTENCY) {
    return std::nullopt;
  }
  if (rc == ZNONODE) return ReleaseResult{};
  if (rc == ZBADVERSION) return std::nullopt;  // changed: the plain path sees
  return err(rc, "release " + n.path);
}

std::vector<HolderInfo> ZkStore::holders_of(Queue& q, std::int64_t now,
                                            const CallContext& ctx) {
  std::vector<HolderInfo> out;
  const std::size_t front = q.front();
  for (std::size_t i = 0; i < front; ++i) {
    QNode& n = q.nodes[i];
    if (!n.loaded && !load(n, ctx).ok()) continue;
    if (n.gone || n.data.state != State::kHolding) continue;
    const std::int64_t e = expiry_of(n);
    if (e <= now) continue;
    HolderInfo h;
    h.label = n.data.label;
    h.fencing_token = fencing_of(n);
    h.time_left = milliseconds(e - now);
    h.holds = n.data.holds;
    h.shared = n.name.shared();
    out.push_back(std::move(h));
  }
  return out;
}

}  // namespace baton::store::zk
