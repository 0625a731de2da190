// baton/store.h — the Store interface: what a lock store implements.
//
// A store is its engine's primitives and nothing else. Each primitive is one
// round trip or one transaction on the engine (one Lua script, one SQL
// statement or function, one etcd transaction, one ZooKeeper multi, one
// batond command). Everything about *waiting* — the wait until its end,
// re-check pacing with jitter, cancellation, withdrawing on timeout or
// cancel, retrying after `unavailable` with the same owner token, the
// acquire_some / acquire_all waits, and every message a wait can produce —
// lives once, in baton's engine above the stores (docs/design.md, "The
// store engine"). baton::Client drives a Store through that engine; a
// Store is never called by applications directly.
//
//   class MyStore final : public baton::Store {
//     std::unique_ptr<baton::Request> request(const AcquireSpec&) override;
//     Result<Grant> extend(..., const CallContext&) override;
//     ...
//   };
//   baton::register_store(my_descriptor);      // baton/store_descriptor.h
//   auto client = baton::Client::open("my://host/..."); // the whole contract
//
// The conformance kit (baton/conformance.h, target baton::conformance) runs
// the whole contract (docs/contract.md) against a Store.
//
// Input: stores receive validated requests only. The client checks every
// name, token, TTL, capacity, label and wait before anything reaches a
// store (docs/contract.md#rule-16); a store does not check them again.
//
// Time: every expiry is decided by *store time*. A grant reports
// `valid_for` = (lease expiry) − (store time when the store received the
// request's first ask); the client adds it to its local time just before
// that ask to get the lease's local safe deadline (rule 14). A store may
// report less (never more).
//
// Thread safety: a Store is used by many threads at once; each Request
// belongs to one calling thread, except Request::interrupt(), which any
// thread may call.
#ifndef BATON_STORE_H_
#define BATON_STORE_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

#include "baton/clock.h"
#include "baton/error.h"
#include "baton/lease.h"

namespace baton {

using std::chrono::milliseconds;

// --- The request vocabulary (shared by the client, the stores and batond) --

// acquire / try_acquire / acquire_shared (rules 6-8, 12, 17, 18).
struct AcquireSpec {
  std::string name;
  OwnerToken token;  // the request id (rule 17)
  milliseconds ttl{0};
  std::uint32_t capacity = 1;
  std::string label;
  std::string reentrancy_key;  // empty = not reentrant
  bool shared = false;         // rule 18: a shared (read) request
};

// acquire_some / acquire_all (rule 11).
struct MultiSpec {
  std::vector<std::string> names;  // distinct, each a valid lock name
  OwnerToken reservation;          // one reservation for all names
  milliseconds ttl{0};             // TTL of each lease; also how long
                                   // not-yet-granted requests stay queued
                                   // after this call (acquire_some)
  std::uint32_t capacity = 1;
  std::string label;
  bool all_or_nothing = false;  // acquire_all (true) / acquire_some
};

// A lease as a store reports it.
struct Grant {
  std::string name;
  OwnerToken token;  // the lease's token (for a reentrant re-acquire: the
                     // original holder's token)
  std::uint64_t fencing_token = 0;
  milliseconds ttl{0};
  std::uint32_t holds = 1;
  std::uint32_t capacity = 1;
  bool shared = false;  // a shared (read) lease (rule 18)
  // Lease expiry − store time at the receipt of the request's first ask
  // (for extend: of the extend). See "Time" above.
  std::chrono::microseconds valid_for{0};
  std::int64_t store_expires_at_ms = 0;  // store clock, Unix epoch ms
};

struct ReleaseResult {
  bool was_held = false;         // false: expired, taken over, or unknown
  std::uint32_t holds_left = 0;  // > 0: a reentrant hold remains
};

// --- The call context ------------------------------------------------------

// What every store call carries: the instant by which its caller needs the
// answer, the caller's stop token, and the clock both are read on.
//
// A store caps every I/O timeout, connect back-off and sleep with
// deadline(). When it passes with no answer, the store gives up with
// Errc::timeout (or unavailable) and never reuses that connection: a late
// reply must not be read as the answer to a later call. The outcome of
// such a call is unknown; the engine withdraws the request by owner token
// in the background (rule 17).
//
// Thread safety: a value; copies may be used on other threads.
class CallContext {
 public:
  using time_point = Clock::time_point;

  // No deadline, no stop, the steady clock.
  CallContext();
  CallContext(time_point deadline, std::stop_token stop = {},
              std::shared_ptr<const Clock> clock = nullptr);

  time_point deadline() const noexcept { return deadline_; }
  const std::stop_token& stop() const noexcept { return stop_; }
  const Clock& clock() const noexcept { return *clock_; }
  const std::shared_ptr<const Clock>& clock_ptr() const noexcept {
    return clock_;
  }

  time_point now() const { return clock_->now(); }
  // True once the deadline (if any) has passed.
  bool expired() const;
  bool stop_requested() const noexcept { return stop_.stop_requested(); }
  // `t` capped at the deadline.
  time_point cap(time_point t) const noexcept {
    return t < deadline_ ? t : deadline_;
  }
  // Time left until the deadline (zero once passed; a large value when
  // there is none), for I/O timeouts.
  milliseconds left() const;
  // The same context with its deadline moved earlier to `t` (never later).
  CallContext narrowed(time_point t) const;

 private:
  time_point deadline_;
  std::stop_token stop_;
  std::shared_ptr<const Clock> clock_;
};

// --- One acquire's conversation with the store -----------------------------

// What one ask, look or withdraw decided.
struct Answer {
  enum class Kind {
    granted,  // `grant` is the lease
    queued,   // the request waits; `position` and `look_at` say more
    refused,  // final: `error` says why (not_acquired with holders for a
              // try; the request was withdrawn by its owner token; a
              // capacity mismatch; ...)
    expired,  // the store ended the wait on its side (its own wait
              // deadline passed): nothing more will be granted to it
  };
  Kind kind = Kind::queued;
  Grant grant;
  Error error;
  std::uint32_t position = 0;  // queued: 1-based place among the waiting
                               // requests, holders not counted (0:
                               // unknown)
  // queued: look again no later than this, even without a wake-up (a
  // holder's expiry, a request ahead that may be dead); time_point::min()
  // = look again at once, without waiting.
  Clock::time_point look_at = Clock::time_point::max();
  // expired / refused: the store already left no trace of the request, so
  // no withdraw is needed.
  bool gone = false;

  static Answer granted_with(Grant g);
  static Answer refused_with(Error e, bool gone = true);
};

// What one multi-lock ask, look or withdraw decided.
struct MultiAnswer {
  enum class Kind { progress, refused, expired };
  Kind kind = Kind::progress;
  std::vector<Grant> grants;  // every lease the reservation holds among
                              // the spec's names
  std::size_t pending = 0;    // names still waiting
  Error error;                // refused
  Clock::time_point look_at = Clock::time_point::max();
  bool gone = false;  // as Answer::gone
};

// The wake-up source of a waiting call, shared by Request and MultiRequest:
// wait_change() blocks until something may have changed for this request
// (batond's parked reply, PostgreSQL LISTEN, a MariaDB doorbell, Redis
// pub/sub, a ZooKeeper or etcd watch, sqlite's bell) or until `until`. The
// default is a plain sleep that interrupt() cuts short, which makes the
// engine re-check at its paced interval: correct for any store, and what a
// store without push falls back to.
class Waitable {
 public:
  virtual ~Waitable() = default;

  // Blocks until a change may have happened, `until` (on ctx's clock), or
  // interrupt(). May return a grant that the wake-up itself carried (the
  // engine then uses it without a look); its valid_for is measured from
  // the first ask. Spurious returns are allowed.
  virtual std::optional<Grant> wait_change(Clock::time_point until,
                                           const CallContext& ctx);
  // Makes a wait_change() in progress (or the next one) return at once;
  // stores whose ask itself blocks (batond's parked reply) also end that.
  // Called from any thread, e.g. a stop callback. Overrides must call the
  // base.
  virtual void interrupt();

 protected:
  // True once interrupt() was called (reset by nothing: the call is over).
  bool interrupted() const;

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool interrupted_ = false;  // guarded by mu_
};

enum class AskMode {
  try_only,  // grant at once or refuse (not_acquired with holders); never
             // queue
  wait,      // grant at once, or queue the request in FIFO order
};

// One acquire call's request, made by Store::request() (no I/O). The
// engine calls ask() once, then — while the answer is `queued` — waits for
// a change (wait_change) and calls look(), and when the wait ends without a
// grant calls withdraw(). Repeating any of them with the same owner token
// is safe (rule 17): a store that lost a reply answers the repeat from the
// store's state.
class Request : public Waitable {
 public:
  // Enqueue-or-grant, one round trip. `wait_left`: how long the caller
  // still waits (a store may keep the request queued that long on its own
  // side; at most 7 days).
  virtual Result<Answer> ask(AskMode mode, milliseconds wait_left,
                             const CallContext& ctx) = 0;
  // Look again after a wake-up or at look_at: one round trip that also
  // keeps the waiting request alive (its heartbeat). The default asks
  // again (idempotent by owner token).
  virtual Result<Answer> look(milliseconds wait_left, const CallContext& ctx);
  // Leaves the queue: answers `granted` if the request was granted
  // meanwhile (the caller then holds that lease), otherwise `refused` or
  // `expired` with gone = true.
  virtual Result<Answer> withdraw(const CallContext& ctx) = 0;
};

// One acquire_some / acquire_all call's requests (one per name under one
// reservation), made by Store::request_multi(). As Request: ask once, then
// wait_change/look while progress is possible, then (acquire_all, or a
// cancelled call) withdraw.
class MultiRequest : public Waitable {
 public:
  // acquire_all: every name at once or queue all atomically;
  // acquire_some: enqueue (or refresh) one request per name, each granted
  // on its own. `wait_left`: acquire_all's wait left (acquire_some keeps
  // its requests queued spec.ttl after the call).
  virtual Result<MultiAnswer> ask(AskMode mode, milliseconds wait_left,
                                  const CallContext& ctx) = 0;
  virtual Result<MultiAnswer> look(milliseconds wait_left,
                                   const CallContext& ctx);
  // Withdraws every request of the reservation that is not granted;
  // acquire_all: if every name was granted meanwhile, answers them all
  // (progress, pending 0), else gives back any partial grant.
  virtual Result<MultiAnswer> withdraw(const CallContext& ctx) = 0;
};

// --- The store --------------------------------------------------------------

class Store {
 public:
  virtual ~Store() = default;

  // A request for one lock (no I/O; the engine then calls ask()).
  virtual std::unique_ptr<Request> request(const AcquireSpec& spec) = 0;
  // Requests for several locks under one reservation (rule 11).
  virtual std::unique_ptr<MultiRequest> request_multi(
      const MultiSpec& spec) = 0;

  // Rule 4: expiry = store now + ttl, only for the live lease with
  // `token`; otherwise lock_lost and nothing changes.
  virtual Result<Grant> extend(std::string_view name, const OwnerToken& token,
                               milliseconds ttl, const CallContext& ctx) = 0;
  // Rule 5: removes only the lease with `token` (one hold of a reentrant
  // lease); a queued request with `token` on `name` is withdrawn (and its
  // waiting call answers at once). Idempotent: releasing what is not held
  // reports was_held = false.
  virtual Result<ReleaseResult> release(std::string_view name,
                                        const OwnerToken& token,
                                        const CallContext& ctx) = 0;

  // Rule 15. A free, unknown lock is described with no holders.
  virtual Result<LockInfo> describe(std::string_view name,
                                    const CallContext& ctx) = 0;
  // Locks that have holders or waiters and whose name starts with
  // `prefix`, sorted by name, at most `limit` (>= 1).
  virtual Result<std::vector<LockInfo>> list(std::string_view prefix,
                                             std::size_t limit,
                                             const CallContext& ctx) = 0;

  // Counters. take(n) decrements only while the result stays >= 0, else
  // not_acquired; returns the new value. n >= 1. A store without counters
  // answers `unsupported` naming itself.
  virtual Result<std::int64_t> counter_get(std::string_view name,
                                           const CallContext& ctx) = 0;
  virtual Result<std::int64_t> counter_add(std::string_view name,
                                           std::int64_t delta,
                                           const CallContext& ctx) = 0;
  virtual Result<std::int64_t> counter_take(std::string_view name,
                                            std::int64_t n,
                                            const CallContext& ctx) = 0;

  // Rule 18: whether requests may ask for shared mode. A store without it
  // leaves this false; the client then refuses shared requests with
  // `unsupported` naming the store, and nothing is sent.
  virtual bool supports_shared() const { return false; }

  // Whether a lease lives on after its client is gone, until its expiry
  // (a row, a key with a TTL). False where the store ends it with the
  // client's session or process (zookeeper://: ephemeral nodes; memory:).
  // Client::leases_outlive_client() answers it.
  virtual bool leases_outlive_client() const { return true; }

  // How long a waiting call may go without a look when nothing wakes it:
  // the engine looks again after a jittered 1x..3x of this (a store with
  // push may answer a long interval; one without, a short one).
  virtual milliseconds recheck_interval() const { return milliseconds{100}; }

  // A change feed over the locks whose names start with `prefix` (what
  // `baton status --serve` waits on between its reads of list()). Arms the
  // feed (I/O) and returns a Waitable whose wait_change() returns once a
  // lock under the prefix may have changed — a grant, a release, a queued or
  // withdrawn request, an extend, an expiry the store records — since the
  // feed was armed or since the previous wait_change() returned. The feed is
  // re-armed before wait_change() returns, so a change made after that
  // return is never lost; spurious returns are allowed, and wait_change()
  // never carries a grant (it answers nullopt). interrupt() ends a wait at
  // once. A feed whose connection broke returns at once (the caller reads
  // list() and may arm a new feed).
  //
  // A store without a change feed of its own answers a null pointer (the
  // default); its callers poll. No store adds work to its lock calls for a
  // feed: only the watcher pays.
  virtual Result<std::unique_ptr<Waitable>> watch(std::string_view prefix,
                                                  const CallContext& ctx) {
    (void)prefix;
    (void)ctx;
    return std::unique_ptr<Waitable>();
  }

  // The store's own recorded history of the lock `name` (grants, releases,
  // expiries, losses and waits), as the JSON document the status page
  // serves at /history.json?lock=name (docs/observability.md). Only a store
  // that records one answers it (batond); the default answers
  // `unsupported` naming the store — the history of the other stores lives
  // in the `baton status --serve` process that watched them.
  virtual Result<std::string> history(std::string_view name,
                                      const CallContext& ctx) {
    (void)name;
    (void)ctx;
    return Error(Errc::unsupported,
                 safe_url() +
                     " keeps no history of its locks (batond does; "
                     "for another store, ask the baton status "
                     "--serve process that watched it)");
  }

  // The store's URL with any password masked (for logs and errors).
  virtual std::string safe_url() const = 0;
};

}  // namespace baton

#endif  // BATON_STORE_H_
