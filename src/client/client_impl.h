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

#include "baton/client.h"
#include "baton/clock.h"
#include "baton/store.h"
#include "engine/engine.h"

namespace baton {

namespace client_internal {
class SessionCore;
}  // namespace client_internal

struct Client::Impl {
  std::shared_ptr<Store> store;
  ClientOptions options;
  std::shared_ptr<const Clock> clock;  // options.clock or the steady clock
  std::string label;                   // default owner label
  Status options_status;               // invalid ClientOptions given to wrap()
  // Every store call goes through the engine (waits, retries, withdrawals).
  std::unique_ptr<engine::Engine> engine;

  // The session LeaseKeeper and Elector use by default; it lives while a
  // lease is kept in it (it holds a Client, so this pointer must be weak).
  mutable std::mutex session_mu;
  mutable std::weak_ptr<client_internal::SessionCore> default_session;

  // Rule 14: the drift allowance for a lease of `ttl`.
  std::chrono::nanoseconds drift(std::chrono::milliseconds ttl) const;
  // Builds a Lease from a store grant answered to a request sent at `sent`
  // (on `clock`).
  Lease make_lease(const Grant& g, Clock::time_point sent) const;
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

// Client::extend with every store call bounded by `deadline` (on
// impl.clock): the session's renewal never outlasts the safe deadline.
Result<Lease> extend_until(const Client::Impl& impl, const Lease& lease,
                           std::chrono::milliseconds ttl,
                           Clock::time_point deadline);

// Client::release without its `released` event: the session's giving back
// of a lease already reported lost.
Result<bool> release_quietly(const Client::Impl& impl, const Lease& lease);

// A call that is not a blocking acquire, through the engine: bounded by
// request_timeout, `unavailable` retried (unless `retry` is false: a
// counter add has no request id).
template <typename F>
auto bounded_call(const Client::Impl& impl, F&& call, bool retry = true) {
  return impl.engine->call(std::forward<F>(call), retry);
}

}  // namespace client_internal
}  // namespace baton

#endif  // BATON_CLIENT_CLIENT_IMPL_H_
