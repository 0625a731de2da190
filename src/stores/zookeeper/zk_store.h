// stores/zookeeper/zk_store.h — the zookeeper:// store's internals, shared
// by its source files (zookeeper_store.cc: options, extend, release,
// describe, counters; zk_queue.cc: the queue of request nodes; zk_wait.cc:
// watches, expiry collection and the hand-over; zk_request.cc: one
// acquire's Request; zk_multi.cc: acquire_some / acquire_all; zk_watch.cc:
// the change feed).
// docs/stores/zookeeper.md explains the design.
//
// Every method that talks to ZooKeeper takes the caller's CallContext: no
// request waits past its deadline.
//
// Thread safety: ZkStore is safe for concurrent use (Store contract); a
// request object belongs to one calling thread, but for interrupt().
#ifndef BATON_STORES_ZOOKEEPER_ZK_STORE_H_
#define BATON_STORES_ZOOKEEPER_ZK_STORE_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "baton/store.h"
#include "stores/zookeeper/zk_conn.h"
#include "stores/zookeeper/zk_node.h"

namespace baton::store::zk {

// Passes over the queue(s) one ask or look makes at most; each pass again
// is caused by a change of a queue (a request ahead left or was collected).
inline constexpr int kMaxPasses = 64;

inline constexpr std::int64_t kNever = std::numeric_limits<std::int64_t>::max();

struct ZkOptions {
  Conn::Options conn;
  std::string root = "/baton";  // chroot of every node (no trailing '/')
  std::string url;              // safe URL for errors
  // Credentials (zk_acl.h): the digest user ("" = none) and the store's
  // own digest id (derived from the password: never in a message).
  std::string user;
  std::string own_id;
};

// The request right behind a mutex lease, as its holder read it while it
// waited: the release grants it in the same transaction as the delete
// (docs/stores/zookeeper.md, "Hand-over in the release").
struct NextInLine {
  std::string path;
  NodeData data;
  std::int32_t version = 0;
};
// That read, in the background: filled by the C client's completion thread
// whenever its answer comes; the release uses it only if it has come.
class ReadAhead {
 public:
  void set(NextInLine n) {
    std::lock_guard<std::mutex> lk(mu_);
    next_ = std::move(n);
  }
  std::optional<NextInLine> get() {
    std::lock_guard<std::mutex> lk(mu_);
    return next_;
  }

 private:
  std::mutex mu_;
  std::optional<NextInLine> next_;  // guarded by mu_
};

// One request node as listed, with its data once loaded.
struct QNode {
  NodeName name;
  std::string path;
  bool loaded = false;
  bool gone = false;  // vanished when loaded
  NodeData data;
  Stat stat;
  // A lease of this store: until when, on this host's steady clock, it is
  // surely alive by ZooKeeper's clock (its grant's valid_for from before
  // the call, less a drift allowance); min() if unknown.
  SteadyTime alive_until = SteadyTime::min();
  // A lease of this store: the request behind it, once read (may be null).
  std::shared_ptr<ReadAhead> ahead;
};

// A lock's queue: its request nodes in sequence order.
struct Queue {
  std::string parent;
  bool exists = false;
  Stat parent_stat;
  std::vector<QNode> nodes;

  std::uint32_t capacity() const {
    return nodes.empty() ? 0 : nodes[0].name.capacity;
  }
  // How many requests at the head may hold (rules 1 and 18): the first
  // `capacity`; when the head is shared (capacity 1), every shared request
  // before the first exclusive one. A request only ever moves towards the
  // head and nothing joins ahead of it, so once there it stays there
  // until it leaves, and the head is either one exclusive request or
  // shared requests only.
  std::size_t front() const;
  int index_of(std::string_view path) const;
  int index_of(const OwnerToken& token) const;
};

// A waiting request's wake-up source: the watches it set and its store's
// session events wake it; interrupt() too.
class Wakeup {
 public:
  explicit Wakeup(Conn& conn) : conn_(conn) {}
  const std::shared_ptr<Waker>& waker() const { return waker_; }
  // Before the first watch: session events wake it from now on.
  void arm();
  // Sleeps until a watch or session event (true), `until` on ctx's clock,
  // ZooKeeper's clock reaching `expiry_ms` (kNever: none) or an interrupt.
  bool sleep(Clock::time_point until, std::int64_t expiry_ms,
             const CallContext& ctx);
  // When to look again for `expiry_ms` (server ms), on ctx's clock.
  Clock::time_point at_expiry(std::int64_t expiry_ms,
                              const CallContext& ctx) const;
  void interrupt() { waker_->notify('o'); }

 private:
  Conn& conn_;
  std::shared_ptr<Waker> waker_ = std::make_shared<Waker>();
  bool armed_ = false;
  std::uint64_t seen_ = 0;
};

class ZkStore final : public baton::Store {
 public:
  ZkStore(ZkOptions options, std::unique_ptr<Conn> conn);
  ~ZkStore() override;
  // Makes the root's nodes if missing (<root>/locks, /counters, /clock),
  // after checking that those that exist carry the ACL this store would
  // give them (refused otherwise, before anything is written).
  Status prepare(const CallContext& ctx);

  std::unique_ptr<Request> request(const AcquireSpec& spec) override;
  std::unique_ptr<MultiRequest> request_multi(const MultiSpec& spec) override;
  Result<Grant> extend(std::string_view name, const OwnerToken& token,
                       milliseconds ttl, const CallContext& ctx) override;
  Result<ReleaseResult> release(std::string_view name, const OwnerToken& token,
                                const CallContext& ctx) override;
  Result<LockInfo> describe(std::string_view name,
                            const CallContext& ctx) override;
  Result<std::vector<LockInfo>> list(std::string_view prefix, std::size_t limit,
                                     const CallContext& ctx) override;
  Result<std::int64_t> counter_get(std::string_view name,
                                   const CallContext& ctx) override;
  Result<std::int64_t> counter_add(std::string_view name, std::int64_t delta,
                                   const CallContext& ctx) override;
  Result<std::int64_t> counter_take(std::string_view name, std::int64_t n,
                                    const CallContext& ctx) override;
  // Rule 18: shared requests are nodes of kind `r` (zk_node.h).
  bool supports_shared() const override { return true; }
  // A lease is an ephemeral node: it ends with the session.
  bool leases_outlive_client() const override { return false; }
  // Watches wake every waiter; the re-check only covers a watch lost by a
  // bug or a session change (docs/stores/zookeeper.md, "Waiting without a
  // herd"): 0.5–1.5 s.
  milliseconds recheck_interval() const override { return milliseconds{500}; }
  // The change feed: one-shot watches on <root>/locks, on each lock node
  // under `prefix` and on each of their request nodes, set again as they
  // fire; it also returns at the earliest lease expiry (zk_watch.cc).
  Result<std::unique_ptr<Waitable>> watch(std::string_view prefix,
                                          const CallContext& ctx) override;
  std::string safe_url() const override { return options_.url; }

  // ---- shared by the source files ----
  std::string lock_path(std::string_view name) const;
  // Lists the queue (a missing parent is an empty queue).
  Result<Queue> read_queue(std::string_view name, const CallContext& ctx);
  // Loads n's data (n.gone if it vanished).
  Status load(QNode& n, const CallContext& ctx);
  // ZooKeeper's clock now (ms): the mtime of a write to <root>/clock.
  Result<std::int64_t> server_now(const CallContext& ctx);
  // Creates a request node under `parent` in one transaction with a write
  // of the parent (empty data, any version), whose stat tells what the
  // create did: the node's czxid and ctime (the transaction's zxid and
  // time) and how many requests the lock had then, ours included (`alone`:
  // none but ours). A missing parent is made in the same transaction.
  struct Made {
    std::string path;
    Stat stat;  // czxid, mzxid, ctime, mtime, ephemeral_owner; version 0
    bool alone = false;
  };
  Result<Made> create_counted(const std::string& parent,
                              const std::string& prefix, const NodeData& data,
                              const CallContext& ctx);
  // Deletes every node before position `upto` (holders, queued
  // acquire_some requests) whose lease or queue time is over by
  // ZooKeeper's clock, each only if unchanged since it was read. True if
  // any went. *next_expiry: the earliest later expiry seen (server ms).
  // Without `holders`, only queued acquire_some requests are looked at.
  Result<bool> reclaim(Queue& q, std::size_t upto, std::int64_t* next_expiry,
                       const CallContext& ctx, bool holders = true);
  // True if an earlier all-or-nothing request that does not hold yet
  // holds back position `pos` (rule 11). Loads such nodes.
  Result<bool> held_back(Queue& q, std::size_t pos, const CallContext& ctx);
  // A waiting request at `pos`: watch what can let it in (the node ahead;
  // the first waiter also watches every holder). False if one is gone or
  // changed already (re-read at once). Lowers *next_expiry (server ms,
  // may be null) to when a watched never-written request would lapse.
  Result<bool> watch_ahead(Queue& q, std::size_t pos,
                           const std::shared_ptr<Waker>& w,
                           std::int64_t* next_expiry, const CallContext& ctx);
  // Starts reading, in the background, the request right behind `my_path`
  // in a fresh listing; kept only if it is a plain exclusive request of a
  // mutex (a hand-over may grant it). Null if the listing was not sent.
  std::shared_ptr<ReadAhead> read_ahead(std::string_view name,
                                        const std::string& my_path);
  // Releases lease n, surely alive until n.alive_until, and grants `next`
  // in the same transaction. Empty if `next` changed or left since it was
  // read (nothing was written then).
  std::optional<Result<ReleaseResult>> hand_over(const QNode& n,
                                                 const NextInLine& next,
                                                 const CallContext& ctx);
  // The holders' descriptions (loads them); `now` is ZooKeeper's clock.
  std::vector<HolderInfo> holders_of(Queue& q, std::int64_t now,
                                     const CallContext& ctx);
  // The Grant of lease node n. valid_for (rule 14) runs from `arrival_ms`
  // (ZooKeeper's time when this request's first ask arrived) to the
  // earlier of the lease's expiry and the end this session is sure to
  // live to: `contact_ms` (when ZooKeeper last heard from it, at or after
  // the grant) + the session timeout. An ephemeral node dies with its
  // session, so a holder cut off longer than that loses it early.
  Grant grant_of(std::string_view name, const QNode& n, std::uint64_t fencing,
                 std::int64_t expiry_ms, std::int64_t arrival_ms,
                 std::int64_t contact_ms);
  // The lease `g` was granted by a call that began at `start`: until
  // start + valid_for less the drift allowance it is surely alive.
  void note_alive(std::string_view name, const Grant& g, SteadyTime start);
  // Leases this store granted, by (name, token): extend and release use
  // the node's path and version from here and skip the lookup (one write).
  // A stale entry costs a failed conditional write and then the lookup.
  void remember(std::string_view name, const QNode& n);
  void forget(std::string_view name, const OwnerToken& token);
  std::optional<QNode> held(std::string_view name, const OwnerToken& token);
  // The lock's node may now be empty: the janitor tries to delete it.
  void note_idle(const std::string& parent);
  Status ensure_path(const std::string& path, const CallContext& ctx);
  // With credentials: OK if the node at `path` is missing or carries
  // exactly the ACL this store gives its nodes; otherwise permission_denied
  // naming the node, the ACL found and the ACL wanted. A node found right
  // is remembered and not read again: only holders of the credentials may
  // create under <root>/locks and <root>/counters (their ACL is checked at
  // open), so such a node cannot be replaced by one with another ACL.
  // Without credentials: OK (every node is open, as this store makes it).
  Status check_acl(const std::string& path, const CallContext& ctx);
  Conn& conn() { return *conn_; }
  Error err(int rc, std::string_view what) const {
    return conn_->error(rc, what);
  }

 private:
  // Finds the request or lease of `token` (own node or reentrant alias).
  Result<std::optional<QNode>> find(std::string_view name,
                                    const OwnerToken& token, Queue* q,
                                    const CallContext& ctx);
  // Reads counter `name` (0 if missing) and writes next_of(value) over
  // exactly that value, reading again after a conflict.
  Result<std::int64_t> counter_update(
      std::string_view name,
      const std::function<Result<std::int64_t>(std::int64_t)>& next_of,
      const CallContext& ctx);
  // describe() of a listed queue at ZooKeeper time `now_ms`.
  LockInfo describe_at(std::string_view name, Queue* q, std::int64_t now,
                       const CallContext& ctx);
  void janitor();
  // The refusal of node `path`, whose ACL is `found` (rc: ZNOAUTH if it
  // could not be read).
  Error acl_refusal(const std::string& path, int rc,
                    const std::vector<AclEntry>& found) const;

  ZkOptions options_;
  std::unique_ptr<Conn> conn_;
  std::mutex mu_;
  std::map<std::pair<std::string, OwnerToken>, QNode> held_;  // mu_
  std::set<std::string> idle_;                                // guarded by mu_
  std::set<std::string> acl_checked_;                         // guarded by mu_
  bool stopping_ = false;                                     // guarded by mu_
  std::condition_variable janitor_cv_;
  std::thread janitor_;  // last: started after everything it uses
};

// The requests of one acquire (zk_request.cc) and of acquire_some /
// acquire_all (zk_multi.cc).
std::unique_ptr<Request> make_request(ZkStore& s, const AcquireSpec& spec);
std::unique_ptr<MultiRequest> make_multi(ZkStore& s, const MultiSpec& spec);

// "lock ... has capacity <has>; the request asked for <asked>".
Error capacity_mismatch(std::string_view name, std::uint32_t has,
                        std::uint32_t asked);
// Expiry (server ms) of n's lease or queue time; kNever if none (waiting).
std::int64_t expiry_of(const QNode& n);
// n's fencing token: its data's, else the zxid of its last write (the
// grant).
std::uint64_t fencing_of(const QNode& n);

}  // namespace baton::store::zk

#endif  // BATON_STORES_ZOOKEEPER_ZK_STORE_H_
