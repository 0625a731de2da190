// stores/redis/instance.h — one Redis server as the lock scripts see it
// (internal): typed calls of each script and the parsing of their replies.
// RedisStore drives one Instance; RedlockStore drives N.
//
// Inputs are trusted: the client validated them (baton/store.h, "Input").
//
// Thread safety: safe for concurrent use.
#ifndef BATON_STORES_REDIS_INSTANCE_H_
#define BATON_STORES_REDIS_INSTANCE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "baton/error.h"
#include "baton/lease.h"
#include "baton/store.h"
#include "baton/store_descriptor.h"
#include "stores/redis/conn.h"

namespace baton::store::redis {

// Script modes of acquire / multi.
inline constexpr const char* kTry = "try";            // answer now
inline constexpr const char* kWait = "wait";          // enqueue / refresh
inline constexpr const char* kRefresh = "refresh";    // re-check of a waiter
inline constexpr const char* kWithdraw = "withdraw";  // grant or leave
// Redlock split: give a held grant back and wait at the ticket's place.
inline constexpr const char* kYield = "yield";

struct AcqReply {
  enum class Kind {
    granted,
    queued,
    busy,
    timeout,
    withdrawn
  } kind = Kind::timeout;
  Grant grant;                 // granted: valid_for = expiry - now
  std::int64_t now_us = 0;     // store time of this script
  std::int64_t expiry_us = 0;  // granted: the lease's expiry (store time)
  std::size_t position = 0;    // queued: 1-based
  std::int64_t next_us = 0;    // queued: earliest holder expiry (0: none)
  std::int64_t ticket = 0;     // queued: the waiter's Redlock ticket (0: none)
  Error busy;                  // busy: not_acquired with holders
};

struct MultiReply {
  enum class Kind { ok, busy, timeout, withdrawn } kind = Kind::ok;
  std::size_t pending = 0;
  std::int64_t now_us = 0;
  std::vector<Grant> grants;  // every lease the reservation holds
  Error busy;
};

// The grant carried by a wake-up message for `name` (see publish_grant in
// scripts_prelude.cc); nullopt if the payload carries none (a withdrawal,
// a reservation's grant) or is for another lock.
std::optional<AcqReply> parse_pushed_grant(std::string_view payload,
                                           std::string_view name);

// A store's URL, parsed by its descriptor: the key prefix and one target
// per host, each with the userinfo or password option, the /db path, the
// request_timeout, and TLS (rediss://, or redlock://...?tls=1; ca/cert/key
// only with it; one context per store, shared by its connections).
struct StoreConfig {
  std::string prefix;
  std::vector<Target> targets;
};
// invalid_argument naming the URL for a bad prefix, database or TLS file.
Result<StoreConfig> config_of(const StoreUrl& url);
// The options both stores' descriptors declare (redlock:// adds `tls`).
std::vector<OptionSpec> common_options(std::string default_timeout);

class Instance {
 public:
  Instance(Target target, std::string prefix, Notifier& notifier)
      : pool_(target),
        prefix_(std::move(prefix)),
        inbox_(OwnerToken::random().to_string().substr(0, 16)),
        sub_(target, notifier) {}

  // `ticket` < 0: arrival order (redis://); 0: assign a Redlock ticket;
  // > 0: raise the waiter's ticket to it (see kAcquireBody in scripts.cc).
  // `seq` > 0 (Redlock): the sending round's number; a yield or withdraw
  // from a round older than the one that last found this token's lease or
  // waiter changes nothing there (a delayed call never undoes a later one).
  Result<AcqReply> acquire(const AcquireSpec& spec, const char* mode,
                           std::int64_t wait_ms, const CallContext& ctx,
                           std::int64_t ticket = -1, std::int64_t seq = 0);
  Result<Grant> extend(std::string_view name, const OwnerToken& token,
                       milliseconds ttl, const CallContext& ctx);
  // `seq` > 0: a Redlock round's clean-up, which leaves alone a lease or
  // waiter that a later round (seq) of this token created or found; 0: the
  // caller's release (unconditional).
  Result<ReleaseResult> release(std::string_view name, const OwnerToken& token,
                                const CallContext& ctx, std::int64_t seq = 0);
  Result<LockInfo> describe(std::string_view name, const CallContext& ctx);
  Result<std::vector<LockInfo>> list(std::string_view prefix, std::size_t limit,
                                     const CallContext& ctx);
  // `seq` > 0 (Redlock): the sending round's number, as for acquire.
  Result<MultiReply> multi(const MultiSpec& spec, const char* mode,
                           std::int64_t queue_ms, const CallContext& ctx,
                           std::int64_t seq = 0);
  // Raises the name's fencing counter (and the lease's token) to `floor`.
  Result<std::uint64_t> fence(std::string_view name, const OwnerToken& token,
                              std::uint64_t floor, const CallContext& ctx);
  Result<std::int64_t> counter_get(std::string_view name,
                                   const CallContext& ctx);
  Result<std::int64_t> counter_add(std::string_view name, std::int64_t delta,
                                   const CallContext& ctx);
  Result<std::int64_t> counter_take(std::string_view name, std::int64_t n,
                                    const CallContext& ctx);

  // This store's inbox on this server, "<prefix>in:<id>" (64 random bits
  // per Instance): every waiter record this Instance writes names it, so the
  // grant or withdrawal of one of its waiters is published there alone —
  // one subscriber connection receives it, not every client waiting on the
  // lock (see Subscriber). Reference-counted by the waiting requests.
  void subscribe_inbox() { sub_.add(inbox_channel()); }
  std::optional<std::chrono::steady_clock::time_point> await_inbox(
      std::chrono::steady_clock::time_point until) {
    return sub_.await_active(inbox_channel(), until);
  }
  void unsubscribe_inbox() { sub_.unsubscribe(inbox_channel()); }
  const std::string& inbox() const { return inbox_; }
  // What Notifier::Push::from is for the messages of this instance.
  const void* push_source() const { return &sub_; }
  const Target& target() const { return pool_.target(); }
  // restart_guard (redlock://): how long until this instance's votes count
  // again (Pool::votes_from); zero when they count now.
  milliseconds guarded_for(Steady::time_point now) const {
    const auto from = pool_.votes_from();
    return from > now ? std::chrono::ceil<milliseconds>(from - now)
                      : milliseconds::zero();
  }
  const std::string& prefix() const { return prefix_; }

 private:
  std::string inbox_channel() const { return prefix_ + "in:" + inbox_; }
  Result<ReplyPtr> run(const Script& s, std::vector<std::string> args,
                       const CallContext& ctx);

  Pool pool_;
  const std::string prefix_;
  const std::string inbox_;
  Subscriber sub_;
};

}  // namespace baton::store::redis

#endif  // BATON_STORES_REDIS_INSTANCE_H_
