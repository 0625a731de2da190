// client/cancel.h — ends a blocking acquire when its caller asks
// (AcquireOptions::stop).
//
// Every store ends a waiting request when it is released by its owner token
// (rule 5: a release of a waiting token withdraws it, and the waiting call
// answers at once). So a stop request needs nothing from the stores: a
// helper thread releases the call's names under its current token, again
// every kRepeat until the call has returned (a request queued after a
// release is withdrawn by the next one), and the call then answers
// `cancelled`. No store I/O runs on the thread that requested the stop.
//
// Thread safety: requested() and set_token() may race with the stop
// callback; the other members belong to the calling thread.
#ifndef BATON_CLIENT_CANCEL_H_
#define BATON_CLIENT_CANCEL_H_

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <vector>

#include "baton/error.h"
#include "baton/lease.h"

namespace baton::store {
class Store;
}

namespace baton::client_internal {

class Canceller {
 public:
  // Watches `stop` (nothing to do if it cannot be stopped) for a call about
  // `names` under `token`; each release is bounded by `request_timeout`.
  Canceller(std::shared_ptr<store::Store> store,
            std::chrono::milliseconds request_timeout, std::stop_token stop,
            std::vector<std::string> names, const OwnerToken& token);
  ~Canceller();
  Canceller(const Canceller&) = delete;
  Canceller& operator=(const Canceller&) = delete;

  bool requested() const;
  // The call's owner token changed (a new request within the same wait).
  void set_token(const OwnerToken& token);
  // The call returned: stop releasing.
  void finish();

 private:
  struct State;
  std::shared_ptr<State> state_;
  std::optional<std::stop_callback<std::function<void()>>> callback_;
};

// `cancelled`, naming the locks.
Error cancelled_error(const std::vector<std::string>& names);

}  // namespace baton::client_internal

#endif  // BATON_CLIENT_CANCEL_H_
