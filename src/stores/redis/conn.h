// stores/redis/conn.h — hiredis plumbing for the redis:// and redlock://
// stores (internal): a small connection pool that runs scripts (FCALL of the
// library's function, FUNCTION LOAD when missing; EVALSHA with a NOSCRIPT
// fallback to EVAL when the server refuses functions), and the pub/sub
// subscriber that wakes waiting requests.
//
// Errors: connect/IO failures and timeouts are `unavailable` naming the
// instance ("redis 127.0.0.1:6379: Connection refused"); a connection that
// failed is closed, never reused. Every I/O timeout is capped by the call
// context's deadline (baton/store.h); past it a call fails with `timeout`
// and its connection (reply outstanding) is dropped. A counter change that
// lost its connection after being sent is `unavailable` (outcome unknown),
// never re-run. Authentication failures are `permission_denied`. Script
// errors are `internal`.
//
// Thread safety: Pool, Notifier and Subscriber are safe for concurrent use.
#ifndef BATON_STORES_REDIS_CONN_H_
#define BATON_STORES_REDIS_CONN_H_

#include <hiredis/hiredis.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "baton/error.h"
#include "baton/store.h"
#include "stores/redis/common.h"
#include "stores/redis/scripts.h"
#include "stores/tls/tls_client.h"

namespace baton::store::redis {

using std::chrono::milliseconds;
using tls::TlsContext;
using tls::TlsOptions;
using TlsSession = tls::TlsChannel;

struct ReplyFree {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using ReplyPtr = std::unique_ptr<redisReply, ReplyFree>;
struct ContextFree {
  void operator()(redisContext* c) const { redisFree(c); }
};
using ContextPtr = std::unique_ptr<redisContext, ContextFree>;

// One connection: hiredis's context (its output buffer and reply reader)
// and, for TLS, the session on its socket that carries the bytes instead
// of hiredis's own read/write.
struct Conn {
  ContextPtr ctx;
  std::unique_ptr<TlsSession> tls;  // null: plain TCP
  bool replied = false;             // a reply has come on it
  redisContext* get() const { return ctx.get(); }
  int fd() const { return ctx->fd; }
};
using ConnPtr = std::unique_ptr<Conn>;

// A command's arguments as hiredis' *Argv calls take them (binary-safe).
struct Argv {
  explicit Argv(const std::vector<std::string>& args) {
    argv.reserve(args.size());
    lens.reserve(args.size());
    for (const auto& a : args) {
      argv.push_back(a.data());
      lens.push_back(a.size());
    }
  }
  int count() const { return static_cast<int>(argv.size()); }
  std::vector<const char*> argv;
  std::vector<std::size_t> lens;
};

struct Target {
  std::string host = "127.0.0.1";
  std::uint16_t port = 6379;
  std::string user;
  std::string password;
  int db = 0;
  milliseconds timeout{5000};  // connect and per-command
  // redlock:// restart_guard: > 0 makes each new connection read how long
  // the server's lock data under `prefix` has existed (Pool::born).
  milliseconds restart_guard{0};
  std::string prefix;
  std::shared_ptr<TlsContext> tls;  // null: plain TCP
  std::string where() const {       // "redis 127.0.0.1:6379" ("rediss" on TLS)
    return (tls ? "rediss " : "redis ") + host + ":" + std::to_string(port);
  }
};

// The bytes of a connection (conn_io.cc): hiredis's own I/O on plain TCP,
// the TLS session's on TLS.
// Sends the context's output buffer; false with *why (TLS: bounded by
// `until`).
bool flush(Conn* c, std::chrono::steady_clock::time_point until,
           std::string* why);
// Feeds what arrived to the reply reader; false with *why.
bool read_in(Conn* c, std::string* why);
// An idle pooled connection is still usable (see conn_io.cc).
bool idle_ok(Conn* c);
// Adds the likely cause to *why for a connection that failed before its
// first reply.
void new_connection_hint(const Conn* c, std::string* why);

// Connects (with the TLS handshake when the target has TLS on),
// authenticates and selects the database, within the target's timeout
// capped by ctx's deadline.
Result<ConnPtr> connect(const Target& target, const CallContext& ctx);
// Runs one command; an IO failure is `unavailable` (the context is then
// unusable), the deadline of ctx passing is `timeout`. A Redis error reply
// is returned as a reply.
Result<ReplyPtr> command(Conn* conn, const Target& target,
                         const std::vector<std::string>& args,
                         const CallContext& ctx);

class Pool {
 public:
  explicit Pool(Target target, std::size_t max_idle = 16)
      : target_(std::move(target)), max_idle_(max_idle) {}
  // Runs `script` with no KEYS and `args` as ARGV. Redis error replies
  // become errors (see header comment).
  Result<ReplyPtr> eval(const Script& script,
                        const std::vector<std::string>& args,
                        const CallContext& ctx);
  // Runs one read-only command (e.g. SCAN); once more on a fresh
  // connection if a pooled one was closed meanwhile.
  Result<ReplyPtr> read(const std::vector<std::string>& args,
                        const CallContext& ctx);
  const Target& target() const { return target_; }
  // With target().restart_guard > 0: when the votes of this server count
  // again (Steady epoch: they always have). Every new connection reads how
  // long the server's lock data has existed (the `born` script) and moves
  // this to (data's birth + restart_guard) if that is later: a server that
  // lost its data (restarted without persistence, flushed) is counted only
  // once every lease it may have forgotten has run out, if restart_guard
  // is at least the longest TTL. A restart always ends the old connections,
  // so the first call after it reads the new birth.
  Steady::time_point votes_from() const { return votes_from_.load(); }

 private:
  // Reads the data's age on a new connection (see votes_from).
  Status note_birth(Conn* conn, const CallContext& ctx);
  Result<ReplyPtr> eval_once(const Script& script,
                             const std::vector<std::string>& args, bool* reused,
                             const CallContext& ctx);
  // FCALL of the script's function (FUNCTION LOAD once if missing). Sets
  // *fallback when the server refuses functions (too old, ACL): then
  // EVALSHA is used from now on.
  Result<ReplyPtr> fcall(Conn* conn, const Script& script,
                         const std::vector<std::string>& args, bool* fallback,
                         const CallContext& ctx);
  // An idle connection, or a new one. `probe`: drop idle connections the
  // server has closed (checked without blocking) instead of returning them.
  Result<ConnPtr> take(bool* reused, bool probe, const CallContext& ctx);
  void give(ConnPtr ctx);

  const Target target_;
  const std::size_t max_idle_;
  std::mutex mu_;
  std::vector<ConnPtr> idle_;               // guarded by mu_
  std::map<std::string, std::string> sha_;  // script name -> sha, mu_
  std::atomic<bool> use_functions_{true};
  std::atomic<Steady::time_point> votes_from_{Steady::time_point{}};
};

// Wake-ups for waiting requests, keyed by owner token (hex).
class Notifier {
 public:
  // One message: its payload and the subscriber it came from (Redlock
  // tells its instances apart by it).
  struct Push {
    const void* from = nullptr;
    std::string payload;
  };
  struct Slot {
    std::condition_variable cv;
    std::uint64_t gen = 0;
    int refs = 0;
    std::vector<Push> pushes;  // since the last take (at most kMaxPushes)
  };
  static constexpr std::size_t kMaxPushes = 32;
  std::shared_ptr<Slot> enter(const std::string& token);
  void leave(const std::string& token);
  void wake(const std::string& token, std::string payload = {},
            const void* from = nullptr);
  // Every message delivered to the slot since the last take, oldest first
  // (the oldest are dropped beyond kMaxPushes), and forgets them.
  std::vector<Push> take_pushes(Slot& slot);
  // Waits until the slot is woken after `seen` or `until`; returns its gen.
  std::uint64_t wait(Slot& slot, std::uint64_t seen,
                     std::chrono::steady_clock::time_point until);
  std::uint64_t gen(Slot& slot);
  // Wakes the slot's waiter with no message (an interrupted request).
  void poke(Slot& slot);

 private:
  std::mutex mu_;
  std::unordered_map<std::string, std::shared_ptr<Slot>> slots_;  // mu_
};

// One connection SUBSCRIBEd to the channels that requests of this store
// wait on (the store's inbox, see Instance). Reference-counted: the first
// waiting request subscribes, and the channel is unsubscribed once nobody
// has waited on it for `linger` (so a client that waits again and again
// pays no SUBSCRIBE round trip). Each message's payload starts with the
// owner token that was granted (or withdrawn), which wakes only that
// token's request in the Notifier. The connection is opened on the first
// subscribe (uncontended acquires never open it) and reopened after a
// failure; waiters re-check periodically, so a lost message or a dead
// subscription costs latency, never correctness.
class Subscriber {
 public:
  Subscriber(Target target, Notifier& notifier,
             milliseconds linger = milliseconds(2000));
  ~Subscriber();
  Subscriber(const Subscriber&) = delete;
  Subscriber& operator=(const Subscriber&) = delete;

  // Adds a reference to `channel` (subscribing if needed) without waiting.
  void add(const std::string& channel);
  // Waits until the server confirmed the subscription of `channel` (added
  // before) or `until`. Returns when it became active (steady clock), or
  // nullopt if it is not active yet.
  std::optional<std::chrono::steady_clock::time_point> await_active(
      const std::string& channel, std::chrono::steady_clock::time_point until);
  // Drops a reference taken by add().
  void unsubscribe(const std::string& channel);

 private:
  struct Channel {
    int refs = 0;
    bool sent_sub = false;  // the last command sent was SUBSCRIBE
    int inflight = 0;       // commands sent, not yet confirmed
    std::optional<std::chrono::steady_clock::time_point> active_since;
    std::chrono::steady_clock::time_point idle_since{};
  };
  void run();
  void wake();
  bool serve(Conn* ctx);  // one connection's life; false: failed
  // Appends (UN)SUBSCRIBE for channels whose wanted state changed; returns
  // the poll timeout until the next linger expiry (ms, -1: none).
  int reconcile(redisContext* ctx, std::chrono::steady_clock::time_point now);
  void on_reply(const redisReply* r);

  const Target target_;
  Notifier& notifier_;
  const milliseconds linger_;
  int wake_r_ = -1, wake_w_ = -1;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, Channel> channels_;  // mu_
  bool started_ = false;                     // mu_
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace baton::store::redis

#endif  // BATON_STORES_REDIS_CONN_H_
