// stores/zookeeper/zk_conn.h — one ZooKeeper session for a store, through
// the C client's multi-threaded async API (libzookeeper-mt).
//
// Every call sends one request and waits for its completion at most the
// request timeout, and never past its CallContext's deadline; a call that
// gives up returns kGaveUp and its late completion is dropped (each request
// has its own completion, so no later call can read it). Watches wake a
// Waker: a waiting request registers one and sleeps on it; session events
// (disconnect, reconnect, expiry) wake every Waker too.
//
// Session expiry ends every ephemeral node of the session. The next call
// after it opens a new session (the old handle is closed once no call uses
// it); session_id() tells which session a node belongs to.
//
// Credentials: every handle, the first and each made after an expiry, is
// given the digest credentials before it is handed to any call, so the C
// client sends them ahead of every request of the session (and again on
// each reconnection of it). Every node is created with Options::acl.
//
// Thread safety: every method may be called from any thread.
#ifndef BATON_STORES_ZOOKEEPER_ZK_CONN_H_
#define BATON_STORES_ZOOKEEPER_ZK_CONN_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "baton/clock.h"
#include "baton/error.h"
#include "baton/store.h"
#include "stores/zookeeper/zk_acl.h"

namespace baton::store::zk {

using std::chrono::milliseconds;
using SteadyTime = std::chrono::steady_clock::time_point;

// The call gave up at its deadline (outcome unknown).
inline constexpr int kGaveUp = -7;  // ZOPERATIONTIMEOUT

struct Stat {
  std::int64_t czxid = 0;
  std::int64_t mzxid = 0;
  std::int64_t ctime = 0;  // ms since the epoch, ZooKeeper's clock
  std::int64_t mtime = 0;
  std::int64_t pzxid = 0;
  std::int64_t ephemeral_owner = 0;
  std::int32_t version = 0;
  std::int32_t cversion = 0;
  std::int32_t num_children = 0;
};

// Woken by the watches and session events registered with it.
class Waker {
 public:
  Waker() = default;
  // Keeps up to `keep` events between two forget_events() or
  // take_events() (64 by default: a waiter looks at the few nodes it
  // watches; a change feed keeps one per watch it set).
  explicit Waker(std::size_t keep) : keep_(keep) {}
  // What woke it: 'd' a watched node deleted, 'c' one changed (`path`),
  // 'o' anything else (a session event, an interrupt).
  void notify(char what = 'o', std::string_view path = {});
  // Since the last forget_events(): a watch fired for the deletion of
  // `path`; for a change of `path`; every event was a change of `path`.
  bool was_deleted(std::string_view path);
  bool was_changed(std::string_view path);
  bool only_changed(std::string_view path);
  void forget_events();
  // Moves the events since the last call into *out (and forgets them).
  // False if some were dropped (more than `keep`): what fired is unknown.
  bool take_events(std::vector<std::pair<char, std::string>>* out);
  // Sleeps until notified after `*seen` (updated) or until `clock` reaches
  // `until`. True if notified.
  bool wait_until(const Clock& clock, Clock::time_point until,
                  std::uint64_t* seen);
  std::uint64_t generation();

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::uint64_t gen_ = 0;
  std::vector<std::pair<char, std::string>> events_;  // guarded by mu_
  const std::size_t keep_ = 64;
  bool dropped_ = false;  // guarded by mu_
};

// One operation of an atomic multi().
struct Op {
  enum Type { kCreate, kSet, kDelete, kCheck } type = kCheck;
  std::string path;
  std::string data;
  int version = -1;
  int flags = 0;  // kCreate: kEphemeralSequential, ...
};
struct OpResult {
  int rc = 0;
  std::string path;  // kCreate: the node made
  Stat stat;         // kSet: the node after the write
};

inline constexpr int kPersistent = 0;
inline constexpr int kEphemeralSequential = 3;  // ZOO_EPHEMERAL | ZOO_SEQUENCE

class Conn {
 public:
  struct Options {
    std::string hosts;  // "h1:p1,h2:p2" (no chroot)
    milliseconds session_timeout{10000};
    milliseconds request_timeout{5000};
    std::string where;  // the servers as errors name them
    // "user:password" for zoo_add_auth(digest); empty: no credentials.
    std::string digest;
    // The ACL of every node created; empty: open (world:anyone, all).
    std::vector<AclEntry> acl;
  };
  // Connects (waits up to the request timeout for the first session and,
  // with credentials, for ZooKeeper's answer to them: permission_denied if
  // it refused them).
  static Result<std::unique_ptr<Conn>> open(const Options& options);
  ~Conn();
  Conn(const Conn&) = delete;
  Conn& operator=(const Conn&) = delete;

  // ZooKeeper return codes (ZOK = 0, ZNONODE, ...), or kGaveUp. Each waits
  // at most the request timeout and never past ctx's deadline.
  int create(const std::string& path, std::string_view data, int flags,
             Stat* stat, const CallContext& ctx);
  int get(const std::string& path, std::string* data, Stat* stat,
          const CallContext& ctx);
  int set(const std::string& path, std::string_view data, int version,
          Stat* stat, const CallContext& ctx);
  int remove(const std::string& path, int version, const CallContext& ctx);
  int children(const std::string& path, std::vector<std::string>* names,
               Stat* stat, const CallContext& ctx);
  int exists(const std::string& path, Stat* stat, const CallContext& ctx);
  // Sets a data watch on each of `paths` and reads each node (data and
  // stat), as one pipelined batch. (*rcs)[i], (*stats)[i], (*datas)[i] per
  // path; the return code is ZOK unless the batch could not be sent.
  int watch(const std::vector<std::string>& paths,
            const std::shared_ptr<Waker>& watch, std::vector<int>* rcs,
            std::vector<Stat>* stats, std::vector<std::string>* datas,
            const CallContext& ctx);
  // Sets a child watch on each of `paths` and lists each node's children,
  // as one pipelined batch: (*rcs)[i], (*names)[i] per path; ZOK unless
  // the batch could not be sent.
  int watch_children(const std::vector<std::string>& paths,
                     const std::shared_ptr<Waker>& watch, std::vector<int>* rcs,
                     std::vector<std::vector<std::string>>* names,
                     const CallContext& ctx);
  // Reads the ACL of each of `paths`, as one pipelined batch: (*rcs)[i],
  // (*acls)[i] per path; ZOK unless the batch could not be sent.
  int get_acls(const std::vector<std::string>& paths, std::vector<int>* rcs,
               std::vector<std::vector<AclEntry>>* acls,
               const CallContext& ctx);
  // All or none; *results has one entry per op (rc of each).
  int multi(const std::vector<Op>& ops, std::vector<OpResult>* results,
            const CallContext& ctx);
  // Without waiting: lists `parent`, lets `pick` choose a child (an empty
  // name: none), reads that child, and calls `done` with the read's return
  // code, the child's path, data and stat. `pick` and `done` run on the C
  // client's completion thread: keep them short, call nothing that waits.
  // ZOK if the listing was sent (else `done` is never called).
  using Pick = std::function<std::string(std::vector<std::string>&)>;
  using Done = std::function<void(int rc, const std::string& path,
                                  std::string data, const Stat& stat)>;
  int read_child_async(const std::string& parent, Pick pick, Done done);

  // Wakes `w` on every session event until it is destroyed.
  void on_session_event(const std::shared_ptr<Waker>& w);
  // The session timeout ZooKeeper granted (ms).
  std::int64_t session_timeout_ms();
  // The current session (0 before the first one is established).
  std::int64_t session_id();
  // True for a session of this Conn that ZooKeeper expired (its nodes are
  // about to go, if they have not yet).
  bool expired_session(std::int64_t id);
  // The error for return code `rc` of `what` (e.g. "create /baton/x").
  Error error(int rc, std::string_view what) const;
  const std::string& where() const { return options_.where; }
  // The time `seen_at` at which we last saw ZooKeeper's clock at `server_ms`
  // (from a write's mtime): a lower bound of its clock now.
  void note_server_time(std::int64_t server_ms);
  std::int64_t server_time_lower_bound();

  struct Handle;  // one zhandle_t (zk_conn.cc)
  struct CAcl;    // Options::acl as the C client's ACL_vector (zk_conn.cc)

  // Called from the C client's completion thread.
  void notify_watch(std::uint64_t id, char what, std::string_view path);
  void session_event(int state);

 private:
  explicit Conn(Options options);
  std::shared_ptr<Handle> handle();
  // When a call with `ctx` stops waiting for its answer.
  SteadyTime call_until(const CallContext& ctx) const;
  std::uint64_t register_watch(const std::shared_ptr<Waker>& w);

  Options options_;
  std::unique_ptr<CAcl> acl_;  // immutable after the constructor
  std::mutex mu_;
  std::shared_ptr<Handle> handle_;                         // guarded by mu_
  std::map<std::uint64_t, std::weak_ptr<Waker>> watches_;  // guarded by mu_
  std::vector<std::weak_ptr<Waker>> session_wakers_;       // guarded by mu_
  std::vector<std::int64_t> expired_;                      // guarded by mu_
  std::uint64_t next_watch_ = 1;                           // guarded by mu_
  std::size_t sweep_at_ = 1024;                            // guarded by mu_
  std::int64_t server_ms_ = 0;                             // guarded by mu_
  SteadyTime server_seen_{};                               // guarded by mu_
};

}  // namespace baton::store::zk

#endif  // BATON_STORES_ZOOKEEPER_ZK_CONN_H_
