// stores/baton/withdrawer.h — how the baton:// store ends an ask that
// batond parked when the caller stops: by withdrawing the request by its
// owner token from another connection (see Withdrawer).
//
// Thread safety: stop() from any thread; the rest on the ask's thread.
#ifndef BATON_STORES_BATON_WITHDRAWER_H_
#define BATON_STORES_BATON_WITHDRAWER_H_

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <utility>

#include "baton/lease.h"

namespace baton::store::baton_conn {

using std::chrono::milliseconds;

// Withdraws a request by its owner token while its ask is in flight: once
// started (a stop), releases `token` on every name every kRepeat until the
// ask ends. A release of a waiting token withdraws it, and batond answers
// the parked ask at once; it is repeated because the release may reach
// batond before the acquire (they travel on different connections). If the
// ask has still not ended kGiveUp after the stop (batond does not answer),
// its connection is shut down: the ask then fails at once, and batond, if
// it is alive, drops the closed connection's queued request.
class Withdrawer {
 public:
  static constexpr milliseconds kRepeat{50};
  static constexpr milliseconds kGiveUp{1000};

  // Releases `token` on `name` once, bounded by kGiveUp (the store's
  // LOCK.RELEASE on a pooled connection).
  using Release =
      std::function<void(const std::string& name, const OwnerToken& token)>;

  // `names` belong to the request, which outlives its Withdrawer.
  Withdrawer(Release release, std::span<const std::string> names,
             OwnerToken token)
      : release_(std::move(release)), names_(names), token_(token) {}
  ~Withdrawer() { ask_ended(); }

  // Marks an ask in flight; false (and nothing marked) once stopped.
  bool ask_started() {
    std::lock_guard<std::mutex> lk(mu_);
    if (stopped_) return false;
    in_flight_ = true;
    return true;
  }
  // The ask returned: no more releases (waits for one in progress).
  void ask_ended();
  // A stop: withdraws the request if an ask is in flight, and refuses
  // later asks.
  void stop();
  // The socket the ask waits on, while it waits.
  void attach(int fd) {
    std::lock_guard<std::mutex> lk(mu_);
    fd_ = fd;
  }
  // The ask's exchange is over; true if its socket was shut down meanwhile
  // (the connection must then not be reused).
  bool detach() {
    std::lock_guard<std::mutex> lk(mu_);
    fd_ = -1;
    return std::exchange(shut_, false);
  }

 private:
  void run();

  const Release release_;
  const std::span<const std::string> names_;
  const OwnerToken token_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopped_ = false;    // mu_
  bool in_flight_ = false;  // mu_
  int fd_ = -1;             // mu_; shut down (never closed) here
  bool shut_ = false;       // mu_: fd_ was shut down
  std::thread thread_;      // started by stop() during an ask
};

// Ends an ask's Withdrawer mark on every path.
class AskInFlight {
 public:
  explicit AskInFlight(Withdrawer& w) : w_(w), started_(w.ask_started()) {}
  ~AskInFlight() {
    if (started_) w_.ask_ended();
  }
  bool started() const { return started_; }

 private:
  Withdrawer& w_;
  const bool started_;
};

}  // namespace baton::store::baton_conn

#endif  // BATON_STORES_BATON_WITHDRAWER_H_
