// client/cancel.cc — Canceller (see cancel.h).
#include "client/cancel.h"

#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>

#include "core/validate.h"
#include "stores/call_deadline.h"
#include "stores/store.h"

namespace baton::client_internal {

using std::chrono::milliseconds;

namespace {
// How often the helper releases again while the call has not returned.
constexpr milliseconds kRepeat{50};
}  // namespace

struct Canceller::State {
  std::shared_ptr<store::Store> store;
  milliseconds request_timeout{0};
  std::vector<std::string> names;
  std::mutex mu;
  std::condition_variable cv;
  OwnerToken token;        // mu
  bool requested = false;  // mu
  bool done = false;       // mu

  // The helper thread: releases until the call returned.
  void withdraw() {
    std::unique_lock<std::mutex> lk(mu);
    while (!done) {
      const OwnerToken t = token;
      lk.unlock();
      for (const auto& n : names) {
        const store::CallDeadlineScope scope(std::chrono::steady_clock::now() +
                                             request_timeout);
        (void)store->release(n, t);
      }
      lk.lock();
      cv.wait_for(lk, kRepeat, [&] { return done; });
    }
  }
};

Canceller::Canceller(std::shared_ptr<store::Store> store,
                     milliseconds request_timeout, std::stop_token stop,
                     std::vector<std::string> names, const OwnerToken& token)
    : state_(std::make_shared<State>()) {
  state_->store = std::move(store);
  state_->request_timeout = request_timeout;
  state_->names = std::move(names);
  state_->token = token;
  if (!stop.stop_possible()) return;
  callback_.emplace(std::move(stop), [s = state_] {
    {
      std::lock_guard<std::mutex> lk(s->mu);
      if (s->requested || s->done) return;
      s->requested = true;
    }
    std::thread([s] { s->withdraw(); }).detach();
  });
}

Canceller::~Canceller() { finish(); }

bool Canceller::requested() const {
  std::lock_guard<std::mutex> lk(state_->mu);
  return state_->requested;
}

void Canceller::set_token(const OwnerToken& token) {
  std::lock_guard<std::mutex> lk(state_->mu);
  state_->token = token;
}

void Canceller::finish() {
  {
    std::lock_guard<std::mutex> lk(state_->mu);
    state_->done = true;
  }
  state_->cv.notify_all();
  callback_.reset();  // waits for a callback that is running
}

Error cancelled_error(const std::vector<std::string>& names) {
  std::string what;
  for (const auto& n : names) {
    what += (what.empty() ? "" : ", ") + core::quote_name(n);
  }
  return Error(Errc::cancelled, "the wait for " + what +
                                    " was cancelled (stop requested); the "
                                    "request was withdrawn");
}

}  // namespace baton::client_internal
