// stores/zookeeper/zk_multi.cc — acquire_some and acquire_all as the
// engine's primitives (rule 11; docs/stores/zookeeper.md, "Several locks").
// Each ask or look is one pass over the reservation's requests (grants
// what reached the front, watches what can let the rest in); wait_change
// sleeps until a watch fires.
#include <zookeeper/zookeeper.h>

#include <algorithm>

#include "core/validate.h"
#include "stores/zookeeper/zk_store.h"

namespace baton::store::zk {
namespace {

// One name of a multi request.
struct Item {
  std::string name;
  std::string path;  // our request node ("" = none)
  int version = 0;
  bool granted = false;
  Grant grant;
};

MultiAnswer refused(Error e) {
  MultiAnswer a;
  a.kind = MultiAnswer::Kind::refused;
  a.error = std::move(e);
  a.gone = true;
  return a;
}

MultiAnswer left_nothing() {
  MultiAnswer a;
  a.kind = MultiAnswer::Kind::expired;
  a.gone = true;
  return a;
}

// What acquire_some and acquire_all share: the store, the spec, the items
// and the wake-up source.
class ZkMultiBase : public MultiRequest {
 public:
  // `state`: what the requests' data says while they wait.
  ZkMultiBase(ZkStore& s, const MultiSpec& spec, State state)
      : s_(s), spec_(spec), wake_(s.conn()) {
    data_.state = state;
    data_.ttl_ms = spec.ttl.count();
    data_.label = spec.label;
  }
  std::optional<Grant> wait_change(Clock::time_point until,
                                   const CallContext& ctx) override {
    wake_.arm();
    if (!interrupted()) wake_.sleep(until, next_expiry_, ctx);
    return std::nullopt;
  }
  void interrupt() override {
    Waitable::interrupt();
    wake_.interrupt();
  }

 protected:
  Conn& conn() { return s_.conn(); }

  ZkStore& s_;
  const MultiSpec spec_;
  Wakeup wake_;
  NodeData data_;  // a waiting request's
  std::vector<Item> items_;
  std::int64_t next_expiry_ = kNever;
};

class ZkSome final : public ZkMultiBase {
 public:
  ZkSome(ZkStore& s, const MultiSpec& spec)
      : ZkMultiBase(s, spec, State::kQueued) {}
  Result<MultiAnswer> ask(AskMode mode, milliseconds wait_left,
                          const CallContext& ctx) override;
  Result<MultiAnswer> look(milliseconds wait_left,
                           const CallContext& ctx) override;
  Result<MultiAnswer> withdraw(const CallContext& ctx) override;

 private:
  // Enqueues (or refreshes) the reservation's request on `name`.
  Status enqueue(const std::string& name, const CallContext& ctx);
  // One pass over the items: grants those at the front, watches the rest.
  Result<MultiAnswer> pass(const CallContext& ctx);
  // One item's turn in a pass; true: pass again at once.
  Result<bool> visit(Item& it, const CallContext& ctx);

  Clock::time_point refresh_at_;
};

Result<MultiAnswer> ZkSome::ask(AskMode, milliseconds, const CallContext& ctx) {
  if (!items_.empty()) return pass(ctx);
  // Check every name before queueing anything (rule 16).
  for (const auto& name : spec_.names) {
    auto q = s_.read_queue(name, ctx);
    if (!q.ok()) return std::move(q).error();
    if (!q->nodes.empty() && q->capacity() != spec_.capacity) {
      return refused(capacity_mismatch(name, q->capacity(), spec_.capacity));
    }
  }
  // Enqueue, or refresh what this reservation has queued (its queue time
  // runs `ttl` from this call).
  for (const auto& name : spec_.names) {
    if (Status st = enqueue(name, ctx); !st.ok()) return st.error();
  }
  wake_.arm();
  // Keep the queued requests alive while this call waits.
  refresh_at_ = ctx.now() + spec_.ttl / 3;
  return pass(ctx);
}

Status ZkSome::enqueue(const std::string& name, const CallContext& ctx) {
  Item it;
  it.name = name;
  auto q = s_.read_queue(name, ctx);
  if (!q.ok()) return q.error();
  const int i = q->index_of(spec_.reservation);
  if (i >= 0) {
    QNode& n = q->nodes[i];
    if (Status st = s_.load(n, ctx); !st.ok()) return st;
    if (!n.gone && n.data.state == State::kHolding &&
        i < static_cast<int>(q->front())) {
      auto now = s_.server_now(ctx);
      if (!now.ok()) return now.error();
      if (expiry_of(n) > *now) {
        it.granted = true;
        it.path = n.path;
        it.grant =
            s_.grant_of(name, n, fencing_of(n), expiry_of(n), *now, *now);
        items_.push_back(std::move(it));
        return {};
      }
      conn().remove(n.path, n.stat.version, ctx);  // over: ask again
    } else if (!n.gone) {
      Stat st;
      const int rc =
          conn().set(n.path, encode(data_), n.stat.version, &st, ctx);
      if (rc == ZOK) {
        it.path = n.path;
        it.version = st.version;
        items_.push_back(std::move(it));
        return {};
      }
      if (rc != ZNONODE && rc != ZBADVERSION) {
        return s_.err(rc, "refresh " + n.path);
      }
    }
  }
  auto made = s_.create_counted(
      s_.lock_path(name),
      node_prefix(spec_.reservation, spec_.capacity, Kind::kSome), data_, ctx);
  if (!made.ok()) return made.error();
  it.path = made->path;
  it.version = made->stat.version;
  items_.push_back(std::move(it));
  return {};
}

Result<bool> ZkSome::visit(Item& it, const CallContext& ctx) {
  auto q = s_.read_queue(it.name, ctx);
  if (!q.ok()) return std::move(q).error();
  const int pos = q->index_of(it.path);
  if (pos < 0) {
    it.path.clear();  // its queue time ran out
    return false;
  }
  std::int64_t e = 0;
  auto reclaimed = s_.reclaim(*q, pos, &e, ctx);
  if (!reclaimed.ok()) return std::move(reclaimed).error();
  next_expiry_ = std::min(next_expiry_, e);
  if (*reclaimed) return true;
  auto back = s_.held_back(*q, pos, ctx);
  if (!back.ok()) return std::move(back).error();
  if (pos < static_cast<int>(q->front()) && !*back) {
    NodeData d = data_;
    d.state = State::kHolding;
    Stat st;
    const int rc = conn().set(it.path, encode(d), it.version, &st, ctx);
    if (rc == ZNONODE) {
      it.path.clear();
      return false;
    }
    if (rc == ZBADVERSION) return true;
    if (rc != ZOK) return s_.err(rc, "grant " + it.path);
    QNode& n = q->nodes[pos];
    n.data = d;
    n.stat = st;
    n.data.fencing = static_cast<std::uint64_t>(st.mzxid);
    s_.remember(it.name, n);
    it.granted = true;
    it.grant = s_.grant_of(it.name, n, n.data.fencing, st.mtime + d.ttl_ms,
                           st.mtime, st.mtime);
    return false;
  }
  auto watching = s_.watch_ahead(*q, static_cast<std::size_t>(pos),
                                 wake_.waker(), nullptr, ctx);
  if (!watching.ok()) return std::move(watching).error();
  return !*watching;
}

Result<MultiAnswer> ZkSome::pass(const CallContext& ctx) {
  bool again = false;
  next_expiry_ = kNever;
  for (Item& it : items_) {
    if (it.granted || it.path.empty()) continue;
    auto r = visit(it, ctx);
    if (!r.ok()) return std::move(r).error();
    again |= *r;
  }
  MultiAnswer a;
  for (const Item& it : items_) {
    if (it.granted) {
      a.grants.push_back(it.grant);
    } else if (!it.path.empty()) {
      ++a.pending;
    }
  }
  a.look_at = again ? Clock::time_point::min()
                    : std::min(refresh_at_, wake_.at_expiry(next_expiry_, ctx));
  return a;
}

Result<MultiAnswer> ZkSome::look(milliseconds wait_left,
                                 const CallContext& ctx) {
  if (items_.empty()) return ask(AskMode::wait, wait_left, ctx);
  if (ctx.now() >= refresh_at_) {
    for (Item& it : items_) {
      if (it.granted || it.path.empty()) continue;
      Stat st;
      if (conn().set(it.path, encode(data_), it.version, &st, ctx) == ZOK) {
        it.version = st.version;
      }
    }
    refresh_at_ = ctx.now() + spec_.ttl / 3;
  }
  return pass(ctx);
}

Result<MultiAnswer> ZkSome::withdraw(const CallContext& ctx) {
  for (Item& it : items_) {
    if (it.granted || it.path.empty()) continue;
    const int rc = conn().remove(it.path, -1, ctx);
    if (rc != ZOK && rc != ZNONODE) return s_.err(rc, "withdraw " + it.path);
    it.path.clear();
  }
  return left_nothing();
}

class ZkAll final : public ZkMultiBase {
 public:
  ZkAll(ZkStore& s, const MultiSpec& spec)
      : ZkMultiBase(s, spec, State::kWaiting) {}
  Result<MultiAnswer> ask(AskMode mode, milliseconds wait_left,
                          const CallContext& ctx) override;
  Result<MultiAnswer> look(milliseconds, const CallContext& ctx) override {
    return pass(false, ctx);
  }
  Result<MultiAnswer> withdraw(const CallContext& ctx) override;

 private:
  // Queues one request per name in one transaction (or finds them).
  Result<std::optional<MultiAnswer>> enqueue(const CallContext& ctx);
  // Passes over the queues until one decides.
  Result<MultiAnswer> pass(bool try_only, const CallContext& ctx);
  // One pass: the answer, or (empty) pass again at once.
  Result<std::optional<MultiAnswer>> once(bool try_only,
                                          const CallContext& ctx);
  // Grants every request in one transaction; empty if one changed.
  Result<std::optional<MultiAnswer>> grant_all(std::vector<Queue>& queues,
                                               const std::vector<int>& pos,
                                               const CallContext& ctx);
  Result<std::optional<MultiAnswer>> vanished(const CallContext& ctx);

  std::int64_t session_ = 0;
};

Result<MultiAnswer> ZkAll::ask(AskMode mode, milliseconds,
                               const CallContext& ctx) {
  if (items_.empty()) {
    auto r = enqueue(ctx);
    if (!r.ok() || *r) items_.clear();
    if (!r.ok()) return std::move(r).error();
    if (*r) return std::move(**r);
    session_ = conn().session_id();
    wake_.arm();
  }
  return pass(mode == AskMode::try_only, ctx);
}

Result<std::optional<MultiAnswer>> ZkAll::enqueue(const CallContext& ctx) {
  const std::size_t n = spec_.names.size();
  items_.assign(n, Item{});
  std::size_t found = 0;
  for (std::size_t k = 0; k < n; ++k) {
    items_[k].name = spec_.names[k];
    auto q = s_.read_queue(spec_.names[k], ctx);
    if (!q.ok()) return std::move(q).error();
    if (!q->nodes.empty() && q->capacity() != spec_.capacity) {
      return std::optional<MultiAnswer>(refused(
          capacity_mismatch(spec_.names[k], q->capacity(), spec_.capacity)));
    }
    const int i = q->index_of(spec_.reservation);
    if (i < 0) continue;
    QNode& node = q->nodes[i];
    if (Status st = s_.load(node, ctx); !st.ok()) return st.error();
    if (node.gone) continue;
    items_[k].path = node.path;
    items_[k].version = node.stat.version;
    ++found;
  }
  if (found != 0 && found != n) {
    return std::optional<MultiAnswer>(refused(
        Error(Errc::invalid_argument,
              "reservation " + spec_.reservation.to_string().substr(0, 8) +
                  "… is already queued for other locks; acquire_all cannot add "
                  "names to it")));
  }
  if (found != 0) return std::optional<MultiAnswer>();
  for (const Item& it : items_) {
    if (Status st = s_.check_acl(s_.lock_path(it.name), ctx); !st.ok()) {
      return st.error();
    }
  }
  // One transaction queues every request: one arrival order for all.
  std::vector<Op> ops;
  for (const Item& it : items_) {
    ops.push_back(
        Op{Op::kCreate,
           s_.lock_path(it.name) + "/" +
               node_prefix(spec_.reservation, spec_.capacity, Kind::kAll),
           encode(data_), -1, kEphemeralSequential});
  }
  std::vector<OpResult> res;
  int rc = conn().multi(ops, &res, ctx);
  if (rc == ZNONODE) {
    for (const Item& it : items_) {
      if (Status st = s_.ensure_path(s_.lock_path(it.name), ctx); !st.ok()) {
        return st.error();
      }
    }
    rc = conn().multi(ops, &res, ctx);
  }
  if (rc != ZOK) return s_.err(rc, "queue " + std::to_string(n) + " requests");
  for (std::size_t k = 0; k < n; ++k) items_[k].path = res[k].path;
  return std::optional<MultiAnswer>();
}

Result<std::optional<MultiAnswer>> ZkAll::vanished(const CallContext& ctx) {
  (void)withdraw(ctx);
  if (conn().session_id() == session_ && !conn().expired_session(session_)) {
    return std::optional<MultiAnswer>(refused(Error(
        Errc::not_acquired, "the reservation was withdrawn while it waited")));
  }
  return Error(Errc::unavailable,
               "a request of the acquire_all vanished while it waited "
               "(its ZooKeeper session expired); retry");
}

Result<MultiAnswer> ZkAll::pass(bool try_only, const CallContext& ctx) {
  for (int n = 0; n < kMaxPasses; ++n) {
    auto r = once(try_only, ctx);
    if (!r.ok()) return std::move(r).error();
    if (*r) return std::move(**r);
  }
  if (try_only) {
    return Error(Errc::unavailable, "zookeeper " + conn().where() +
                                        ": the queues of the acquire_all "
                                        "kept changing");
  }
  MultiAnswer a;
  a.pending = items_.size();
  a.look_at = Clock::time_point::min();  // look again at once
  return a;
}

Result<std::optional<MultiAnswer>> ZkAll::once(bool try_only,
                                               const CallContext& ctx) {
  const std::size_t n = items_.size();
  bool all = true;
  next_expiry_ = kNever;
  std::vector<Queue> queues(n);
  std::vector<int> positions(n, -1);
  for (std::size_t k = 0; k < n; ++k) {
    auto q = s_.read_queue(items_[k].name, ctx);
    if (!q.ok()) return std::move(q).error();
    queues[k] = std::move(*q);
    const int pos = queues[k].index_of(items_[k].path);
    if (pos < 0) return vanished(ctx);
    positions[k] = pos;
    std::int64_t e = 0;
    auto reclaimed = s_.reclaim(queues[k], pos, &e, ctx);
    if (!reclaimed.ok()) return std::move(reclaimed).error();
    next_expiry_ = std::min(next_expiry_, e);
    if (*reclaimed) return std::optional<MultiAnswer>();
    auto back = s_.held_back(queues[k], pos, ctx);
    if (!back.ok()) return std::move(back).error();
    if (pos >= static_cast<int>(queues[k].front()) || *back) all = false;
  }
  if (all) return grant_all(queues, positions, ctx);
  if (try_only) {
    (void)withdraw(ctx);
    return std::optional<MultiAnswer>(refused(
        Error(Errc::not_acquired,
              "not all of the " + std::to_string(n) + " locks are free")));
  }
  for (std::size_t k = 0; k < n; ++k) {
    auto watching =
        s_.watch_ahead(queues[k], static_cast<std::size_t>(positions[k]),
                       wake_.waker(), nullptr, ctx);
    if (!watching.ok()) return std::move(watching).error();
    if (!*watching) return std::optional<MultiAnswer>();
  }
  MultiAnswer a;
  a.pending = n;
  a.look_at = wake_.at_expiry(next_expiry_, ctx);
  return std::optional<MultiAnswer>(std::move(a));
}

Result<std::optional<MultiAnswer>> ZkAll::grant_all(std::vector<Queue>& queues,
                                                    const std::vector<int>& pos,
                                                    const CallContext& ctx) {
  NodeData d = data_;
  d.state = State::kHolding;
  std::vector<Op> ops;
  for (const Item& it : items_) {
    ops.push_back(Op{Op::kSet, it.path, encode(d), it.version, 0});
  }
  std::vector<OpResult> res;
  const int rc = conn().multi(ops, &res, ctx);
  if (rc == ZOK) {
    MultiAnswer a;
    for (std::size_t k = 0; k < items_.size(); ++k) {
      QNode& node = queues[k].nodes[pos[k]];
      const Stat& st = res[k].stat;
      node.data = d;
      node.stat = st;
      node.data.fencing = static_cast<std::uint64_t>(st.mzxid);
      s_.remember(items_[k].name, node);
      a.grants.push_back(s_.grant_of(items_[k].name, node, node.data.fencing,
                                     st.mtime + d.ttl_ms, st.mtime, st.mtime));
    }
    return std::optional<MultiAnswer>(std::move(a));
  }
  if (rc != ZBADVERSION && rc != ZNONODE) {
    return s_.err(rc, "grant " + std::to_string(items_.size()) + " requests");
  }
  for (Item& it : items_) {
    Stat st;
    if (conn().exists(it.path, &st, ctx) == ZOK) it.version = st.version;
  }
  return std::optional<MultiAnswer>();
}

Result<MultiAnswer> ZkAll::withdraw(const CallContext& ctx) {
  std::vector<Op> ops;
  for (const Item& it : items_) {
    if (!it.path.empty()) ops.push_back(Op{Op::kDelete, it.path, "", -1, 0});
  }
  if (ops.empty()) return left_nothing();
  std::vector<OpResult> res;
  int rc = conn().multi(ops, &res, ctx);
  if (rc == ZNONODE) {
    // One went already (withdrawn by its token): the others one by one.
    rc = ZOK;
    for (const Op& op : ops) {
      const int r = conn().remove(op.path, -1, ctx);
      if (r != ZOK && r != ZNONODE) rc = r;
    }
  }
  if (rc != ZOK) return s_.err(rc, "withdraw the acquire_all");
  for (Item& it : items_) it.path.clear();
  return left_nothing();
}

}  // namespace

std::unique_ptr<MultiRequest> make_multi(ZkStore& s, const MultiSpec& spec) {
  if (spec.all_or_nothing) return std::make_unique<ZkAll>(s, spec);
  return std::make_unique<ZkSome>(s, spec);
}

}  // namespace baton::store::zk
