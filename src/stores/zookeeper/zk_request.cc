// stores/zookeeper/zk_request.cc — one acquire on zookeeper:// as the
// engine's primitives (docs/stores/zookeeper.md, "Acquire" and "Waiting
// without a herd"):
//   ask          the request node, made in one transaction that also counts
//                the lock's requests: alone, that create is the grant;
//                otherwise one look at the queue (FIFO, rules 12 and 17,
//                expired holders collected, the grant write);
//   wait_change  the watches on what can let it in (the node ahead, its own
//                node), then a sleep until one fires;
//   look         what the watch said: a hand-over's grant on its own node,
//                the holder ahead deleted (the grant write, no listing), the
//                node ahead now holding (re-read alone); else the queue
//                again;
//   withdraw     deletes the request node, or answers the grant that a
//                hand-over wrote into it.
#include <zookeeper/zookeeper.h>

#include <algorithm>

#include "core/validate.h"
#include "stores/zookeeper/zk_store.h"

namespace baton::store::zk {
namespace {

using std::chrono::steady_clock;

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

// What a step of a pass over the queue decided: go on (empty), pass again
// at once, or the answer.
struct Step {
  bool again = false;
  std::optional<Result<Answer>> answer;
  explicit operator bool() const { return again || answer.has_value(); }
};
Step again() { return Step{true, std::nullopt}; }
Step done(Result<Answer> a) { return Step{false, std::move(a)}; }

class ZkRequest final : public Request {
 public:
  ZkRequest(ZkStore& s, const AcquireSpec& spec)
      : s_(s), spec_(spec), parent_(s.lock_path(spec.name)), wake_(s.conn()) {
    mine_.state = State::kHolding;
    mine_.ttl_ms = spec.ttl.count();
    mine_.reentrancy_key = spec.reentrancy_key;
    mine_.label = spec.label;
  }

  Result<Answer> ask(AskMode mode, milliseconds wait_left,
                     const CallContext& ctx) override;
  Result<Answer> look(milliseconds wait_left, const CallContext& ctx) override;
  Result<Answer> withdraw(const CallContext& ctx) override;
  std::optional<Grant> wait_change(Clock::time_point until,
                                   const CallContext& ctx) override;
  void interrupt() override {
    Waitable::interrupt();
    wake_.interrupt();
  }

 private:
  Conn& conn() { return s_.conn(); }
  // Our request node as a queue entry (name and path only).
  QNode self() const;
  Answer granted(const Grant& g);
  // Lease node `n` holds: remembered for extend and release, and granted.
  Answer grant(QNode& n, std::uint64_t fencing, std::int64_t expiry_ms,
               std::int64_t contact_ms);
  // Our create started the lease: token czxid, expiry ctime + TTL.
  Answer created_grant(QNode& me);
  // Our node is gone: withdrawn by a release with our token while our
  // session lives; else it went with an expired session, or (still st=h
  // past its create's TTL) it was taken for an expired holder.
  Result<Answer> gone();
  // Passes over the queue until one decides (a try always decides).
  Result<Answer> settle(bool try_only, const CallContext& ctx);
  Step pass(bool try_only, const CallContext& ctx);
  Step same_token(Queue& q, int pos, const CallContext& ctx);
  Step join(Queue& q, int pos, const CallContext& ctx);
  Step grant_at_front(Queue& q, int pos, const CallContext& ctx);
  Step refuse_try(Queue& q, const CallContext& ctx);
  Step rewrite_waiting(const CallContext& ctx);
  Answer queued(Queue q, int pos, std::int64_t next_expiry,
                const CallContext& ctx);
  Answer still_queued(const CallContext& ctx) const;
  // Our node `me`, loaded, was written st=h by another over the version
  // we knew: the release of the lease ahead handed the lock over.
  bool handed_over(const QNode& me) const {
    return !me.gone && me.data.state == State::kHolding &&
           me.stat.version != my_stat_.version;
  }
  Answer take_hand_over(QNode& me);
  // Our node changed: the hand-over's grant, or (empty) not a grant.
  std::optional<Result<Answer>> adopt(QNode& me, const CallContext& ctx);
  // The grant write over the version we made. Pass again if our node
  // changed otherwise.
  Step write_grant(QNode& me, const CallContext& ctx);
  void watching(const Queue& q, int pos);
  std::optional<Result<Answer>> look_at_events(const CallContext& ctx);

  ZkStore& s_;
  const AcquireSpec spec_;
  const std::string parent_;
  NodeData mine_;
  Wakeup wake_;

  bool asked_ = false;
  std::string my_path_, created_path_;
  Stat my_stat_;
  std::int64_t session_ = 0;
  std::int64_t arrival_ = 0;  // ZooKeeper's time of our first create
  SteadyTime start_;          // before the first ask (note_alive)
  // A waiter's node keeps st=h (and the lease clock of its create) until
  // TTL/3 of waiting: most waits are shorter, and a write saved is a
  // quorum write (fsync) saved. After that it is rewritten st=w, so that
  // the node cannot look like an expired holder once it reaches the front.
  bool fresh_ = true;  // no write to our node since it was made
  Clock::time_point rewrite_at_;
  // Look at the holders even if not next in line: a try does, a waiter
  // after a sleep that no watch woke (in case the next in line is stuck).
  bool look_all_ = false;
  std::optional<Queue> reuse_;  // the queue as read, less nodes found gone
  // The last pass that queued us: what wait_change watches.
  std::optional<Queue> q_;
  int pos_ = -1;
  std::int64_t next_expiry_ = kNever;
  std::optional<Error> watch_error_;  // for the next look
  // Watches set (until a look lists the queue again). An exclusive request
  // of a mutex behind an exclusive one (`mutex_`, the node ahead `ahead_`)
  // is next in line (`next_`) while that one holds, and at the front once
  // it is deleted (nothing joins ahead of a request).
  bool watching_ = false;
  bool mutex_ = false, next_ = false, contended_ = false;
  std::string ahead_;
  // The request behind ours, read while we waited: our release grants it
  // in the same transaction as its delete (release()).
  std::shared_ptr<ReadAhead> succ_;
  bool succ_tried_ = false;
};

QNode ZkRequest::self() const {
  QNode me;
  me.path = my_path_;
  if (auto n = parse_node_name(my_path_.substr(my_path_.rfind('/') + 1))) {
    me.name = std::move(*n);
  }
  return me;
}

Answer ZkRequest::granted(const Grant& g) {
  s_.note_alive(spec_.name, g, start_);
  return Answer::granted_with(g);
}

Answer ZkRequest::grant(QNode& n, std::uint64_t fencing, std::int64_t expiry_ms,
                        std::int64_t contact_ms) {
  s_.remember(spec_.name, n);
  return granted(
      s_.grant_of(spec_.name, n, fencing, expiry_ms, arrival_, contact_ms));
}

Answer ZkRequest::created_grant(QNode& me) {
  me.loaded = true;
  me.data = mine_;
  me.stat = my_stat_;
  me.data.fencing = static_cast<std::uint64_t>(my_stat_.czxid);
  return grant(me, me.data.fencing, my_stat_.ctime + mine_.ttl_ms, arrival_);
}

Result<Answer> ZkRequest::gone() {
  const bool lapsed = fresh_ && conn().server_time_lower_bound() >=
                                    my_stat_.ctime + spec_.ttl.count();
  if (!lapsed && conn().session_id() == session_ &&
      !conn().expired_session(session_)) {
    return Answer::refused_with(withdrawn(spec_.name));
  }
  return vanished(spec_.name);
}

Result<Answer> ZkRequest::ask(AskMode mode, milliseconds,
                              const CallContext& ctx) {
  const bool try_only = mode == AskMode::try_only;
  if (asked_) return settle(try_only, ctx);
  start_ = steady_clock::now();
  rewrite_at_ = ctx.now() + std::max(spec_.ttl / 3, milliseconds(1));
  auto created = s_.create_counted(
      parent_,
      node_prefix(spec_.token, spec_.capacity,
                  spec_.shared ? Kind::kShared : Kind::kSingle),
      mine_, ctx);
  if (!created.ok()) return std::move(created).error();
  asked_ = true;
  my_path_ = created_path_ = created->path;
  my_stat_ = created->stat;
  session_ = conn().session_id();
  arrival_ = my_stat_.ctime;
  QNode me = self();
  if (created->alone && !me.name.child.empty()) {
    // No other request existed at our create (its transaction counted the
    // lock's children): the create started the lease, without listing the
    // queue.
    return created_grant(me);
  }
  wake_.arm();
  look_all_ = try_only;
  return settle(try_only, ctx);
}

Result<Answer> ZkRequest::settle(bool try_only, const CallContext& ctx) {
  watching_ = false;
  for (int n = 0; n < kMaxPasses; ++n) {
    Step st = pass(try_only, ctx);
    if (st.answer) return std::move(*st.answer);
  }
  if (!try_only) {
    Answer a = still_queued(ctx);
    a.look_at = Clock::time_point::min();  // look again at once
    return a;
  }
  return Error(Errc::unavailable,
               "zookeeper " + conn().where() + ": the queue of lock " +
                   core::quote_name(spec_.name) + " kept changing");
}

Step ZkRequest::pass(bool try_only, const CallContext& ctx) {
  auto q = reuse_ ? Result<Queue>(std::move(*reuse_))
                  : s_.read_queue(spec_.name, ctx);
  reuse_.reset();
  if (!q.ok()) return done(std::move(q).error());
  const int pos = q->index_of(my_path_);
  if (pos < 0) return done(gone());
  if (Step st = same_token(*q, pos, ctx)) return st;
  const std::uint32_t cap = q->capacity();
  if (cap != spec_.capacity) {
    conn().remove(my_path_, -1, ctx);
    return done(Answer::refused_with(
        capacity_mismatch(spec_.name, cap, spec_.capacity)));
  }
  if (Step st = join(*q, pos, ctx)) return st;
  const int front = static_cast<int>(q->front());
  std::int64_t next_expiry = 0;
  // Holders' expiry is collected by the next in line.
  auto reclaimed =
      s_.reclaim(*q, pos, &next_expiry, ctx, look_all_ || pos <= front);
  if (!reclaimed.ok()) return done(std::move(reclaimed).error());
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
      reuse_ = std::move(*q);
    }
    return again();
  }
  auto back = s_.held_back(*q, pos, ctx);
  if (!back.ok()) return done(std::move(back).error());
  if (pos < front && !*back) return grant_at_front(*q, pos, ctx);
  if (try_only) return refuse_try(*q, ctx);
  if (fresh_ && ctx.now() >= rewrite_at_) return rewrite_waiting(ctx);
  return done(queued(std::move(*q), pos, next_expiry, ctx));
}

// Rule 17: a repeated acquire (a retry after a lost reply, or the same
// token from another client) finds the first call's request.
Step ZkRequest::same_token(Queue& q, int pos, const CallContext& ctx) {
  for (int i = 0; i < static_cast<int>(q.nodes.size()); ++i) {
    QNode& d = q.nodes[i];
    if (i == pos || d.name.token != spec_.token) continue;
    if (Status st = s_.load(d, ctx); !st.ok()) return done(st.error());
    if (d.gone || conn().expired_session(d.stat.ephemeral_owner)) continue;
    if (i > pos) {
      // A later duplicate (calls racing with one token): ours is first.
      if (d.data.state != State::kHolding) conn().remove(d.path, -1, ctx);
      continue;
    }
    const bool holder =
        i < static_cast<int>(q.front()) && d.data.state == State::kHolding;
    if (holder && expiry_of(d) <= my_stat_.ctime) continue;  // over
    if (holder && (d.stat.mzxid != d.stat.czxid ||
                   created_at_front(q, i, pos, my_stat_))) {
      // The first call's lease: the same token and expiry.
      conn().remove(my_path_, -1, ctx);
      return done(grant(d, fencing_of(d), expiry_of(d), arrival_));
    }
    // Take over its place in the queue (and make its grant write).
    conn().remove(my_path_, -1, ctx);
    my_path_ = d.path;
    my_stat_ = d.stat;
    fresh_ = true;
    return again();
  }
  return {};
}

// Rule 12: join a live lease with the same reentrancy key.
Step ZkRequest::join(Queue& q, int pos, const CallContext& ctx) {
  if (spec_.reentrancy_key.empty()) return {};
  const int front = static_cast<int>(q.front());
  for (int i = 0; i < pos && i < front; ++i) {
    QNode& h = q.nodes[i];
    if (Status st = s_.load(h, ctx); !st.ok()) return done(st.error());
    if (h.gone || h.data.state != State::kHolding ||
        h.data.reentrancy_key != spec_.reentrancy_key) {
      continue;
    }
    NodeData d = h.data;
    d.holds += 1;
    d.fencing = fencing_of(h);
    d.ttl_ms = spec_.ttl.count();
    d.aliases.push_back(spec_.token);
    Stat st;
    const int rc = conn().set(h.path, encode(d), h.stat.version, &st, ctx);
    if (rc == ZNONODE || rc == ZBADVERSION) return again();
    if (rc != ZOK) return done(s_.err(rc, "join " + h.path));
    const std::int64_t old_expiry = expiry_of(h);
    if (old_expiry <= st.mtime) {
      // It had expired: the write must not revive it (rule 3).
      conn().remove(h.path, st.version, ctx);
      return again();
    }
    std::int64_t expiry = st.mtime + d.ttl_ms;
    if (old_expiry > expiry) {
      // max(old expiry, now + ttl): keep the longer lease.
      d.ttl_ms = old_expiry - st.mtime;
      Stat st2;
      if (conn().set(h.path, encode(d), st.version, &st2, ctx) == ZOK) {
        expiry = st2.mtime + d.ttl_ms;
        st = st2;
      }
    }
    conn().remove(my_path_, -1, ctx);
    h.data = d;
    h.stat = st;
    return done(grant(h, d.fencing, expiry, st.mtime));
  }
  for (int i = 0; i < pos && i < front; ++i) {
    QNode& h = q.nodes[i];
    if (!h.loaded && !s_.load(h, ctx).ok()) continue;
    if (!h.gone && std::find(h.data.aliases.begin(), h.data.aliases.end(),
                             spec_.token) != h.data.aliases.end()) {
      // A retry of a join that went through (rule 17).
      conn().remove(my_path_, -1, ctx);
      return done(granted(s_.grant_of(spec_.name, h, fencing_of(h),
                                      expiry_of(h), arrival_, arrival_)));
    }
  }
  return {};
}

Step ZkRequest::grant_at_front(Queue& q, int pos, const CallContext& ctx) {
  QNode& me = q.nodes[pos];
  if (fresh_ && q.parent_stat.pzxid == my_stat_.czxid &&
      my_path_ == created_path_) {
    // Nobody joined or left the queue since our create, so we were at
    // the front then: the create started the lease.
    return done(created_grant(me));
  }
  if (Step st = write_grant(me, ctx)) return st;
  return again();
}

Step ZkRequest::refuse_try(Queue& q, const CallContext& ctx) {
  conn().remove(my_path_, -1, ctx);
  s_.note_idle(parent_);
  auto holders = s_.holders_of(q, conn().server_time_lower_bound(), ctx);
  return done(Answer::refused_with(
      Error(Errc::not_acquired, "lock " + core::quote_name(spec_.name) +
                                    busy(holders, spec_.shared))
          .with_holders(std::move(holders))));
}

Step ZkRequest::rewrite_waiting(const CallContext& ctx) {
  // A waiter's node has no lease: it stays until granted, withdrawn or
  // its session ends (rule 9).
  NodeData d = mine_;
  d.state = State::kWaiting;
  Stat st;
  const int rc = conn().set(my_path_, encode(d), my_stat_.version, &st, ctx);
  if (rc == ZNONODE) return done(gone());
  if (rc == ZBADVERSION) {
    QNode me = self();
    if (auto a = adopt(me, ctx)) return done(std::move(*a));
    return again();
  }
  if (rc != ZOK) return done(s_.err(rc, "queue " + my_path_));
  my_stat_.version = st.version;
  fresh_ = false;
  return again();
}

Answer ZkRequest::still_queued(const CallContext& ctx) const {
  Answer a;
  a.kind = Answer::Kind::queued;
  // Answer::position counts waiting requests only: the head that may
  // hold (Queue::front()) is not ahead in the wait.
  const int head = q_ ? static_cast<int>(q_->front()) : 0;
  a.position = static_cast<std::uint32_t>(pos_ - std::min(pos_, head) + 1);
  a.look_at = wake_.at_expiry(next_expiry_, ctx);
  if (fresh_) a.look_at = std::min(a.look_at, rewrite_at_);
  return a;
}

Answer ZkRequest::queued(Queue q, int pos, std::int64_t next_expiry,
                         const CallContext& ctx) {
  q_ = std::move(q);
  pos_ = pos;
  next_expiry_ = next_expiry;
  return still_queued(ctx);
}

Answer ZkRequest::take_hand_over(QNode& me) {
  me.data.fencing = static_cast<std::uint64_t>(me.stat.mzxid);
  me.ahead = succ_;
  // ZooKeeper heard from this session after the grant (our read), so the
  // grant's mtime is a time it last heard from us, or earlier.
  return grant(me, me.data.fencing, me.stat.mtime + me.data.ttl_ms,
               me.stat.mtime);
}

std::optional<Result<Answer>> ZkRequest::adopt(QNode& me,
                                               const CallContext& ctx) {
  if (Status st = s_.load(me, ctx); !st.ok()) return st.error();
  if (me.gone) return gone();
  if (!handed_over(me)) {
    my_stat_.version = me.stat.version;
    return std::nullopt;
  }
  return take_hand_over(me);
}

Step ZkRequest::write_grant(QNode& me, const CallContext& ctx) {
  // The grant is a write: its zxid is the fencing token, its mtime starts
  // the lease.
  NodeData d = mine_;
  d.state = State::kHolding;
  Stat st;
  const int rc = conn().set(my_path_, encode(d), my_stat_.version, &st, ctx);
  if (rc == ZNONODE) return done(gone());
  if (rc == ZBADVERSION) {
    if (auto a = adopt(me, ctx)) return done(std::move(*a));
    return {};
  }
  if (rc != ZOK) return done(s_.err(rc, "grant " + my_path_));
  me.data = d;
  me.stat = st;
  me.data.fencing = static_cast<std::uint64_t>(st.mzxid);
  me.ahead = succ_;
  return done(grant(me, me.data.fencing, st.mtime + d.ttl_ms, st.mtime));
}

void ZkRequest::watching(const Queue& q, int pos) {
  watching_ = true;
  mutex_ = !spec_.shared && q.capacity() == 1 && pos >= 1 &&
           !q.nodes[pos - 1].name.shared();
  ahead_ = pos >= 1 ? q.nodes[pos - 1].path : "";
  next_ = mutex_ && pos == 1;
  // Under contention (someone waited ahead of us or behind us when we
  // listed), the next in line reads the request behind it in the
  // background while the holder holds (it keeps sleeping: the answer can
  // come after its grant), so that its own release can hand over.
  contended_ = pos >= 2 || q.nodes.size() > 2;
}

std::optional<Grant> ZkRequest::wait_change(Clock::time_point until,
                                            const CallContext& ctx) {
  wake_.arm();
  if (interrupted() || !q_) return std::nullopt;
  if (!watching_) {
    wake_.waker()->forget_events();
    auto w = s_.watch_ahead(*q_, static_cast<std::size_t>(pos_), wake_.waker(),
                            &next_expiry_, ctx);
    if (!w.ok()) watch_error_ = std::move(w).error();
    // Not watching: something changed already; the look lists the queue.
    if (!w.ok() || !*w) return std::nullopt;
    watching(*q_, pos_);
  }
  if (next_ && contended_ && !succ_tried_) {
    succ_tried_ = true;
    succ_ = s_.read_ahead(spec_.name, my_path_);
  }
  look_all_ = !wake_.sleep(fresh_ ? std::min(until, rewrite_at_) : until,
                           next_expiry_, ctx);
  return std::nullopt;
}

std::optional<Result<Answer>> ZkRequest::look_at_events(
    const CallContext& ctx) {
  Waker& w = *wake_.waker();
  if (w.was_changed(my_path_)) {
    // Written by the release of the lease ahead (its hand-over writes our
    // node before it deletes its own, so this event comes first).
    QNode me = self();
    return adopt(me, ctx);
  }
  if (!mutex_) return std::nullopt;
  if (next_) {
    if (!w.was_deleted(ahead_)) return std::nullopt;
    QNode me = self();
    return write_grant(me, ctx).answer;
  }
  // Further back: the node ahead changed; a re-read of that node alone
  // tells whether it became the holder (its grant write), which makes us
  // next in line without listing the queue.
  if (!w.only_changed(ahead_)) return std::nullopt;
  w.forget_events();
  std::vector<int> rcs;
  std::vector<Stat> sts;
  std::vector<std::string> data;
  if (conn().watch({ahead_}, wake_.waker(), &rcs, &sts, &data, ctx) != ZOK ||
      rcs[0] != ZOK) {
    return std::nullopt;
  }
  auto d = decode(data[0]);
  if (!d || d->state != State::kHolding) return std::nullopt;
  next_ = true;  // it holds: it is the only node ahead of ours
  next_expiry_ = sts[0].mtime + d->ttl_ms;
  return still_queued(ctx);
}

Result<Answer> ZkRequest::look(milliseconds wait_left, const CallContext& ctx) {
  if (!asked_) return ask(AskMode::wait, wait_left, ctx);
  if (watch_error_) {
    Error e = std::move(*watch_error_);
    watch_error_.reset();
    return e;
  }
  if (watching_) {
    if (auto a = look_at_events(ctx)) return std::move(*a);
  }
  return settle(false, ctx);
}

Result<Answer> ZkRequest::withdraw(const CallContext& ctx) {
  Answer left;
  left.kind = Answer::Kind::expired;
  left.gone = true;
  if (my_path_.empty()) return left;
  // Only the version we know: a write since is a hand-over's grant.
  int rc = conn().remove(my_path_, my_stat_.version, ctx);
  if (rc == ZBADVERSION) {
    QNode me = self();
    if (Status st = s_.load(me, ctx); !st.ok()) return st.error();
    if (me.gone) return left;
    if (handed_over(me)) return take_hand_over(me);
    rc = conn().remove(my_path_, -1, ctx);
  }
  if (rc != ZOK && rc != ZNONODE) return s_.err(rc, "withdraw " + my_path_);
  s_.note_idle(parent_);
  return left;
}

}  // namespace

std::unique_ptr<Request> make_request(ZkStore& s, const AcquireSpec& spec) {
  return std::make_unique<ZkRequest>(s, spec);
}

}  // namespace baton::store::zk
