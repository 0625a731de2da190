// tests/torture/old_keeper.h — the LeaseKeeper as it was before dc80cd2,
// kept for checker 8's negative control (--late-notice).
//
// Thread safety: lease() and the flags may be read from any thread.
#ifndef BATON_TESTS_TORTURE_OLD_KEEPER_H_
#define BATON_TESTS_TORTURE_OLD_KEEPER_H_

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>

#include "baton/client.h"

namespace baton::torture {

using std::chrono::milliseconds;

// The old LeaseKeeper (before dc80cd2), for checker 8's negative control
// (--late-notice): one thread renews with a synchronous extend(); the lost
// notice comes only when a renewal call returns (lock_lost, or the safe
// deadline found passed after the call). A store that does not answer
// delays the notice by the whole call.
class OldKeeper {
 public:
  OldKeeper(Client client, Lease lease, milliseconds ttl,
            std::function<void(const Error&)> on_lost)
      : client_(std::move(client)),
        lease_(std::move(lease)),
        ttl_(ttl),
        on_lost_(std::move(on_lost)),
        thread_([this] { loop(); }) {}
  ~OldKeeper() {
    stop_ = true;
    thread_.join();
  }
  bool cancelled() const { return cancelled_; }
  std::chrono::steady_clock::time_point safe_deadline() const {
    std::lock_guard<std::mutex> g(mu_);
    return lease_.local_deadline;
  }
  Lease lease() const {
    std::lock_guard<std::mutex> g(mu_);
    return lease_;
  }

 private:
  void loop() {
    for (int round = 0; round < 100'000 && !stop_; ++round) {
      const auto next = std::chrono::steady_clock::now() + ttl_ / 3;
      while (!stop_ && std::chrono::steady_clock::now() < next) {
        std::this_thread::sleep_for(milliseconds(5));
      }
      if (stop_) return;
      auto ex = client_.extend(lease(), ttl_);
      if (ex) {
        std::lock_guard<std::mutex> g(mu_);
        lease_ = *ex;
        continue;
      }
      if (ex.error().code() == Errc::lock_lost ||
          std::chrono::steady_clock::now() >= safe_deadline()) {
        cancelled_ = true;
        on_lost_(ex.error());
        return;
      }
    }
  }

  Client client_;
  mutable std::mutex mu_;
  Lease lease_;  // guarded by mu_
  milliseconds ttl_;
  std::function<void(const Error&)> on_lost_;
  std::atomic<bool> stop_{false}, cancelled_{false};
  std::thread thread_;
};

}  // namespace baton::torture

#endif  // BATON_TESTS_TORTURE_OLD_KEEPER_H_
