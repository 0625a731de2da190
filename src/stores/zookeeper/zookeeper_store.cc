// stores/zookeeper/zookeeper_store.cc — extend, release, describe/list and
// counters (the descriptor, options and opening: zk_open.cc).
#include "stores/zookeeper/zookeeper_store.h"

#include <zookeeper/zookeeper.h>

#include <algorithm>
#include <charconv>
#include <functional>

#include "core/validate.h"
#include "stores/zookeeper/zk_store.h"

namespace baton::store {
namespace zk {
namespace {

using std::chrono::microseconds;
using std::chrono::steady_clock;

Error lost(std::string_view name, std::string_view why) {
  return Error(Errc::lock_lost, "lease on lock " + core::quote_name(name) +
                                    " is not held: " + std::string(why));
}

Result<std::int64_t> parse_counter(const std::string& data,
                                   const std::string& path) {
  std::int64_t v = 0;
  auto [p, ec] = std::from_chars(data.data(), data.data() + data.size(), v);
  if (data.empty() || ec != std::errc() || p != data.data() + data.size()) {
    return Error(Errc::internal, "zookeeper counter " + path + " holds \"" +
                                     data + "\", not a number");
  }
  return v;
}

}  // namespace

ZkStore::ZkStore(ZkOptions options, std::unique_ptr<Conn> conn)
    : options_(std::move(options)),
      conn_(std::move(conn)),
      janitor_([this] { janitor(); }) {}

ZkStore::~ZkStore() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stopping_ = true;
  }
  janitor_cv_.notify_all();
  janitor_.join();
}

void ZkStore::remember(std::string_view name, const QNode& n) {
  std::lock_guard<std::mutex> lk(mu_);
  if (held_.size() >= 100000) held_.clear();  // leases nobody released
  // A granted node's data and stat are known (from its grant's write or
  // read): release judges its expiry from them (expiry_of).
  QNode& e = held_[{std::string(name), n.name.token}];
  e = n;
  e.loaded = true;
  e.gone = false;
}

void ZkStore::forget(std::string_view name, const OwnerToken& token) {
  std::lock_guard<std::mutex> lk(mu_);
  held_.erase({std::string(name), token});
}

void ZkStore::note_alive(std::string_view name, const Grant& g,
                         SteadyTime start) {
  // The client's default drift allowance (ClientOptions: 1 % of the TTL +
  // 2 ms): the lease outlives this on the store's clock even if the two
  // clocks' rates differ by that much.
  const auto drift = std::chrono::duration_cast<SteadyTime::duration>(
      std::chrono::duration<double, std::milli>(g.ttl.count() * 0.01 + 2.0));
  const auto valid =
      std::chrono::duration_cast<SteadyTime::duration>(g.valid_for);
  std::lock_guard<std::mutex> lk(mu_);
  auto it = held_.find({std::string(name), g.token});
  if (it != held_.end()) it->second.alive_until = start + valid - drift;
}

std::unique_ptr<Request> ZkStore::request(const AcquireSpec& spec) {
  return make_request(*this, spec);
}

std::unique_ptr<MultiRequest> ZkStore::request_multi(const MultiSpec& spec) {
  return make_multi(*this, spec);
}

std::optional<QNode> ZkStore::held(std::string_view name,
                                   const OwnerToken& token) {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = held_.find({std::string(name), token});
  if (it == held_.end()) return std::nullopt;
  return it->second;
}

void ZkStore::note_idle(const std::string& parent) {
  std::lock_guard<std::mutex> lk(mu_);
  if (idle_.size() < 10000) idle_.insert(parent);
}

// Deletes lock nodes left empty. delete(path, -1) fails with ZNOTEMPTY
// while any request exists, and a request that finds its lock's node gone
// makes it again, so this never takes a request with it. It only deletes a
// node that stayed empty and unchanged (same cversion) for a whole period
// (2 s), so that a busy lock's node is not deleted and re-made all the time.
void ZkStore::janitor() {
  std::map<std::string, std::int32_t> seen;  // empty at the last pass
  std::unique_lock<std::mutex> lk(mu_);
  while (!stopping_) {
    janitor_cv_.wait_for(lk, std::chrono::seconds(2),
                         [&] { return stopping_; });
    if (stopping_) break;
    std::set<std::string> batch;
    batch.swap(idle_);
    lk.unlock();
    std::map<std::string, std::int32_t> next;
    const CallContext ctx;  // each request waits the request timeout
    for (const auto& [parent, cversion] : seen) {
      zk::Stat st;
      if (conn_->exists(parent, &st, ctx) != ZOK || st.num_children != 0) {
        continue;
      }
      if (st.cversion == cversion) {
        conn_->remove(parent, -1, ctx);
      } else {
        next[parent] = st.cversion;
      }
    }
    for (const auto& parent : batch) {
      if (next.count(parent) != 0 || seen.count(parent) != 0) continue;
      zk::Stat st;
      if (conn_->exists(parent, &st, ctx) == ZOK && st.num_children == 0) {
        next[parent] = st.cversion;
      }
    }
    seen = std::move(next);
    lk.lock();
  }
}

Result<std::optional<QNode>> ZkStore::find(std::string_view name,
                                           const OwnerToken& token, Queue* q,
                                           const CallContext& ctx) {
  auto r = read_queue(name, ctx);
  if (!r.ok()) return std::move(r).error();
  *q = std::move(*r);
  const int i = q->index_of(token);
  if (i >= 0) {
    if (Status s = load(q->nodes[i], ctx); !s.ok()) return s.error();
    if (!q->nodes[i].gone) return std::optional<QNode>(q->nodes[i]);
  }
  // A reentrant joiner's token is an alias in its lease's node.
  for (std::size_t k = 0; k < q->front(); ++k) {
    QNode& n = q->nodes[k];
    if (Status s = load(n, ctx); !s.ok()) return s.error();
    if (n.gone) continue;
    if (std::find(n.data.aliases.begin(), n.data.aliases.end(), token) !=
        n.data.aliases.end()) {
      return std::optional<QNode>(n);
    }
  }
  return std::optional<QNode>();
}

Result<Grant> ZkStore::extend(std::string_view name, const OwnerToken& token,
                              milliseconds ttl, const CallContext& ctx) {
  const SteadyTime start = steady_clock::now();
  std::optional<QNode> cached = held(name, token);
  forget(name, token);
  for (int attempt = 0; attempt < 4; ++attempt) {
    QNode n;
    if (cached) {
      n = std::move(*cached);  // a holder (positions only go down)
      cached.reset();
    } else {
      Queue q;
      auto f = find(name, token, &q, ctx);
      if (!f.ok()) return std::move(f).error();
      if (!f->has_value()) return lost(name, "no such lease (expired?)");
      n = std::move(**f);
      const int pos = q.index_of(n.path);
      if (pos >= static_cast<int>(q.front()) ||
          n.data.state != State::kHolding) {
        return lost(name, "the request is still queued");
      }
    }
    NodeData d = n.data;
    d.ttl_ms = ttl.count();
    d.fencing = fencing_of(n);
    Stat st;
    const int rc = conn_->set(n.path, encode(d), n.stat.version, &st, ctx);
    if (rc == ZNONODE) return lost(name, "it expired");
    if (rc == ZBADVERSION) continue;  // changed meanwhile: read again
    if (rc != ZOK) return err(rc, "extend " + n.path);
    if (expiry_of(n) <= st.mtime) {
      // Dead before this write (rule 3): the write must not revive it.
      conn_->remove(n.path, st.version, ctx);
      return lost(name, "it expired");
    }
    n.data = d;
    n.stat = st;
    Grant g =
        grant_of(name, n, d.fencing, st.mtime + d.ttl_ms, st.mtime, st.mtime);
    if (n.name.token == token) {
      remember(name, n);
      note_alive(name, g, start);
    }
    return g;
  }
  return Error(Errc::unavailable,
               "zookeeper " + conn_->where() + ": the lease on lock " +
                   core::quote_name(name) + " kept changing while extended");
}

Result<ReleaseResult> ZkStore::release(std::string_view name,
                                       const OwnerToken& token,
                                       const CallContext& ctx) {
  std::optional<QNode> cached = held(name, token);
  forget(name, token);
  for (int attempt = 0; attempt < 4; ++attempt) {
    Queue q;
    QNode n;
    bool holder = true;
    if (cached) {
      n = std::move(*cached);
      cached.reset();
      q.parent = lock_path(name);
    } else {
      auto f = find(name, token, &q, ctx);
      if (!f.ok()) return std::move(f).error();
      if (!f->has_value()) return ReleaseResult{};
      n = std::move(**f);
      const int pos = q.index_of(n.path);
      holder =
          pos < static_cast<int>(q.front()) && n.data.state == State::kHolding;
    }
    if (!holder) {
      // Only queued: withdraw the request (rule 5).
      const int rc = conn_->remove(n.path, -1, ctx);
      if (rc != ZOK && rc != ZNONODE) return err(rc, "withdraw " + n.path);
      return ReleaseResult{};
    }
    const bool alias = n.name.token != token;
    NodeData d = n.data;
    std::vector<Op> ops;
    if (alias || d.holds > 1) {
      // One hold of a reentrant lease.
      d.holds = d.holds > 1 ? d.holds - 1 : 1;
      if (alias) std::erase(d.aliases, token);
      d.fencing = fencing_of(n);
      ops.push_back(Op{Op::kSet, n.path, encode(d), n.stat.version, 0});
    } else if (steady_clock::now() < n.alive_until) {
      // A lease of this store, surely alive by ZooKeeper's clock until
      // alive_until: a plain delete (only of the version read: a
      // reentrant join since changes it). If its answer comes before
      // alive_until, the delete happened while the lease was alive; the
      // next in line's watch sees the deletion, which lets it take its
      // grant without listing the queue again (acquire).
      if (auto next = n.ahead ? n.ahead->get() : std::nullopt) {
        if (auto r = hand_over(n, *next, ctx)) return std::move(*r);
        n.ahead.reset();  // the request behind changed: a plain delete
        cached = std::move(n);
        continue;
      }
      note_idle(q.parent);
      const int rc = conn_->remove(n.path, n.stat.version, ctx);
      if (rc == ZNONODE) return ReleaseResult{};
      if (rc == ZBADVERSION) continue;
      if (rc != ZOK) return err(rc, "release " + n.path);
      if (steady_clock::now() < n.alive_until) return ReleaseResult{true, 0};
      // The answer came late: held if ZooKeeper's clock, read after the
      // delete, is still before the lease's end; otherwise not known to
      // have been held, and answered as not held.
      auto now = server_now(ctx);
      return ReleaseResult{now.ok() && expiry_of(n) > *now, 0};
    } else {
      // Not known to be alive: the delete (only of the version read) and a
      // write of <root>/clock in one transaction: the write's mtime is the
      // delete's time and says whether the lease was still alive.
      ops.push_back(Op{Op::kDelete, n.path, "", n.stat.version, 0});
      ops.push_back(Op{Op::kSet, options_.root + "/clock", "", -1, 0});
      note_idle(q.parent);
    }
    std::vector<OpResult> res;
    const int rc = conn_->multi(ops, &res, ctx);
    if (rc == ZNONODE && ops.size() == 2 && res.size() == 2 &&
        res[1].rc == ZNONODE) {
      // <root>/clock is missing: make it and release again.
      if (Status s = ensure_path(ops[1].path, ctx); !s.ok()) return s.error();
      cached = std::move(n);
      continue;
    }
    if (rc == ZNONODE) return ReleaseResult{};
    if (rc == ZBADVERSION) continue;
    if (rc != ZOK) return err(rc, "release " + n.path);
    const std::int64_t now = res[ops.size() - 1].stat.mtime;
    const bool was_held = expiry_of(n) > now;
    if (ops.size() == 1) {
      if (!was_held) {
        conn_->remove(n.path, res[0].stat.version, ctx);
        return ReleaseResult{};
      }
      return ReleaseResult{true, d.holds};
    }
    return ReleaseResult{was_held, 0};
  }
  return Error(Errc::unavailable,
               "zookeeper " + conn_->where() + ": the lease on lock " +
                   core::quote_name(name) + " kept changing while released");
}

Result<LockInfo> ZkStore::describe(std::string_view name,
                                   const CallContext& ctx) {
  auto q = read_queue(name, ctx);
  if (!q.ok()) return std::move(q).error();
  if (!q->exists) {
    LockInfo info;
    info.name = std::string(name);
    return info;
  }
  auto now = server_now(ctx);
  if (!now.ok()) return std::move(now).error();
  return describe_at(name, &*q, *now, ctx);
}

LockInfo ZkStore::describe_at(std::string_view name, Queue* q, std::int64_t now,
                              const CallContext& ctx) {
  LockInfo info;
  info.name = std::string(name);
  // last_fencing_token: >= every token granted on this name. Every
  // request that left changed the parent (pzxid) after its grant write; an
  // exclusive holder of a mutex started the latest lease, so its token is
  // the latest. Shared holders (rule 18) may have seen later readers come
  // and go: the larger of pzxid and their tokens.
  info.last_fencing_token = static_cast<std::uint64_t>(q->parent_stat.pzxid);
  if (q->nodes.empty()) return info;
  info.capacity = q->capacity();
  info.holders = holders_of(*q, now, ctx);
  const bool many = info.capacity > 1 || q->nodes[0].name.shared();
  if (!many && info.holders.size() == 1) {
    info.last_fencing_token = info.holders[0].fencing_token;
  }
  const std::size_t front = q->front();
  for (std::size_t i = 0; i < q->nodes.size(); ++i) {
    QNode& n = q->nodes[i];
    if (!n.loaded && !load(n, ctx).ok()) continue;
    if (n.gone) continue;
    const bool holding = i < front && n.data.state == State::kHolding;
    if (holding && many) {
      info.last_fencing_token =
          std::max(info.last_fencing_token, fencing_of(n));
    }
    if (holding || expiry_of(n) <= now) continue;  // a holder, or over
    WaiterInfo w;
    w.label = n.data.label;
    w.waited = milliseconds(std::max<std::int64_t>(0, now - n.stat.ctime));
    w.all_or_nothing = n.name.kind == Kind::kAll;
    w.shared = n.name.shared();
    info.waiters.push_back(std::move(w));
  }
  return info;
}

Result<std::vector<LockInfo>> ZkStore::list(std::string_view prefix,
                                            std::size_t limit,
                                            const CallContext& ctx) {
  std::vector<std::string> children;
  Stat st;
  const std::string locks = options_.root + "/locks";
  const int rc = conn_->children(locks, &children, &st, ctx);
  std::vector<LockInfo> out;
  if (rc == ZNONODE) return out;
  if (rc != ZOK) return err(rc, "list " + locks);
  std::vector<std::string> names;
  for (const auto& c : children) {
    auto n = unescape(c);
    if (n && n->starts_with(prefix)) names.push_back(std::move(*n));
  }
  std::sort(names.begin(), names.end());
  std::optional<std::int64_t> now;
  for (const auto& n : names) {
    if (out.size() >= limit) break;
    auto q = read_queue(n, ctx);
    if (!q.ok()) return std::move(q).error();
    if (q->nodes.empty()) continue;
    if (!now) {
      auto t = server_now(ctx);
      if (!t.ok()) return std::move(t).error();
      now = *t;
    }
    LockInfo info = describe_at(n, &*q, *now, ctx);
    if (!info.holders.empty() || !info.waiters.empty()) {
      out.push_back(std::move(info));
    }
  }
  return out;
}

namespace {
std::string counter_path(const std::string& root, std::string_view name) {
  return root + "/counters/" + escape(name);
}
}  // namespace

Result<std::int64_t> ZkStore::counter_get(std::string_view name,
                                          const CallContext& ctx) {
  const std::string path = counter_path(options_.root, name);
  std::string data;
  Stat st;
  const int rc = conn_->get(path, &data, &st, ctx);
  if (rc == ZNONODE) return 0;
  if (rc != ZOK) return err(rc, "read " + path);
  return parse_counter(data, path);
}

Result<std::int64_t> ZkStore::counter_update(
    std::string_view name,
    const std::function<Result<std::int64_t>(std::int64_t)>& next_of,
    const CallContext& ctx) {
  const std::string path = counter_path(options_.root, name);
  // A counter made without this store's ACL is not written (check_acl).
  if (Status s = check_acl(path, ctx); !s.ok()) return s.error();
  for (;;) {
    std::string data;
    Stat st;
    int rc = conn_->get(path, &data, &st, ctx);
    std::int64_t v = 0;
    if (rc == ZOK) {
      auto p = parse_counter(data, path);
      if (!p.ok()) return std::move(p).error();
      v = *p;
    } else if (rc != ZNONODE) {
      return err(rc, "read " + path);
    }
    auto next = next_of(v);
    if (!next.ok()) return next;
    const std::string bytes = std::to_string(*next);
    if (rc == ZNONODE) {
      rc = conn_->create(path, bytes, kPersistent, nullptr, ctx);
      if (rc == ZNONODE) {
        if (Status s = ensure_path(options_.root + "/counters", ctx); !s.ok()) {
          return s.error();
        }
        continue;
      }
      if (rc == ZNODEEXISTS) continue;  // made meanwhile: read again
    } else {
      // Only over the value just read (a conflict reads again).
      rc = conn_->set(path, bytes, st.version, nullptr, ctx);
      if (rc == ZBADVERSION || rc == ZNONODE) continue;
    }
    if (rc != ZOK) return err(rc, "write " + path);
    return next;
  }
}

Result<std::int64_t> ZkStore::counter_add(std::string_view name,
                                          std::int64_t delta,
                                          const CallContext& ctx) {
  return counter_update(
      name,
      [&](std::int64_t v) -> Result<std::int64_t> {
        std::int64_t next = 0;
        if (__builtin_add_overflow(v, delta, &next)) {
          return Error(Errc::invalid_argument,
                       "counter " + core::quote_name(name) + " add of " +
                           std::to_string(delta) + " would overflow (value " +
                           std::to_string(v) + ")");
        }
        return next;
      },
      ctx);
}

Result<std::int64_t> ZkStore::counter_take(std::string_view name,
                                           std::int64_t n,
                                           const CallContext& ctx) {
  return counter_update(
      name,
      [&](std::int64_t v) -> Result<std::int64_t> {
        if (v < n) {
          return Error(Errc::not_acquired, "counter " + core::quote_name(name) +
                                               " is " + std::to_string(v) +
                                               ", less than " +
                                               std::to_string(n));
        }
        return v - n;
      },
      ctx);
}

}  // namespace zk
}  // namespace baton::store
