// stores/zookeeper/zk_queue.cc — a lock's queue of request nodes: listing,
// loading, the one-transaction create, grants (docs/stores/zookeeper.md,
// "Node layout").
#include <zookeeper/zookeeper.h>

#include <algorithm>
#include <limits>

#include "core/validate.h"
#include "stores/zookeeper/zk_store.h"

namespace baton::store::zk {
namespace {

using std::chrono::microseconds;

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

Error capacity_mismatch(std::string_view name, std::uint32_t has,
                        std::uint32_t asked) {
  return Error(Errc::invalid_argument,
               "lock " + core::quote_name(name) + " has capacity " +
                   std::to_string(has) + "; the request asked for " +
                   std::to_string(asked));
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

Result<Queue> ZkStore::read_queue(std::string_view name,
                                  const CallContext& ctx) {
  Queue q;
  q.parent = lock_path(name);
  std::vector<std::string> children;
  const int rc = conn_->children(q.parent, &children, &q.parent_stat, ctx);
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

Status ZkStore::load(QNode& n, const CallContext& ctx) {
  std::string data;
  const int rc = conn_->get(n.path, &data, &n.stat, ctx);
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

Result<std::int64_t> ZkStore::server_now(const CallContext& ctx) {
  Stat st;
  const std::string path = options_.root + "/clock";
  int rc = conn_->set(path, "", -1, &st, ctx);
  if (rc == ZNONODE) {
    if (Status s = ensure_path(path, ctx); !s.ok()) return s.error();
    rc = conn_->set(path, "", -1, &st, ctx);
  }
  if (rc != ZOK) return err(rc, "write " + path);
  return st.mtime;
}

Status ZkStore::ensure_path(const std::string& path, const CallContext& ctx) {
  // Every component from the root down; existing ones are fine.
  for (std::size_t i = 1; i <= path.size(); ++i) {
    if (i != path.size() && path[i] != '/') continue;
    const std::string part = path.substr(0, i);
    const int rc = conn_->create(part, "", kPersistent, nullptr, ctx);
    if (rc != ZOK && rc != ZNODEEXISTS) return err(rc, "create " + part);
  }
  return {};
}

Result<ZkStore::Made> ZkStore::create_counted(const std::string& parent,
                                              const std::string& prefix,
                                              const NodeData& data,
                                              const CallContext& ctx) {
  // A lock's node made without this store's ACL is refused, not joined
  // (checked once per node: check_acl).
  if (Status s = check_acl(parent, ctx); !s.ok()) return s.error();
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
    const int rc = conn_->multi(send, &res, ctx);
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
      if (Status s = ensure_path(parent, ctx); !s.ok()) return s.error();
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

}  // namespace baton::store::zk
