// stores/zookeeper/zk_watch.cc — the zookeeper:// store's change feed
// (Store::watch) on one-shot ZooKeeper watches (docs/stores/zookeeper.md,
// "Change feed").
//
// What changes a lock under the prefix, and what fires for it:
//  - a lock node appears or goes under <root>/locks: the child watch on
//    <root>/locks;
//  - a request node is created (a grant at once, a queued request) or
//    deleted (a release, a withdrawal, a collected expiry, the end of its
//    session): the child watch on its lock node;
//  - a request node is written (a waiter's grant, an extend, a reentrant
//    join, a waiter rewriting itself as waiting): the data watch on it.
// A lease's expiry is no write: zookeeper:// judges it lazily (readers hide
// a lease whose mtime + TTL passed by ZooKeeper's clock; a waiter deletes
// it). So the feed also returns at the earliest expiry it knows of under
// the prefix, by this process's lower bound of ZooKeeper's clock (the
// mtime of the store's last write, plus the time since), a little late
// rather than early.
//
// A watch fires once. Each wait_change() sets again, before it returns,
// exactly the watches that fired (the events name them); the others are
// still set. Each watch is set by the read it guards (a listing, a data
// read), so nothing that happens after that read is missed, and the
// caller's list() after the return sees everything before it.
//
// Limits: at most kMaxLocks lock nodes (the first by name, as list()
// pages) and kMaxNodes request nodes are watched; past either, a wait also
// ends after kRecheck, so what is not watched is seen that late. A session
// event (a disconnection) ends a wait at once; the C client sets the
// session's watches again when it reconnects, and delivers what fired
// meanwhile. A new session (the old one expired) has no watches: the feed
// sets them all again and returns once more.
#include <zookeeper/zookeeper.h>

#include <algorithm>
#include <map>
#include <utility>

#include "stores/zookeeper/zk_store.h"

namespace baton::store::zk {
namespace {

constexpr std::size_t kMaxLocks = 1000;
constexpr std::size_t kMaxNodes = 5000;
constexpr milliseconds kRecheck{1000};
// An expiry is reported this long after it by the clock bound: the bound
// runs on this host's steady clock, whose rate may differ a little from
// ZooKeeper's.
constexpr std::int64_t kMarginMs = 50;

class ZkFeed final : public Waitable {
 public:
  ZkFeed(ZkStore& s, std::string_view prefix)
      : s_(s),
        prefix_(prefix),
        root_(s.lock_path("").substr(0, s.lock_path("").size() - 1)) {}

  // Sets every watch (and learns ZooKeeper's clock).
  Status arm(const CallContext& ctx) {
    s_.conn().on_session_event(waker_);
    seen_ = waker_->generation();
    auto now = s_.server_now(ctx);
    if (!now.ok()) return std::move(now).error();
    reported_ = *now;
    return set_watches(ctx);
  }

  std::optional<Grant> wait_change(Clock::time_point until,
                                   const CallContext& ctx) override {
    if (interrupted()) return std::nullopt;
    if (!whole_) {
      // Some watches are missing (a new session, a failed read): set
      // them and return at once, since a change may have come meanwhile.
      if (!set_watches(ctx).ok()) {
        waker_->wait_until(ctx.clock(),
                           ctx.cap(std::min(until, ctx.now() + kRecheck)),
                           &seen_);
      }
      return done();
    }
    for (;;) {
      const Clock::time_point t = wake_at(until, ctx);
      const bool woke = waker_->wait_until(ctx.clock(), t, &seen_);
      if (interrupted()) return std::nullopt;
      relevant_ = false;
      note_events();
      if (whole_ && !set_watches(ctx).ok()) whole_ = false;
      // Only a new or vanished lock node elsewhere in the store (the root's
      // listing changed, not its part under the prefix): wait on.
      if (relevant_ || !whole_ || !woke || ctx.clock().now() >= t) {
        return done();
      }
    }
  }

  void interrupt() override {
    Waitable::interrupt();
    waker_->notify();
  }

 private:
  struct NodeW {
    bool armed = false;            // its data watch is set
    std::int64_t expiry = kNever;  // expiry_of() as last read
  };
  struct LockW {
    bool armed = false;                  // its child watch is set
    std::map<std::string, NodeW> nodes;  // by child name
  };

  // When a wait ends without an event: `until`, the earliest expiry not
  // reported yet, or kRecheck when something is not watched.
  Clock::time_point wake_at(Clock::time_point until,
                            const CallContext& ctx) const {
    Clock::time_point t = until;
    if (over_) t = std::min(t, ctx.now() + kRecheck);
    if (const std::int64_t e = next_expiry(); e != kNever) {
      const std::int64_t left =
          e + kMarginMs - s_.conn().server_time_lower_bound();
      t = std::min(t,
                   ctx.now() + milliseconds(std::max<std::int64_t>(left, 1)));
    }
    return ctx.cap(t);
  }

  // Every return reports the expiries up to ZooKeeper's clock now (the
  // caller's list() follows).
  std::optional<Grant> done() {
    reported_ =
        std::max(reported_, s_.conn().server_time_lower_bound() - kMarginMs);
    return std::nullopt;
  }

  void reset() {
    root_armed_ = false;
    locks_.clear();
    armed_nodes_ = 0;
    whole_ = false;
  }

  // Marks the watches that fired as no longer set. A new session, or
  // events lost, forgets every watch (then set again by the next wait).
  void note_events() {
    std::vector<std::pair<char, std::string>> events;
    if (!waker_->take_events(&events)) reset();
    const std::string under = root_ + "/";
    for (const auto& [what, path] : events) {
      if (path.empty()) {  // a session event: the caller looks again
        relevant_ = true;
        if (s_.conn().session_id() != session_) reset();
        continue;
      }
      if (path == root_) {
        root_armed_ = false;
        continue;
      }
      if (!path.starts_with(under)) continue;
      const std::string rest = path.substr(under.size());
      const auto slash = rest.find('/');
      auto l = locks_.find(rest.substr(0, slash));
      if (l == locks_.end()) continue;
      relevant_ = true;
      if (slash == std::string::npos) {
        l->second.armed = false;
        continue;
      }
      auto n = l->second.nodes.find(rest.substr(slash + 1));
      if (n == l->second.nodes.end()) continue;
      if (n->second.armed) --armed_nodes_;
      if (what == 'd') {
        l->second.nodes.erase(n);
      } else {
        n->second.armed = false;
      }
    }
  }

  void drop_lock(std::map<std::string, LockW>::iterator it) {
    for (const auto& [name, n] : it->second.nodes) {
      if (n.armed) --armed_nodes_;
    }
    locks_.erase(it);
  }

  // Sets the watches not set: the root's, the lock nodes', the request
  // nodes' (each read with its watch).
  Status set_watches(const CallContext& ctx) {
    const std::int64_t session = s_.conn().session_id();
    if (!root_armed_) {
      if (Status st = watch_root(ctx); !st.ok()) return st;
    }
    if (Status st = watch_locks(ctx); !st.ok()) return st;
    if (Status st = watch_nodes(ctx); !st.ok()) return st;
    if (session == 0 || s_.conn().session_id() != session) {
      // A new session began meanwhile: some watches may be in the old
      // one. Set them all again (whole_ stays false: the next wait does).
      reset();
      return {};
    }
    session_ = session;
    whole_ = true;
    return {};
  }

  Status watch_root(const CallContext& ctx) {
    std::vector<int> rcs;
    std::vector<std::vector<std::string>> names;
    int rc = s_.conn().watch_children({root_}, waker_, &rcs, &names, ctx);
    if (rc == ZOK) rc = rcs[0];
    if (rc != ZOK) return s_.err(rc, "watch " + root_);
    root_armed_ = true;
    std::vector<std::pair<std::string, std::string>> under;  // name, child
    for (auto& c : names[0]) {
      auto n = unescape(c);
      if (n && n->starts_with(prefix_)) under.emplace_back(*n, std::move(c));
    }
    std::sort(under.begin(), under.end());
    over_locks_ = under.size() > kMaxLocks;
    if (over_locks_) under.resize(kMaxLocks);
    std::map<std::string, LockW> keep;
    for (auto& [name, child] : under) {
      auto it = locks_.find(child);
      if (it == locks_.end()) {
        relevant_ = true;  // a lock node came
        keep.emplace(child, LockW{});
      } else {
        keep.emplace(child, std::move(it->second));
        locks_.erase(it);
      }
    }
    if (!locks_.empty()) relevant_ = true;  // a lock node went
    while (!locks_.empty()) drop_lock(locks_.begin());
    locks_ = std::move(keep);
    return {};
  }

  Status watch_locks(const CallContext& ctx) {
    std::vector<std::string> children, paths;
    for (const auto& [child, l] : locks_) {
      if (l.armed) continue;
      children.push_back(child);
      paths.push_back(root_ + "/" + child);
    }
    if (paths.empty()) return {};
    std::vector<int> rcs;
    std::vector<std::vector<std::string>> names;
    const int rc = s_.conn().watch_children(paths, waker_, &rcs, &names, ctx);
    if (rc != ZOK) return s_.err(rc, "watch " + paths[0]);
    Status out;
    for (std::size_t i = 0; i < paths.size(); ++i) {
      auto it = locks_.find(children[i]);
      if (rcs[i] == ZNONODE) {  // gone: the root's watch tells if it returns
        drop_lock(it);
        continue;
      }
      if (rcs[i] != ZOK) {
        if (out.ok()) out = s_.err(rcs[i], "watch " + paths[i]);
        continue;
      }
      LockW& l = it->second;
      l.armed = true;
      std::map<std::string, NodeW> nodes;
      for (const auto& c : names[i]) {
        if (!parse_node_name(c)) continue;  // not a request node
        auto n = l.nodes.find(c);
        nodes.emplace(c, n == l.nodes.end() ? NodeW{} : n->second);
        if (n != l.nodes.end()) l.nodes.erase(n);
      }
      for (const auto& [c, n] : l.nodes) {
        if (n.armed) --armed_nodes_;
      }
      l.nodes = std::move(nodes);
    }
    return out;
  }

  Status watch_nodes(const CallContext& ctx) {
    std::vector<std::pair<LockW*, std::string>> which;
    std::vector<std::string> paths;
    over_nodes_ = false;
    for (auto& [child, l] : locks_) {
      for (auto& [name, n] : l.nodes) {
        if (n.armed) continue;
        if (armed_nodes_ + paths.size() >= kMaxNodes) {
          over_nodes_ = true;
          break;
        }
        which.emplace_back(&l, name);
        paths.push_back(root_ + "/" + child + "/" + name);
      }
    }
    over_ = over_locks_ || over_nodes_;
    if (paths.empty()) return {};
    std::vector<int> rcs;
    std::vector<Stat> stats;
    std::vector<std::string> datas;
    const int rc = s_.conn().watch(paths, waker_, &rcs, &stats, &datas, ctx);
    if (rc != ZOK) return s_.err(rc, "watch " + paths[0]);
    Status out;
    for (std::size_t i = 0; i < paths.size(); ++i) {
      auto& [l, name] = which[i];
      if (rcs[i] == ZNONODE) {  // gone: its lock's child watch fired
        l->nodes.erase(name);
        continue;
      }
      if (rcs[i] != ZOK) {
        if (out.ok()) out = s_.err(rcs[i], "watch " + paths[i]);
        continue;
      }
      NodeW& n = l->nodes[name];
      n.armed = true;
      ++armed_nodes_;
      QNode q;
      q.loaded = true;
      if (auto d = decode(datas[i])) {
        q.data = std::move(*d);
        q.stat = stats[i];
        n.expiry = expiry_of(q);
      } else {
        n.expiry = kNever;
      }
    }
    return out;
  }

  // The earliest expiry of a watched node not reported yet (server ms).
  std::int64_t next_expiry() const {
    std::int64_t e = kNever;
    for (const auto& [child, l] : locks_) {
      for (const auto& [name, n] : l.nodes) {
        if (n.expiry > reported_) e = std::min(e, n.expiry);
      }
    }
    return e;
  }

  ZkStore& s_;
  const std::string prefix_;
  const std::string root_;  // <root>/locks
  // Keeps an event per watch that may fire between two waits (each fires
  // once), and some for session events.
  std::shared_ptr<Waker> waker_ =
      std::make_shared<Waker>(2 * (kMaxLocks + kMaxNodes) + 64);
  std::uint64_t seen_ = 0;
  std::int64_t session_ = 0;  // the session the watches were set in
  bool root_armed_ = false;
  std::map<std::string, LockW> locks_;  // by child of root_ (escaped name)
  std::size_t armed_nodes_ = 0;
  bool over_locks_ = false, over_nodes_ = false;
  bool over_ = false;   // some lock or request node is not watched
  bool whole_ = false;  // every watch the feed needs is set
  // Since the wait's last wake-up: an event or a listing showed a change
  // under the prefix (or a session event came).
  bool relevant_ = false;
  // Expiries at or before this (ZooKeeper ms) were reported by a return.
  std::int64_t reported_ = 0;
};

}  // namespace

Result<std::unique_ptr<Waitable>> ZkStore::watch(std::string_view prefix,
                                                 const CallContext& ctx) {
  auto feed = std::make_unique<ZkFeed>(*this, prefix);
  if (Status st = feed->arm(ctx); !st.ok()) return st.error();
  return std::unique_ptr<Waitable>(std::move(feed));
}

}  // namespace baton::store::zk
