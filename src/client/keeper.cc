// client/keeper.cc — LeaseKeeper: one renewal thread per held lease.
#include "baton/keeper.h"

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <utility>

#include "core/validate.h"

namespace baton {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

namespace {

// Renewal after a failed (retryable) attempt is retried this often, at most.
constexpr milliseconds kFastRetry{20};

milliseconds renew_interval_for(const Lease& lease, milliseconds configured) {
  if (configured > milliseconds::zero()) return configured;
  return std::max(milliseconds{1}, lease.ttl / 3);
}

}  // namespace

struct LeaseKeeper::State {
  State(Client c, Lease l, KeeperOptions o)
      : client(std::move(c)),
        options(std::move(o)),
        interval(renew_interval_for(l, options.renew_interval)),
        lease(std::move(l)) {
    deadline_ns.store(lease.local_deadline.time_since_epoch().count());
  }

  void start() {
    thread = std::thread([this] { run(); });
  }

  // Stops the renewal thread (idempotent). Never throws.
  void stop() noexcept {
    {
      std::lock_guard<std::mutex> lk(mu);
      stopping = true;
    }
    cv.notify_all();
    if (thread.joinable()) thread.join();
  }

  // Marks the lease lost (once) and runs on_lost. Requires mu not held.
  void declare_lost(const Error& why) {
    if (cancelled.exchange(true)) return;
    if (options.on_lost) options.on_lost(why);
  }

  void run() {
    std::unique_lock<std::mutex> lk(mu);
    auto next = steady_clock::now() + interval;
    while (!stopping) {
      const auto deadline = lease.local_deadline;
      cv.wait_until(lk, std::min(next, deadline), [&] { return stopping; });
      if (stopping) break;
      auto now = steady_clock::now();
      if (now >= deadline) {
        lk.unlock();
        declare_lost(Error(Errc::lock_lost,
                           "lock " + core::quote_name(lease.name) +
                               ": the local safe deadline passed before a "
                               "renewal succeeded"));
        return;
      }
      if (now < next) continue;
      const Lease current = lease;
      lk.unlock();
      auto renewed = client.extend(current, current.ttl);
      now = steady_clock::now();
      lk.lock();
      if (renewed.ok()) {
        if (now >= deadline) {
          // Renewed, but only after the old safe deadline: the lease was not
          // safely held in between, so it counts as lost.
          lease = *renewed;
          lk.unlock();
          declare_lost(
              Error(Errc::lock_lost, "lock " + core::quote_name(lease.name) +
                                         ": renewed only after the local safe "
                                         "deadline had passed"));
          return;
        }
        lease = *renewed;
        deadline_ns.store(lease.local_deadline.time_since_epoch().count());
        next = now + interval;
        continue;
      }
      if (renewed.error().code() == Errc::lock_lost ||
          !renewed.error().retryable()) {
        lk.unlock();
        declare_lost(renewed.error());
        return;
      }
      // Retryable: try again soon, until the safe deadline.
      next = now + std::min(interval, kFastRetry);
    }
  }

  Client client;
  KeeperOptions options;
  milliseconds interval;
  mutable std::mutex mu;
  std::condition_variable cv;
  Lease lease;            // guarded by mu
  bool stopping = false;  // guarded by mu
  bool released = false;  // touched only by release()/destructor
  std::atomic<bool> cancelled{false};
  // lease.local_deadline as a count, readable without mu.
  std::atomic<steady_clock::rep> deadline_ns{0};
  std::thread thread;
};

Result<LeaseKeeper> LeaseKeeper::acquire(const Client& client,
                                         std::string_view name,
                                         milliseconds wait,
                                         const AcquireOptions& acquire_options,
                                         KeeperOptions keeper_options) {
  if (keeper_options.renew_interval < milliseconds::zero()) {
    return Error(Errc::invalid_argument,
                 "renew_interval " +
                     std::to_string(keeper_options.renew_interval.count()) +
                     "ms must not be negative");
  }
  auto lease = wait > milliseconds::zero()
                   ? client.acquire(name, wait, acquire_options)
                   : client.try_acquire(name, acquire_options);
  if (!lease.ok()) return std::move(lease).error();
  return LeaseKeeper(client, std::move(*lease), std::move(keeper_options));
}

LeaseKeeper::LeaseKeeper(Client client, Lease lease, KeeperOptions options)
    : state_(std::make_unique<State>(std::move(client), std::move(lease),
                                     std::move(options))) {
  state_->start();
}

LeaseKeeper::LeaseKeeper(std::unique_ptr<State> state)
    : state_(std::move(state)) {}

LeaseKeeper::LeaseKeeper(LeaseKeeper&&) noexcept = default;

LeaseKeeper& LeaseKeeper::operator=(LeaseKeeper&& other) noexcept {
  if (this != &other) {
    if (state_) (void)release();
    state_ = std::move(other.state_);
  }
  return *this;
}

LeaseKeeper::~LeaseKeeper() {
  if (!state_) return;
  try {
    (void)release();
  } catch (...) {
    // Destructors never throw; the lease will expire by itself.
  }
}

Lease LeaseKeeper::lease() const {
  if (!state_) return Lease{};
  std::lock_guard<std::mutex> lk(state_->mu);
  return state_->lease;
}

std::uint64_t LeaseKeeper::fencing_token() const {
  return lease().fencing_token;
}

bool LeaseKeeper::lost() const noexcept {
  if (!state_) return true;
  if (state_->cancelled.load()) return true;
  return steady_clock::now().time_since_epoch().count() >=
         state_->deadline_ns.load();
}

const std::atomic<bool>& LeaseKeeper::cancelled() const noexcept {
  static const std::atomic<bool> kTrue{true};
  return state_ ? state_->cancelled : kTrue;
}

steady_clock::time_point LeaseKeeper::safe_deadline() const {
  if (!state_) return {};
  return steady_clock::time_point(
      steady_clock::duration(state_->deadline_ns.load()));
}

Result<bool> LeaseKeeper::release() {
  if (!state_) return Error(Errc::lock_lost, "the keeper was moved from");
  State& s = *state_;
  s.stop();
  if (s.released) return false;
  s.released = true;
  s.cancelled.store(true);
  Lease current;
  {
    std::lock_guard<std::mutex> lk(s.mu);
    current = s.lease;
  }
  return s.client.release(current);
}

}  // namespace baton
