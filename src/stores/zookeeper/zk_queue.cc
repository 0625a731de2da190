// stores/zookeeper/zk_queue.cc — a lock's queue of request nodes, and
// acquire (docs/stores/zookeeper.md, "Acquire").
#include <zookeeper/zookeeper.h>

#include <algorithm>
#include <limits>

#include "core/validate.h"
#include "stores/call_deadline.h"
#include "stores/zookeeper/zk_store.h"

namespace baton::store::zk {
namespace {

using std::chrono::microseconds;
using std::chrono::steady_clock;

constexpr std::int64_t kNever = std::numeric_limits<std::int64_t>::max();

Error vanished(std::string_view name) {
  return Error(Errc::unavailable,
               "the request for lock " + core::quote_name(name) +
                   " vanished while it waited (its ZooKeeper session "
                   "expired); retry with the same token");
}

Error withdrawn(std::string_view name) {
  return Error(Errc::not_acquired, "the request for lock " +
                                       core::quote_name(name) +
                                       " was withdrawn while it waited");
}

// Why a try was refused: " is not free", or with shared mode (rule 18)
// what kind of holder or waiter stood in its way.
std::string busy(const std::vector<HolderInfo>& holders, bool shared) {
  const auto readers =
      std::count_if(holders.begin(), holders.end(),
                    [](const HolderInfo& h) { return h.shared; });
  if (readers > 0 && !shared) {
    return " is held shared by " + std::to_string(readers) +
           (readers == 1 ? " holder" : " holders");
  }
  if (shared && !holders.empty() && readers == 0) return " is held exclusively";
  if (shared && readers > 0) {
    return " has an exclusive request waiting ahead of this one (FIFO)";
  }
  return " is not free";
}

// Was the never-written request at `first` at the front (Queue::front())
// when it was made, so that its create started its lease (token = czxid)?
// `mine` (at `second`, made later by this call) shows it: no request left
// between the two creates (every sequence number between them is still
// listed: a delete would have used one up too) and none since ours (the
// parent's pzxid is our czxid), so the requests ahead of `first` now are
// the ones that were ahead of it then.
bool created_at_front(const Queue& q, int first, int second, const Stat& mine) {
  if (q.parent_stat.pzxid != mine.czxid) return false;
  const std::int64_t a = q.nodes[first].name.seq;
  const std::int64_t b = q.nodes[second].name.seq;
  return b - a - 1 == second - first - 1;
}

}  // namespace

std::shared_ptr<ReadAhead> ZkStore::read_ahead(std::string_view name,
                                               const std::string& my_path) {
  auto out = std::make_shared<ReadAhead>();
  const std::string mine = my_path.substr(my_path.rfind('/') + 1);
  auto pick = [mine](std::vector<std::string>& children) -> std::string {
    auto me = parse_node_name(mine);
    if (!me) return "";
    // The child with the least sequence number after ours.
    std::optional<NodeName> best;
    for (const auto& c : children) {
      auto n = parse_node_name(c);
      if (n && n->seq > me->seq && (!best || n->seq < best->seq)) best = n;
    }
    // Only a plain exclusive request of a mutex: the release that grants
    // it need not know anything about the requests behind it.
    if (!best || best->kind != Kind::kSingle || best->capacity != 1) return "";
    return best->child;
  };
  auto done = [out](int rc, const std::string& path, std::string data,
                    const Stat& stat) {
    if (rc != ZOK) return;
    auto d = decode(data);
    if (!d || !d->reentrancy_key.empty() || d->state == State::kQueued) return;
    out->set(NextInLine{path, std::move(*d), stat.version});
  };
  if (conn_->read_child_async(lock_path(name), pick, done) != ZOK) {
    return nullptr;
  }
  return out;
}

int Queue::index_of(std::string_view path) const {
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    if (nodes[i].path == path) return static_cast<int>(i);
  }
  return -1;
}

int Queue::index_of(const OwnerToken& token) const {
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    if (nodes[i].name.token == token) return static_cast<int>(i);
  }
  return -1;
}

std::size_t Queue::front() const {
  if (nodes.empty()) return 0;
  if (!nodes[0].name.shared()) {
    return std::min<std::size_t>(capacity(), nodes.size());
  }
  std::size_t n = 0;
  while (n < nodes.size() && nodes[n].name.shared()) ++n;
  return n;
}

std::int64_t expiry_of(const QNode& n) {
  if (!n.loaded || n.gone || n.data.state == State::kWaiting) return kNever;
  return n.stat.mtime + n.data.ttl_ms;
}

std::uint64_t fencing_of(const QNode& n) {
  if (n.data.fencing != 0) return n.data.fencing;
  return static_cast<std::uint64_t>(n.stat.mzxid);
}

std::string ZkStore::lock_path(std::string_view name) const {
  return options_.root + "/locks/" + escape(name);
}

Result<Queue> ZkStore::read_queue(std::string_view name) {
  Queue q;
  q.parent = lock_path(name);
  std::vector<std::string> children;
  const int rc = conn_->children(q.parent, &children, &q.parent_stat);
  if (rc == ZNONODE) return q;
  if (rc != ZOK) return err(rc, "list " + q.parent);
  q.exists = true;
  for (auto& c : children) {
    auto n = parse_node_name(c);
    if (!n) continue;  // not ours
    QNode node;
    node.path = q.parent + "/" + c;
    node.name = std::move(*n);
    q.nodes.push_back(std::move(node));
  }
  std::sort(q.nodes.begin(), q.nodes.end(), [](const QNode& a, const QNode& b) {
    return a.name.seq < b.name.seq;
  });
  return q;
}

Status ZkStore::load(QNode& n, const std::shared_ptr<Waker>& watch) {
  std::string data;
  const int rc = conn_->get(n.path, &data, &n.stat, watch);
  n.loaded = true;
  if (rc == ZNONODE) {
    n.gone = true;
    return {};
  }
  if (rc != ZOK) return err(rc, "read " + n.path);
  auto d = decode(data);
  if (!d) {
    return Error(Errc::internal, "zookeeper " + conn_->where() + ": node " +
                                     n.path + " has data baton cannot read");
  }
  n.data = std::move(*d);
  n.gone = false;
  return {};
}

Result<std::int64_t> ZkStore::server_now() {
  Stat st;
  const std::string path = options_.root + "/clock";
  int rc = conn_->set(path, "", -1, &st);
  if (rc == ZNONODE) {
    if (Status s = ensure_path(path); !s.ok()) return s.error();
    rc = conn_->set(path, "", -1, &st);
  }
  if (rc != ZOK) return err(rc, "write " + path);
  return st.mtime;
}

Status ZkStore::ensure_path(const std::string& path) {
  // Every component from the root down; existing ones are fine.
  for (std::size_t i = 1; i <= path.size(); ++i) {
    if (i != path.size() && path[i] != '/') continue;
    const std::string part = path.substr(0, i);
    const int rc = conn_->create(part, "", kPersistent, nullptr, nullptr);
    if (rc != ZOK && rc != ZNODEEXISTS) return err(rc, "create " + part);
  }
  return {};
}

Result<ZkStore::Made> ZkStore::create_counted(const std::string& parent,
                                              const std::string& prefix,
                                              const NodeData& data) {
  // [create the lock's node,] create our request, write the lock's node.
  std::vector<Op> ops(3);
  ops[0].type = Op::kCreate;
  ops[0].path = parent;
  ops[0].flags = kPersistent;
  ops[1].type = Op::kCreate;
  ops[1].path = parent + "/" + prefix;
  ops[1].data = encode(data);
  ops[1].flags = kEphemeralSequential;
  ops[2].type = Op::kSet;
  ops[2].path = parent;
  bool make_lock = false;
  for (int attempt = 0; attempt < 10; ++attempt) {
    const std::vector<Op> send(ops.begin() + (make_lock ? 0 : 1), ops.end());
    std::vector<OpResult> res;
    const std::int64_t session = conn_->session_id();
    const int rc = conn_->multi(send, &res);
    if (rc == ZOK) {
      // One transaction: one zxid and one time for every write, so the
      // lock node's new mzxid and mtime are our node's czxid and ctime,
      // and its child count is the queue's length right after our create.
      const Stat& p = res.back().stat;
      Made m;
      m.path = res[res.size() - 2].path;
      m.stat.czxid = m.stat.mzxid = p.mzxid;
      m.stat.ctime = m.stat.mtime = p.mtime;
      m.stat.ephemeral_owner = session;
      m.alone = p.num_children == 1;
      return m;
    }
    const int first = res.empty() ? rc : res[0].rc;
    if (!make_lock && first == ZNONODE) {
      // The lock's node is missing (a new lock, or cleaned up meanwhile):
      // make it in the same transaction as our request, so that a caller
      // that came after us cannot queue ahead while we make it.
      make_lock = true;
    } else if (make_lock && first == ZNODEEXISTS) {
      make_lock = false;  // another request made it meanwhile
    } else if (make_lock && first == ZNONODE) {
      // The root is missing too (a new chroot).
      if (Status s = ensure_path(parent); !s.ok()) return s.error();
      make_lock = false;
    } else {
      return err(rc, "create " + ops[1].path);
    }
  }
  return Error(Errc::unavailable, "zookeeper " + conn_->where() +
                                      ": the node of lock " + parent +
                                      " keeps vanishing");
}

Grant ZkStore::grant_of(std::string_view name, const QNode& n,
                        std::uint64_t fencing, std::int64_t expiry_ms,
                        std::int64_t arrival_ms, std::int64_t contact_ms) {
  Grant g;
  g.name = std::string(name);
  g.token = n.name.token;
  g.fencing_token = fencing;
  g.ttl = milliseconds(n.data.ttl_ms);
  g.holds = n.data.holds;
  g.capacity = n.name.capacity;
  g.shared = n.name.shared();
  const std::int64_t end =
      std::min(expiry_ms, contact_ms + conn_->session_timeout_ms());
  g.valid_for =
      microseconds(std::max<std::int64_t>(0, end - arrival_ms) * 1000);
  g.store_expires_at_ms = expiry_ms;
  return g;
}

Result<Grant> ZkStore::acquire_queued(const AcquireSpec& spec,
                                      milliseconds wait) {
  const SteadyTime until =
      core::is_forever(wait) ? SteadyTime::max() : steady_clock::now() + wait;
  const std::string parent = lock_path(spec.name);
  NodeData mine;
  mine.state = State::kHolding;
  mine.ttl_ms = spec.ttl.count();
  mine.reentrancy_key = spec.reentrancy_key;
  mine.label = spec.label;
  auto created =
      create_counted(parent,
                     node_prefix(spec.token, spec.capacity,
                                 spec.shared ? Kind::kShared : Kind::kSingle),
                     mine);
  if (!created.ok()) return std::move(created).error();
  std::string my_path = created->path;
  Stat my_stat = created->stat;
  const std::int64_t session = conn_->session_id();
  const std::int64_t arrival = my_stat.ctime;
  auto my_name = parse_node_name(my_path.substr(my_path.rfind('/') + 1));
  if (created->alone && my_name) {
    // No other request existed at our create (its transaction counted the
    // lock's children): the create started the lease, token czxid, as in
    // the one-write grant below, without listing the queue.
    QNode me;
    me.path = my_path;
    me.name = *my_name;
    me.loaded = true;
    me.data = mine;
    me.stat = my_stat;
    me.data.fencing = static_cast<std::uint64_t>(my_stat.czxid);
    remember(spec.name, me);
    return grant_of(spec.name, me, me.data.fencing, my_stat.ctime + mine.ttl_ms,
                    arrival, arrival);
  }
  auto waker = std::make_shared<Waker>();
  conn_->on_session_event(waker);
  std::uint64_t seen = waker->generation();
  bool fresh = true;  // no write to our node since it was made
  // A waiter's node keeps st=h (and the lease clock of its create) until
  // TTL/3 of waiting: most waits are shorter, and a write saved is a
  // quorum write (fsync) saved. After that it is rewritten st=w, so that
  // the node cannot look like an expired holder once it reaches the front.
  const SteadyTime rewrite_at =
      steady_clock::now() + std::max(spec.ttl / 3, milliseconds(1));
  // Our node is gone: withdrawn by a release with our token while our
  // session lives; else it went with an expired session, or (still st=h
  // past its create's TTL) it was taken for an expired holder.
  auto gone = [&] {
    const bool lapsed = fresh && conn_->server_time_lower_bound() >=
                                     my_stat.ctime + spec.ttl.count();
    return !lapsed && conn_->session_id() == session &&
                   !conn_->expired_session(session)
               ? withdrawn(spec.name)
               : vanished(spec.name);
  };

  // The request behind ours, read while we waited: our release grants it
  // in the same transaction as its delete (release()).
  std::shared_ptr<ReadAhead> succ;
  bool succ_tried = false;
  // Our node was written by another: the release of the lease ahead
  // granted it (a write st=h over the version we made). Empty if not: our
  // node changed otherwise, read the queue again.
  auto adopt = [&](QNode& me) -> std::optional<Result<Grant>> {
    if (Status s = load(me); !s.ok()) return s.error();
    if (me.gone) return gone();
    if (me.data.state != State::kHolding ||
        me.stat.version == my_stat.version) {
      my_stat.version = me.stat.version;
      return std::nullopt;
    }
    me.data.fencing = static_cast<std::uint64_t>(me.stat.mzxid);
    me.ahead = succ;
    remember(spec.name, me);
    // ZooKeeper heard from this session after the grant (our read), so
    // the grant's mtime is a time it last heard from us, or earlier.
    return grant_of(spec.name, me, me.data.fencing,
                    me.stat.mtime + me.data.ttl_ms, arrival, me.stat.mtime);
  };
  // The grant is a write: its zxid is the fencing token, its mtime starts
  // the lease. Empty: our node changed, read the queue again.
  auto write_grant = [&](QNode& me) -> std::optional<Result<Grant>> {
    NodeData d = mine;
    d.state = State::kHolding;
    Stat st;
    const int rc = conn_->set(my_path, encode(d), my_stat.version, &st);
    if (rc == ZNONODE) return gone();
    if (rc == ZBADVERSION) return adopt(me);
    if (rc != ZOK) return err(rc, "grant " + my_path);
    me.data = d;
    me.stat = st;
    me.data.fencing = static_cast<std::uint64_t>(st.mzxid);
    me.ahead = succ;
    remember(spec.name, me);
    return grant_of(spec.name, me, static_cast<std::uint64_t>(st.mzxid),
                    st.mtime + d.ttl_ms, arrival, st.mtime);
  };
  auto timed_out = [&] {
    conn_->remove(my_path, -1);
    note_idle(parent);
    return Error(Errc::timeout, "lock " + core::quote_name(spec.name) +
                                    " was not granted within " +
                                    std::to_string(wait.count()) + "ms");
  };
  auto past_deadline = [&] {
    return steady_clock::now() >= until || call_deadline_passed();
  };
  // Look at the holders even if not next in line: a try does, a waiter
  // after a re-check that no watch woke (in case the next in line is
  // stuck).
  bool look_all = wait <= milliseconds::zero();
  std::optional<Queue> reuse;  // the queue as read, less nodes found gone

  for (;;) {
    auto q = reuse ? Result<Queue>(std::move(*reuse)) : read_queue(spec.name);
    reuse.reset();
    if (!q.ok()) return std::move(q).error();
    int pos = q->index_of(my_path);
    if (pos < 0) return gone();
    // Rule 17: a repeated acquire (a retry after a lost reply, or the same
    // token from another client) finds the first call's request.
    bool again = false;
    for (int i = 0; i < static_cast<int>(q->nodes.size()); ++i) {
      QNode& d = q->nodes[i];
      if (i == pos || d.name.token != spec.token) continue;
      if (Status s = load(d); !s.ok()) return s.error();
      if (d.gone || conn_->expired_session(d.stat.ephemeral_owner)) continue;
      if (i > pos) {
        // A later duplicate (calls racing with one token): ours is first.
        if (d.data.state != State::kHolding) conn_->remove(d.path, -1);
        continue;
      }
      const bool holder =
          i < static_cast<int>(q->front()) && d.data.state == State::kHolding;
      if (holder && expiry_of(d) <= my_stat.ctime) continue;  // over
      if (holder && (d.stat.mzxid != d.stat.czxid ||
                     created_at_front(*q, i, pos, my_stat))) {
        // The first call's lease: the same token and expiry.
        conn_->remove(my_path, -1);
        remember(spec.name, d);
        return grant_of(spec.name, d, fencing_of(d), expiry_of(d), arrival,
                        arrival);
      }
      // Take over its place in the queue (and make its grant write).
      conn_->remove(my_path, -1);
      my_path = d.path;
      my_stat = d.stat;
      fresh = true;
      again = true;
      break;
    }
    if (again) continue;

    const std::uint32_t cap = q->capacity();
    if (cap != spec.capacity) {
      conn_->remove(my_path, -1);
      return Error(Errc::invalid_argument,
                   "lock " + core::quote_name(spec.name) + " has capacity " +
                       std::to_string(cap) + "; the request asked for " +
                       std::to_string(spec.capacity));
    }
    QNode& me = q->nodes[pos];
    const int front = static_cast<int>(q->front());
    // Rule 12: join a live lease with the same reentrancy key.
    if (!spec.reentrancy_key.empty()) {
      for (int i = 0; i < pos && i < front; ++i) {
        QNode& h = q->nodes[i];
        if (Status s = load(h); !s.ok()) return s.error();
        if (h.gone || h.data.state != State::kHolding ||
            h.data.reentrancy_key != spec.reentrancy_key) {
          continue;
        }
        NodeData d = h.data;
        d.holds += 1;
        d.fencing = fencing_of(h);
        d.ttl_ms = spec.ttl.count();
        d.aliases.push_back(spec.token);
        Stat st;
        const int rc = conn_->set(h.path, encode(d), h.stat.version, &st);
        if (rc == ZNONODE || rc == ZBADVERSION) {
          again = true;
          break;
        }
        if (rc != ZOK) return err(rc, "join " + h.path);
        const std::int64_t old_expiry = expiry_of(h);
        if (old_expiry <= st.mtime) {
          // It had expired: the write must not revive it (rule 3).
          conn_->remove(h.path, st.version);
          again = true;
          break;
        }
        std::int64_t expiry = st.mtime + d.ttl_ms;
        if (old_expiry > expiry) {
          // max(old expiry, now + ttl): keep the longer lease.
          d.ttl_ms = old_expiry - st.mtime;
          Stat st2;
          if (conn_->set(h.path, encode(d), st.version, &st2) == ZOK) {
            expiry = st2.mtime + d.ttl_ms;
            st = st2;
          }
        }
        conn_->remove(my_path, -1);
        h.data = d;
        h.stat = st;
        remember(spec.name, h);
        return grant_of(spec.name, h, d.fencing, expiry, arrival, st.mtime);
      }
      if (again) continue;
    }
    for (int i = 0; !spec.reentrancy_key.empty() && i < pos && i < front; ++i) {
      QNode& h = q->nodes[i];
      if (!h.loaded && !load(h).ok()) continue;
      if (!h.gone && std::find(h.data.aliases.begin(), h.data.aliases.end(),
                               spec.token) != h.data.aliases.end()) {
        // A retry of a join that went through (rule 17).
        conn_->remove(my_path, -1);
        return grant_of(spec.name, h, fencing_of(h), expiry_of(h), arrival,
                        arrival);
      }
    }

    std::int64_t next_expiry = 0;
    // Holders' expiry is collected by the next in line.
    auto reclaimed = reclaim(*q, pos, &next_expiry, look_all || pos <= front);
    if (!reclaimed.ok()) return std::move(reclaimed).error();
    if (*reclaimed) {
      // A node ahead that is gone leaves the queue as read less that
      // node (only later requests join, behind ours): no need to list it
      // again. Not for the one-write grant, which needs a fresh pzxid.
      auto& ns = q->nodes;
      const auto left = std::remove_if(
          ns.begin(), ns.end(), [](auto& n) { return n.loaded && n.gone; });
      if (left != ns.end()) {
        ns.erase(left, ns.end());
        q->parent_stat.pzxid = -1;
        reuse = std::move(*q);
      }
      continue;
    }
    auto back = held_back(*q, pos);
    if (!back.ok()) return std::move(back).error();

    if (pos < front && !*back) {
      if (fresh && q->parent_stat.pzxid == my_stat.czxid &&
          my_path == created->path) {
        // Nobody joined or left the queue since our create, so we were at
        // the front then: the create started the lease.
        me.data = mine;
        me.stat = my_stat;
        me.data.fencing = static_cast<std::uint64_t>(my_stat.czxid);
        remember(spec.name, me);
        return grant_of(spec.name, me,
                        static_cast<std::uint64_t>(my_stat.czxid),
                        my_stat.ctime + mine.ttl_ms, arrival, arrival);
      }
      if (auto g = write_grant(me)) return std::move(*g);
      continue;
    }

    if (wait <= milliseconds::zero()) {
      conn_->remove(my_path, -1);
      note_idle(parent);
      auto holders = holders_of(*q, conn_->server_time_lower_bound());
      return Error(Errc::not_acquired, "lock " + core::quote_name(spec.name) +
                                           busy(holders, spec.shared))
          .with_holders(std::move(holders));
    }
    if (fresh && steady_clock::now() >= rewrite_at) {
      // A waiter's node has no lease: it stays until granted, withdrawn or
      // its session ends (rule 9).
      NodeData d = mine;
      d.state = State::kWaiting;
      Stat st;
      const int rc = conn_->set(my_path, encode(d), my_stat.version, &st);
      if (rc == ZNONODE) return gone();
      if (rc != ZOK && rc != ZBADVERSION) return err(rc, "queue " + my_path);
      if (rc == ZOK) {
        my_stat.version = st.version;
        fresh = false;
      }
      continue;
    }
    waker->forget_events();
    auto watching =
        watch_ahead(*q, static_cast<std::size_t>(pos), waker, &next_expiry);
    if (!watching.ok()) return std::move(watching).error();
    if (!*watching) {
      if (past_deadline()) return timed_out();
      continue;
    }
    // An exclusive request of a mutex behind an exclusive one (`ahead`) is
    // next in line while that one holds, and at the front once it is
    // deleted (nothing joins ahead of a request): its watch says so, and
    // it makes its grant write without listing the queue again. Before
    // that, when the node ahead changes, a re-read of that node alone
    // tells whether it became the holder (its grant write).
    const bool mutex = !spec.shared && cap == 1 && pos >= 1 &&
                       !q->nodes[pos - 1].name.shared();
    const std::string ahead = pos >= 1 ? q->nodes[pos - 1].path : "";
    bool next = mutex && pos == 1;
    // Under contention (someone waited ahead of us or behind us when we
    // listed), the next in line reads the request behind it in the
    // background while the holder holds (it keeps sleeping: the answer
    // can come after its grant), so that its own release can hand over.
    const bool contended = pos >= 2 || q->nodes.size() > 2;
    for (;;) {
      if (next && contended && !succ_tried) {
        succ_tried = true;
        succ = read_ahead(spec.name, my_path);
      }
      look_all = !sleep(waker, &seen, next_expiry,
                        fresh ? std::min(until, rewrite_at) : until);
      if (past_deadline()) return timed_out();
      if (waker->was_changed(my_path)) {
        // Written by the release of the lease ahead (its hand-over writes
        // our node before it deletes its own, so this event comes first).
        if (auto g = adopt(me)) return std::move(*g);
        break;
      }
      if (!mutex) break;
      if (next) {
        if (!waker->was_deleted(ahead)) break;
        if (auto g = write_grant(me)) return std::move(*g);
        break;
      }
      if (!waker->only_changed(ahead)) break;
      waker->forget_events();
      std::vector<int> rcs;
      std::vector<Stat> sts;
      std::vector<std::string> data;
      if (conn_->watch({ahead}, waker, &rcs, &sts, &data) != ZOK ||
          rcs[0] != ZOK) {
        break;
      }
      auto d = decode(data[0]);
      if (!d || d->state != State::kHolding) break;
      next = true;  // it holds: it is the only node ahead of ours
      next_expiry = sts[0].mtime + d->ttl_ms;
    }
  }
}

}  // namespace baton::store::zk
