// client/client_impl.h — what Client, Counter, LeaseKeeper and Elector share
// (internal).
//
// Thread safety: Impl is immutable after construction; the Store is
// thread-safe by contract.
#ifndef BATON_CLIENT_CLIENT_IMPL_H_
#define BATON_CLIENT_CLIENT_IMPL_H_

#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "baton/client.h"
#include "baton/error.h"
#include "stores/store.h"

namespace baton {

struct Client::Impl {
  std::shared_ptr<store::Store> store;
  ClientOptions options;
  std::string label;      // default owner label
  Status options_status;  // invalid ClientOptions given to wrap()

  // Rule 14: the drift allowance for a lease of `ttl`.
  std::chrono::nanoseconds drift(std::chrono::milliseconds ttl) const;
  // Builds a Lease from a store grant answered to a request sent at `sent`.
  Lease make_lease(const store::Grant& g,
                   std::chrono::steady_clock::time_point sent) const;
  // Pause before retry number `attempt` (1-based) after `unavailable`.
  std::chrono::milliseconds backoff(int attempt) const;
};

namespace client_internal {

// Runs `call(sent)` and retries `unavailable` answers with the same inputs
// (the caller keeps the owner token) up to options.max_retries, with
// jittered exponential backoff, but never past `deadline`.
template <typename F>
auto with_retry(const Client::Impl& impl,
                std::chrono::steady_clock::time_point deadline, F&& call)
    -> decltype(call(std::chrono::steady_clock::now())) {
  for (int attempt = 1;; ++attempt) {
    auto r = call(std::chrono::steady_clock::now());
    if (r.ok() || r.error().code() != Errc::unavailable ||
        attempt > impl.options.max_retries) {
      return r;
    }
    const auto pause = impl.backoff(attempt);
    if (std::chrono::steady_clock::now() + pause >= deadline) return r;
    std::this_thread::sleep_for(pause);
  }
}

}  // namespace client_internal
}  // namespace baton

#endif  // BATON_CLIENT_CLIENT_IMPL_H_
