// stores/zookeeper/zk_multi.cc — acquire_some and acquire_all (rule 11;
// docs/stores/zookeeper.md, "Several locks").
#include <zookeeper/zookeeper.h>

#include <algorithm>

#include "core/validate.h"
#include "stores/call_deadline.h"
#include "stores/zookeeper/zk_store.h"

namespace baton::store::zk {
namespace {

using std::chrono::steady_clock;

// One name of a multi request.
struct Item {
  std::string name;
  std::string path;  // our request node ("" = none)
  int version = 0;
  bool granted = false;
  Grant grant;
};

Error capacity_mismatch(std::string_view name, std::uint32_t has,
                        std::uint32_t asked) {
  return Error(Errc::invalid_argument,
               "lock " + core::quote_name(name) + " has capacity " +
                   std::to_string(has) + "; the request asked for " +
                   std::to_string(asked));
}

}  // namespace

Result<std::vector<Grant>> ZkStore::acquire_multi(const MultiSpec& spec,
                                                  milliseconds wait) {
  if (Status s = core::validate(spec, wait); !s.ok()) return s.error();
  return spec.all_or_nothing ? acquire_all(spec, wait)
                             : acquire_some(spec, wait);
}

Result<std::vector<Grant>> ZkStore::acquire_some(const MultiSpec& spec,
                                                 milliseconds wait) {
  const SteadyTime until =
      core::is_forever(wait) ? SteadyTime::max() : steady_clock::now() + wait;
  NodeData queued;
  queued.state = State::kQueued;
  queued.ttl_ms = spec.ttl.count();
  queued.label = spec.label;
  std::vector<Item> items;
  // Check every name before queueing anything (rule 16).
  for (const auto& name : spec.names) {
    auto q = read_queue(name);
    if (!q.ok()) return std::move(q).error();
    if (!q->nodes.empty() && q->capacity() != spec.capacity) {
      return capacity_mismatch(name, q->capacity(), spec.capacity);
    }
  }
  // Enqueue, or refresh what this reservation has queued (its queue time
  // runs `ttl` from this call).
  for (const auto& name : spec.names) {
    Item it;
    it.name = name;
    auto q = read_queue(name);
    if (!q.ok()) return std::move(q).error();
    const int i = q->index_of(spec.reservation);
    if (i >= 0) {
      QNode& n = q->nodes[i];
      if (Status s = load(n); !s.ok()) return s.error();
      if (!n.gone && n.data.state == State::kHolding &&
          i < static_cast<int>(q->front())) {
        auto now = server_now();
        if (!now.ok()) return std::move(now).error();
        if (expiry_of(n) > *now) {
          it.granted = true;
          it.path = n.path;
          it.grant = grant_of(name, n, fencing_of(n), expiry_of(n), *now, *now);
          items.push_back(std::move(it));
          continue;
        }
        conn_->remove(n.path, n.stat.version);  // over: ask again
      } else if (!n.gone) {
        Stat st;
        const int rc = conn_->set(n.path, encode(queued), n.stat.version, &st);
        if (rc == ZOK) {
          it.path = n.path;
          it.version = st.version;
          items.push_back(std::move(it));
          continue;
        }
        if (rc != ZNONODE && rc != ZBADVERSION) {
          return err(rc, "refresh " + n.path);
        }
      }
    }
    auto made = create_counted(
        lock_path(name),
        node_prefix(spec.reservation, spec.capacity, Kind::kSome), queued);
    if (!made.ok()) return std::move(made).error();
    it.path = made->path;
    it.version = made->stat.version;
    items.push_back(std::move(it));
  }

  auto waker = std::make_shared<Waker>();
  conn_->on_session_event(waker);
  std::uint64_t seen = waker->generation();
  SteadyTime refreshed = steady_clock::now();
  for (;;) {
    bool again = false;
    std::int64_t next_expiry = std::numeric_limits<std::int64_t>::max();
    for (Item& it : items) {
      if (it.granted || it.path.empty()) continue;
      auto q = read_queue(it.name);
      if (!q.ok()) return std::move(q).error();
      const int pos = q->index_of(it.path);
      if (pos < 0) {
        it.path.clear();  // its queue time ran out
        continue;
      }
      std::int64_t e = 0;
      auto reclaimed = reclaim(*q, pos, &e);
      if (!reclaimed.ok()) return std::move(reclaimed).error();
      next_expiry = std::min(next_expiry, e);
      if (*reclaimed) {
        again = true;
        continue;
      }
      auto back = held_back(*q, pos);
      if (!back.ok()) return std::move(back).error();
      if (pos < static_cast<int>(q->front()) && !*back) {
        NodeData d = queued;
        d.state = State::kHolding;
        Stat st;
        const int rc = conn_->set(it.path, encode(d), it.version, &st);
        if (rc == ZOK) {
          QNode& n = q->nodes[pos];
          n.data = d;
          n.stat = st;
          n.data.fencing = static_cast<std::uint64_t>(st.mzxid);
          remember(it.name, n);
          it.granted = true;
          it.grant = grant_of(it.name, n, static_cast<std::uint64_t>(st.mzxid),
                              st.mtime + d.ttl_ms, st.mtime, st.mtime);
          continue;
        }
        if (rc == ZNONODE) {
          it.path.clear();
          continue;
        }
        if (rc != ZBADVERSION) return err(rc, "grant " + it.path);
        again = true;
        continue;
      }
      auto watching =
          watch_ahead(*q, static_cast<std::size_t>(pos), waker, nullptr);
      if (!watching.ok()) return std::move(watching).error();
      if (!*watching) again = true;
    }
    std::vector<Grant> out;
    for (const Item& it : items) {
      if (it.granted) out.push_back(it.grant);
    }
    const bool pending = std::any_of(items.begin(), items.end(), [](auto& i) {
      return !i.granted && !i.path.empty();
    });
    if (!out.empty() || !pending || wait <= milliseconds::zero() ||
        steady_clock::now() >= until || call_deadline_passed()) {
      return out;
    }
    if (again) continue;
    // Keep the queued requests alive while this call waits.
    const SteadyTime refresh_at = refreshed + spec.ttl / 3;
    if (steady_clock::now() >= refresh_at) {
      for (Item& it : items) {
        if (it.granted || it.path.empty()) continue;
        Stat st;
        if (conn_->set(it.path, encode(queued), it.version, &st) == ZOK) {
          it.version = st.version;
        }
      }
      refreshed = steady_clock::now();
      continue;
    }
    sleep(waker, &seen, next_expiry, std::min(until, refresh_at));
  }
}

Result<std::vector<Grant>> ZkStore::acquire_all(const MultiSpec& spec,
                                                milliseconds wait) {
  const SteadyTime until =
      core::is_forever(wait) ? SteadyTime::max() : steady_clock::now() + wait;
  const std::size_t n = spec.names.size();
  NodeData waiting;
  waiting.state = State::kWaiting;
  waiting.ttl_ms = spec.ttl.count();
  waiting.label = spec.label;
  std::vector<Item> items(n);
  std::size_t found = 0;
  for (std::size_t k = 0; k < n; ++k) {
    items[k].name = spec.names[k];
    auto q = read_queue(spec.names[k]);
    if (!q.ok()) return std::move(q).error();
    if (!q->nodes.empty() && q->capacity() != spec.capacity) {
      return capacity_mismatch(spec.names[k], q->capacity(), spec.capacity);
    }
    const int i = q->index_of(spec.reservation);
    if (i >= 0) {
      QNode& node = q->nodes[i];
      if (Status s = load(node); !s.ok()) return s.error();
      if (node.gone) continue;
      items[k].path = node.path;
      items[k].version = node.stat.version;
      ++found;
    }
  }
  if (found != 0 && found != n) {
    return Error(Errc::invalid_argument,
                 "reservation " + spec.reservation.to_string().substr(0, 8) +
                     "… is already queued for other locks; acquire_all "
                     "cannot add names to it");
  }
  auto withdraw = [&] {
    std::vector<Op> ops;
    for (const Item& it : items) {
      if (!it.path.empty()) ops.push_back(Op{Op::kDelete, it.path, "", -1, 0});
    }
    if (!ops.empty()) conn_->multi(ops, nullptr);
  };
  if (found == 0) {
    // One transaction queues every request: one arrival order for all.
    std::vector<Op> ops;
    for (const Item& it : items) {
      ops.push_back(
          Op{Op::kCreate,
             lock_path(it.name) + "/" +
                 node_prefix(spec.reservation, spec.capacity, Kind::kAll),
             encode(waiting), -1, kEphemeralSequential});
    }
    std::vector<OpResult> res;
    int rc = conn_->multi(ops, &res);
    if (rc == ZNONODE) {
      for (const Item& it : items) {
        if (Status s = ensure_path(lock_path(it.name)); !s.ok()) {
          return s.error();
        }
      }
      rc = conn_->multi(ops, &res);
    }
    if (rc != ZOK) return err(rc, "queue " + std::to_string(n) + " requests");
    for (std::size_t k = 0; k < n; ++k) items[k].path = res[k].path;
  }

  const std::int64_t session = conn_->session_id();
  auto waker = std::make_shared<Waker>();
  conn_->on_session_event(waker);
  std::uint64_t seen = waker->generation();
  for (;;) {
    bool all = true;
    bool again = false;
    std::int64_t next_expiry = std::numeric_limits<std::int64_t>::max();
    std::vector<Queue> queues(n);
    std::vector<int> positions(n, -1);
    for (std::size_t k = 0; k < n && !again; ++k) {
      auto q = read_queue(items[k].name);
      if (!q.ok()) return std::move(q).error();
      queues[k] = std::move(*q);
      const int pos = queues[k].index_of(items[k].path);
      if (pos < 0) {
        withdraw();
        if (conn_->session_id() == session &&
            !conn_->expired_session(session)) {
          return Error(Errc::not_acquired,
                       "the reservation was withdrawn while it waited");
        }
        return Error(Errc::unavailable,
                     "a request of the acquire_all vanished while it waited "
                     "(its ZooKeeper session expired); retry");
      }
      positions[k] = pos;
      std::int64_t e = 0;
      auto reclaimed = reclaim(queues[k], pos, &e);
      if (!reclaimed.ok()) return std::move(reclaimed).error();
      next_expiry = std::min(next_expiry, e);
      if (*reclaimed) {
        again = true;
        break;
      }
      auto back = held_back(queues[k], pos);
      if (!back.ok()) return std::move(back).error();
      if (pos >= static_cast<int>(queues[k].front()) || *back) all = false;
    }
    if (again) continue;
    if (all) {
      NodeData d = waiting;
      d.state = State::kHolding;
      std::vector<Op> ops;
      for (const Item& it : items) {
        ops.push_back(Op{Op::kSet, it.path, encode(d), it.version, 0});
      }
      std::vector<OpResult> res;
      const int rc = conn_->multi(ops, &res);
      if (rc == ZOK) {
        std::vector<Grant> out;
        for (std::size_t k = 0; k < n; ++k) {
          QNode& node = queues[k].nodes[positions[k]];
          node.data = d;
          node.stat = res[k].stat;
          node.data.fencing = static_cast<std::uint64_t>(res[k].stat.mzxid);
          remember(items[k].name, node);
          out.push_back(grant_of(items[k].name, node,
                                 static_cast<std::uint64_t>(res[k].stat.mzxid),
                                 res[k].stat.mtime + d.ttl_ms,
                                 res[k].stat.mtime, res[k].stat.mtime));
        }
        return out;
      }
      if (rc != ZBADVERSION && rc != ZNONODE) {
        return err(rc, "grant " + std::to_string(n) + " requests");
      }
      for (Item& it : items) {
        Stat st;
        if (conn_->exists(it.path, &st) == ZOK) it.version = st.version;
      }
      continue;
    }
    if (wait <= milliseconds::zero()) {
      withdraw();
      return Error(Errc::not_acquired,
                   "not all of the " + std::to_string(n) + " locks are free");
    }
    for (std::size_t k = 0; k < n; ++k) {
      auto watching = watch_ahead(
          queues[k], static_cast<std::size_t>(positions[k]), waker, nullptr);
      if (!watching.ok()) return std::move(watching).error();
      if (!*watching) again = true;
    }
    if (!again) sleep(waker, &seen, next_expiry, until);
    if (steady_clock::now() >= until || call_deadline_passed()) {
      withdraw();
      return Error(Errc::timeout, "not all of the " + std::to_string(n) +
                                      " locks were granted within " +
                                      std::to_string(wait.count()) + "ms");
    }
  }
}

}  // namespace baton::store::zk
