// stores/redis/conn.h — hiredis plumbing for the redis:// and redlock://
// stores (internal): a small connection pool that runs scripts (EVALSHA with
// a NOSCRIPT fallback to EVAL), and a pub/sub subscriber that wakes waiting
// threads.
//
// Errors: connect/IO failures and timeouts are `unavailable` naming the
// instance ("redis 127.0.0.1:6379: Connection refused"); a connection that
// failed is closed, never reused. Authentication failures are
// `permission_denied`. Script errors are `internal`.
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
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "baton/error.h"
#include "stores/redis/scripts.h"

namespace baton::store::redis {

using std::chrono::milliseconds;

struct ReplyFree {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using ReplyPtr = std::unique_ptr<redisReply, ReplyFree>;
struct ContextFree {
  void operator()(redisContext* c) const { redisFree(c); }
};
using ContextPtr = std::unique_ptr<redisContext, ContextFree>;

struct Target {
  std::string host = "127.0.0.1";
  std::uint16_t port = 6379;
  std::string user;
  std::string password;
  int db = 0;
  milliseconds timeout{5000};  // connect and per-command
  std::string where() const {  // "redis 127.0.0.1:6379"
    return "redis " + host + ":" + std::to_string(port);
  }
};

// Connects, authenticates and selects the database.
Result<ContextPtr> connect(const Target& target);
// Runs one command; an IO failure is `unavailable` (the context is then
// unusable). A Redis error reply is returned as a reply.
Result<ReplyPtr> command(redisContext* ctx, const Target& target,
                         const std::vector<std::string>& args);

class Pool {
 public:
  explicit Pool(Target target, std::size_t max_idle = 16)
      : target_(std::move(target)), max_idle_(max_idle) {}
  // Runs `script` with no KEYS and `args` as ARGV. Redis error replies
  // become errors (see header comment).
  Result<ReplyPtr> eval(const Script& script,
                        const std::vector<std::string>& args);
  const Target& target() const { return target_; }

 private:
  Result<ReplyPtr> eval_once(const Script& script,
                             const std::vector<std::string>& args,
                             bool* reused);
  Result<ContextPtr> take(bool* reused);
  void give(ContextPtr ctx);

  const Target target_;
  const std::size_t max_idle_;
  std::mutex mu_;
  std::vector<ContextPtr> idle_;            // guarded by mu_
  std::map<std::string, std::string> sha_;  // script name -> sha, mu_
};

// Wake-ups for waiting threads, keyed by owner token (hex).
class Notifier {
 public:
  struct Slot {
    std::condition_variable cv;
    std::uint64_t gen = 0;
    int refs = 0;
  };
  std::shared_ptr<Slot> enter(const std::string& token);
  void leave(const std::string& token);
  void wake(const std::string& token);
  // Waits until the slot is woken after `seen` or `until`; returns its gen.
  std::uint64_t wait(Slot& slot, std::uint64_t seen,
                     std::chrono::steady_clock::time_point until);
  std::uint64_t gen(Slot& slot);

 private:
  std::mutex mu_;
  std::unordered_map<std::string, std::shared_ptr<Slot>> slots_;  // mu_
};

// One connection PSUBSCRIBEd to "<prefix>ch:*": every message's payload is
// an owner token, woken in the Notifier. Reconnects after failures.
class Subscriber {
 public:
  Subscriber(Target target, std::string pattern, Notifier& notifier)
      : target_(std::move(target)),
        pattern_(std::move(pattern)),
        notifier_(notifier) {}
  ~Subscriber();
  // Starts the thread once and waits (up to the target's timeout) until
  // the subscription is active. Waiters still re-check periodically, so a
  // failure here only costs latency.
  void ensure_started();

 private:
  void run();

  const Target target_;
  const std::string pattern_;
  Notifier& notifier_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool started_ = false;     // mu_
  bool subscribed_ = false;  // mu_
  int fd_ = -1;              // mu_: the live socket, for shutdown()
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace baton::store::redis

#endif  // BATON_STORES_REDIS_CONN_H_
