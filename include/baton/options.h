// baton/options.h — option structs, one documented default per field.
//
// The same names are used in YAML config (`TTL`, `RetryInterval`, ...),
// command-line flags (`--ttl`, `--retry-interval`) and here.
//
// Thread safety: plain values.
#ifndef BATON_OPTIONS_H_
#define BATON_OPTIONS_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>

#include "baton/clock.h"
#include "baton/lease.h"
#include "baton/observer.h"

namespace baton {

using std::chrono::milliseconds;

// Limits enforced by every entry point (docs/contract.md#rule-16).
inline constexpr std::size_t kMaxNameBytes = 512;
inline constexpr milliseconds kMinTtl{1};
inline constexpr milliseconds kMaxTtl{7LL * 24 * 3600 * 1000};  // 7 days
inline constexpr std::size_t kMaxLabelBytes = 256;
inline constexpr std::size_t kMaxNamesPerRequest = 1024;

struct AcquireOptions {
  // Lease time-to-live (1 ms .. 7 days). YAML/flag: TTL / --ttl.
  milliseconds ttl{30'000};
  // 1 = mutex; N > 1 = semaphore with N holders. Every request for a lock
  // must use the lock's capacity while it is held or waited on.
  std::uint32_t capacity = 1;
  // Human-readable owner label shown by describe(); empty = the client's
  // default label ("host:pid:program").
  std::string label;
  // Opt-in reentrancy (rule 12): requests with the same non-empty key on the
  // same lock share one lease with a hold count.
  std::string reentrancy_key;
  // Owner token / request id. Unset = a fresh random token per call. Set it
  // to retry an acquire whose outcome is unknown (rule 17). (A grant that
  // arrives after its own safe deadline is given back, and the wait goes on
  // with a fresh token: that lease has ended.)
  std::optional<OwnerToken> token;
  // Ends a blocking acquire (acquire, acquire_some, acquire_all) early: once
  // a stop is requested the call withdraws its request by owner token
  // (nothing of it stays queued; a lease granted meanwhile is given back)
  // and answers `cancelled`, within about one store round trip. A stop
  // requested before the call: `cancelled` at once, nothing sent.
  std::stop_token stop;
};

struct ClientOptions {
  // Default owner label; empty = "host:pid:program".
  std::string label;
  // The longest any call waits for the store beyond its own wait: the
  // connect, the round trip and the retries after `unavailable` together.
  // Past it the call answers `unavailable` ("no answer from ... within
  // ..."); a blocking acquire's request is withdrawn by owner token.
  // YAML/flag: Timeout / --timeout.
  milliseconds request_timeout{5'000};
  // Pause between retries after `unavailable`; grows x2 up to 2 s, jittered.
  // YAML/flag: RetryInterval / --retry-interval.
  milliseconds retry_interval{100};
  // Retries of one call after `unavailable` (with the same owner token)
  // before the error is returned. 0 = no retry.
  int max_retries = 3;
  // Drift allowance of rule 14: ttl * drift_factor + drift_floor.
  double drift_factor = 0.01;
  milliseconds drift_floor{2};
  // The clock for send times, safe deadlines, renewals and notices;
  // null = Clock::steady(). Tests inject a ManualClock.
  std::shared_ptr<const Clock> clock;
  // Sees every acquire, renewal, loss and release of this client, its
  // keepers and electors (baton/observer.h: threads and costs). null = none.
  std::shared_ptr<Observer> observer;
};

// Options of a LeaseKeeper (automatic renewal, rule 13).
struct KeeperOptions {
  // Renew this often; 0 = a third of the lease's window: its TTL, or the
  // shorter validity a store granted (zookeeper://: the session timeout),
  // worked out again after each renewal. YAML/flag: RetryInterval.
  milliseconds renew_interval{0};
  // Called once, from the session's notice thread, when the lease is lost:
  // a renewal answered lock_lost, or the local safe deadline passed before a
  // renewal succeeded (then at that instant, even if a renewal is still
  // waiting for the store). Must not block for long.
  std::function<void(const Error&)> on_lost;
  // Called after each successful renewal with the renewed lease (its
  // local_deadline moved forward), from the session's renewal thread. Must
  // not block for long; a keeper's release() or destructor waits for a
  // call in progress. E.g. hand the new safe deadline to a watchdog.
  std::function<void(const Lease&)> on_renewed;
};

struct ElectorOptions {
  // Leader lease TTL. YAML/flag: TTL / --ttl.
  milliseconds ttl{15'000};
  // Renew (leader) and re-check (standby) interval; 0 = ttl / 3.
  // YAML/flag: RetryInterval / --retry-interval.
  milliseconds retry_interval{0};
  // This candidate's label, as shown by observe(); empty = client default.
  std::string label;
  // Callbacks run on the elector's thread; they must not block for long.
  std::function<void(const Lease&)> on_elected;
  std::function<void(const Error&)> on_lost;
  std::function<void(const std::string& label)> on_new_leader;
  // Called after each successful renewal of the term's lease (as
  // KeeperOptions::on_renewed), from the session's renewal thread.
  std::function<void(const Lease&)> on_renewed;
};

}  // namespace baton

#endif  // BATON_OPTIONS_H_
