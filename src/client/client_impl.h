// client/client_impl.h — what Client, Counter, LeaseKeeper, Session and
// Elector share (internal).
//
// Thread safety: Impl is immutable after construction, except the default
// session pointer (guarded by session_mu); the Store is thread-safe by
// contract.
#ifndef BATON_CLIENT_CLIENT_IMPL_H_
#define BATON_CLIENT_CLIENT_IMPL_H_

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "baton/client.h"
#include "baton/clock.h"
#include "baton/error.h"
#include "stores/call_deadline.h"
#include "stores/store.h"

namespace baton {

namespace client_internal {
class SessionCore;
class Settler;
}  // namespace client_internal

struct Client::Impl {
  std::shared_ptr<store::Store> store;
  ClientOptions options;
  std::shared_ptr<const Clock> clock;  // options.clock or the steady clock
  std::string label;                   // default owner label
  Status options_status;               // invalid ClientOptions given to wrap()
  // Withdraws the requests of acquires abandoned at their call deadline.
  std::shared_ptr<client_internal::Settler> settler;

  // The session LeaseKeeper and Elector use by default; it lives while a
  // lease is kept in it (it holds a Client, so this pointer must be weak).
  mutable std::mutex session_mu;
  mutable std::weak_ptr<client_internal::SessionCore> default_session;

  // Rule 14: the drift allowance for a lease of `ttl`.
  std::chrono::nanoseconds drift(std::chrono::milliseconds ttl) const;
  // Builds a Lease from a store grant answered to a request sent at `sent`
  // (on `clock`).
  Lease make_lease(const store::Grant& g, Clock::time_point sent) const;
  // Pause before retry number `attempt` (1-based) after `unavailable`.
  std::chrono::milliseconds backoff(int attempt) const;
};

struct Client::ImplAccess {
  static const Client::Impl& of(const Client& c) { return *c.impl_; }
};

namespace client_internal {

inline const Client::Impl& impl_of(const Client& c) {
  return Client::ImplAccess::of(c);
}

// The client's default session (made on first use).
std::shared_ptr<SessionCore> default_session(const Client& client);

// `unavailable`: "no answer from <store> within <request_timeout>: <cause>".
Error no_answer(const Client::Impl& impl, const Error& cause);

// Client::extend with every store call bounded by `deadline` (on
// impl.clock): the session's renewal never outlasts the safe deadline.
Result<Lease> extend_until(const Client::Impl& impl, const Lease& lease,
                           std::chrono::milliseconds ttl,
                           Clock::time_point deadline);

// Runs `call()` and retries `unavailable` answers with the same inputs
// (the caller keeps the owner token) up to options.max_retries, with
// jittered exponential backoff, but never past `deadline` (steady clock).
template <typename F>
auto with_retry(const Client::Impl& impl,
                std::chrono::steady_clock::time_point deadline, F&& call)
    -> decltype(call()) {
  for (int attempt = 1;; ++attempt) {
    auto r = call();
    if (r.ok() || r.error().code() != Errc::unavailable ||
        attempt > impl.options.max_retries) {
      return r;
    }
    const auto pause = impl.backoff(attempt);
    if (std::chrono::steady_clock::now() + pause >= deadline) return r;
    std::this_thread::sleep_for(pause);
  }
}

// `r`, or — if it failed because the call deadline passed — `unavailable`
// naming the store and the timeout.
template <typename R>
R cut_short(const Client::Impl& impl, R r) {
  if (!r.ok() && store::call_deadline_passed() &&
      (r.error().code() == Errc::timeout ||
       r.error().code() == Errc::unavailable)) {
    return no_answer(impl, r.error());
  }
  return r;
}

// A call that is not a blocking acquire: every store call it makes, and
// the retries, end within options.request_timeout (a call deadline the
// stores honor, stores/call_deadline.h). An answer cut short by that
// deadline is `unavailable`, naming the store and the timeout.
// `retry` = false: one attempt only (a counter add has no request id).
template <typename F>
auto bounded_call(const Client::Impl& impl, F&& call, bool retry = true)
    -> decltype(call()) {
  const auto deadline =
      std::chrono::steady_clock::now() + impl.options.request_timeout;
  const store::CallDeadlineScope scope(deadline);
  return cut_short(impl, retry ? with_retry(impl, deadline, call) : call());
}

}  // namespace client_internal
}  // namespace baton

#endif  // BATON_CLIENT_CLIENT_IMPL_H_
