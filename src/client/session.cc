// client/session.cc — SessionCore: renewal and lost notices for many leases.
#include "baton/session.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <utility>

#include "client/client_impl.h"
#include "client/events.h"
#include "client/session_core.h"
#include "core/validate.h"

namespace baton::client_internal {

using std::chrono::milliseconds;

namespace {

// After a failed (retryable) renewal, the next attempt comes this soon.
constexpr milliseconds kFastRetry{20};

void join_or_detach(std::thread& t) {
  if (!t.joinable()) return;
  if (t.get_id() == std::this_thread::get_id()) {
    t.detach();  // the last reference was dropped by this very thread
  } else {
    t.join();
  }
}

// Rule 13 on a loaded machine: the notice must run within the lease's
// drift allowance (1 % of the TTL + drift_floor) of its deadline, but a
// thread woken among dozens of busy processes can wait longer than that
// for a CPU (18 ms seen on 2 cores, with a 12 ms allowance). When the
// process may (root, CAP_SYS_NICE or RLIMIT_RTPRIO >= 1), the notice thread
// runs at the lowest real-time priority, ahead of every ordinary thread; it
// sleeps nearly always, and does no I/O. Otherwise it stays as it is.
void raise_notice_priority() {
  sched_param p{};
  p.sched_priority = sched_get_priority_min(SCHED_FIFO);
  (void)pthread_setschedparam(pthread_self(), SCHED_FIFO, &p);
}

// A third of what a fresh lease gives: its TTL, or less when the store
// granted a shorter validity (local_deadline is `now` + at most the TTL).
milliseconds auto_interval(const Lease& lease, Clock::time_point now) {
  const auto left = std::chrono::duration_cast<milliseconds>(std::max(
      lease.local_deadline - now, Clock::time_point::duration::zero()));
  return std::max(milliseconds{1}, std::min(lease.ttl, left) / 3);
}

// A lease the notice thread declares lost, and why.
struct Lost {
  std::shared_ptr<KeptEntry> entry;
  Error why;
  LostReason reason;
};

}  // namespace

std::shared_ptr<SessionCore> SessionCore::make(Client client) {
  // The owners share one Drainer; its destructor runs when the last owner
  // goes, and then drops the reference to the core that it holds.
  struct Drainer {
    std::shared_ptr<SessionCore> core;
    ~Drainer() {
      if (core) core->drain();
    }
  };
  auto drainer = std::make_shared<Drainer>();
  drainer->core = std::make_shared<SessionCore>(std::move(client));
  SessionCore* core = drainer->core.get();
  return std::shared_ptr<SessionCore>(std::move(drainer), core);
}

void SessionCore::drain() {
  std::thread notice;
  std::thread renewal;
  {
    std::unique_lock<std::mutex> lk(mu_);
    const auto self = std::this_thread::get_id();
    if (self == notice_thread_.get_id() || self == renew_thread_.get_id()) {
      return;  // it holds the core and ends by itself
    }
    notice_cv_.notify_all();
    renew_cv_.notify_all();
    notified_cv_.wait(lk, [&] { return !notice_running_ && !renew_running_; });
    notice = std::move(notice_thread_);
    renewal = std::move(renew_thread_);
  }
  if (notice.joinable()) notice.join();
  if (renewal.joinable()) renewal.join();
}

SessionCore::SessionCore(Client client)
    : client_(std::move(client)), clock_(impl_of(client_).clock) {}

SessionCore::~SessionCore() {
  // Both loops hold a reference while they run, so they have returned.
  join_or_detach(notice_thread_);
  join_or_detach(renew_thread_);
}

std::shared_ptr<KeptEntry> SessionCore::keep(
    Lease lease, milliseconds renew_interval,
    std::function<void(const Error&)> on_lost,
    std::function<void(const Lease&)> on_renewed) {
  auto e = std::make_shared<KeptEntry>();
  e->on_renewed = std::move(on_renewed);
  e->auto_interval = renew_interval <= milliseconds::zero();
  e->interval =
      e->auto_interval ? auto_interval(lease, clock_->now()) : renew_interval;
  e->ttl = lease.ttl;
  e->on_lost = std::move(on_lost);
  e->deadline.store(lease.local_deadline.time_since_epoch().count());
  e->lease = std::move(lease);
  std::lock_guard<std::mutex> lk(mu_);
  e->id = next_id_++;
  e->next_renew = clock_->now() + e->interval;
  entries_.emplace(e->id, e);
  start_threads_locked();
  notice_cv_.notify_all();
  renew_cv_.notify_all();
  return e;
}

void SessionCore::start_threads_locked() {
  if (!notice_running_) {
    if (notice_thread_.joinable()) notice_thread_.join();  // it is ending
    notice_running_ = true;
    notice_thread_ =
        std::thread([self = shared_from_this()] { self->notice_loop(); });
  }
  start_renewal_locked();
}

void SessionCore::start_renewal_locked() {
  if (!renew_running_) {
    if (renew_thread_.joinable()) renew_thread_.join();
    renew_running_ = true;
    renew_thread_ =
        std::thread([self = shared_from_this()] { self->renewal_loop(); });
  }
}

bool SessionCore::forget(const std::shared_ptr<KeptEntry>& e,
                         bool await_renewal) {
  std::unique_lock<std::mutex> lk(mu_);
  e->cancelled.store(true);
  const bool held = e->active.exchange(false);
  if (held) {
    entries_.erase(e->id);
    notice_cv_.notify_all();
    renew_cv_.notify_all();
  }
  // A callback in progress finishes before forget returns (not awaited from
  // its own thread, where it is the caller).
  const auto self = std::this_thread::get_id();
  if (self != notice_thread_.get_id() && self != renew_thread_.get_id()) {
    notified_cv_.wait(lk, [&] {
      return !e->notifying && !e->renewed_running &&
             !(await_renewal && e->in_flight);
    });
  }
  return held;
}

std::vector<Lease> SessionCore::forget_all() {
  std::lock_guard<std::mutex> lk(mu_);
  std::vector<Lease> held;
  for (auto& [id, e] : entries_) {
    e->cancelled.store(true);
    if (e->active.exchange(false)) held.push_back(e->lease);
  }
  entries_.clear();
  notice_cv_.notify_all();
  renew_cv_.notify_all();
  return held;
}

Lease SessionCore::lease(const KeptEntry& e) const {
  std::lock_guard<std::mutex> lk(mu_);
  return e.lease;
}

std::size_t SessionCore::size() const {
  std::lock_guard<std::mutex> lk(mu_);
  return entries_.size();
}

// The only place on_lost runs. No store I/O here (rule 13).
void SessionCore::notice_loop() {
  raise_notice_priority();
  std::unique_lock<std::mutex> lk(mu_);
  for (;;) {
    if (entries_.empty()) {
      notice_running_ = false;
      notified_cv_.notify_all();  // drain() may wait for this
      return;
    }
    const auto now = clock_->now();
    auto earliest = Clock::time_point::max();
    std::vector<Lost> lost;
    for (auto it = entries_.begin(); it != entries_.end();) {
      KeptEntry& e = *it->second;
      const auto deadline = e.safe_deadline();
      if (!e.loss && now < deadline) {
        earliest = std::min(earliest, deadline);
        ++it;
        continue;
      }
      Error why =
          e.loss ? *e.loss
                 : Error(Errc::lock_lost,
                         "lock " + core::quote_name(e.lease.name) +
                             ": the local safe deadline passed before "
                             "a renewal succeeded" +
                             (e.last_renewal_error.empty()
                                  ? std::string(" (renewal in flight)")
                                  : " (last renewal: " + e.last_renewal_error +
                                        ")"));
      e.active.store(false);
      e.cancelled.store(true);
      e.notifying = true;
      lost.push_back({it->second, std::move(why),
                      e.loss ? e.loss_reason : LostReason::deadline_passed});
      it = entries_.erase(it);
    }
    if (!lost.empty()) {
      lk.unlock();
      const auto& observer = impl_of(client_).options.observer;
      for (auto& [e, why, reason] : lost) {
        // Unlocked: nothing else writes a lost entry's lease.
        if (observer) {
          client_internal::lost(observer, e->lease, why, reason,
                                since(*clock_, e->lease.granted_at));
        }
        if (e->on_lost) e->on_lost(why);
      }
      lk.lock();
      for (auto& [e, why, reason] : lost) {
        e->notifying = false;
        // Given back only after the notice: an early release must not let
        // anyone else in before on_lost has run.
        releases_.push_back(e->lease);
      }
      notified_cv_.notify_all();
      renew_cv_.notify_all();
      start_renewal_locked();  // it may have ended with the last lease
      continue;
    }
    clock_->wait_until(notice_cv_, lk, earliest);
  }
}

void SessionCore::renewal_loop() {
  std::unique_lock<std::mutex> lk(mu_);
  for (;;) {
    if (!releases_.empty()) {
      Lease dead = std::move(releases_.front());
      releases_.pop_front();
      lk.unlock();
      // Bounded by request_timeout; no `released` event: it was lost.
      (void)release_quietly(impl_of(client_), dead);
      lk.lock();
      continue;
    }
    if (entries_.empty()) {
      renew_running_ = false;
      notified_cv_.notify_all();  // drain() may wait for this
      return;
    }
    // A lease whose loss is reported (not yet noticed) is not renewed
    // again: the store said it is gone, and on_renewed must not follow.
    std::shared_ptr<KeptEntry> due;
    for (auto& [id, e] : entries_) {
      if (e->loss) continue;
      if (!due || e->next_renew < due->next_renew) due = e;
    }
    if (!due) {
      renew_cv_.wait(lk);  // the notice thread takes the lost ones out
      continue;
    }
    if (due->next_renew > clock_->now()) {
      clock_->wait_until(renew_cv_, lk, due->next_renew);
      continue;
    }
    due->in_flight = true;
    lk.unlock();
    renew(due);
    lk.lock();
  }
}

void SessionCore::renew(const std::shared_ptr<KeptEntry>& e) {
  Lease current;
  milliseconds interval;
  {
    std::lock_guard<std::mutex> lk(mu_);
    current = e->lease;
    interval = e->interval;
  }
  const auto deadline = e->safe_deadline();
  const Client::Impl& impl = impl_of(client_);
  // One attempt may not outlast the safe deadline, nor the renewal
  // interval: a connection that went silent is given up in time for a
  // retry on a fresh one.
  const auto attempt_end =
      std::min(deadline, clock_->now() +
                             std::min(impl.options.request_timeout, interval));
  auto renewed = extend_until(impl, current, e->ttl, attempt_end);
  std::unique_lock<std::mutex> lk(mu_);
  e->in_flight = false;
  notified_cv_.notify_all();      // forget(e, true) may wait for this
  if (!e->active.load()) return;  // lost or forgotten meanwhile
  const auto now = clock_->now();
  const auto& observer = impl.options.observer;
  if (renewed.ok()) {
    if (now >= deadline) {
      e->loss = Error(Errc::lock_lost,
                      "lock " + core::quote_name(current.name) +
                          ": renewed only after the local safe deadline had "
                          "passed");
      e->loss_reason = LostReason::deadline_passed;
    } else {
      e->lease = std::move(*renewed);
      e->deadline.store(e->lease.local_deadline.time_since_epoch().count());
      if (e->auto_interval) e->interval = auto_interval(e->lease, now);
      e->next_renew = now + e->interval;
      e->last_renewal_error.clear();
      if (e->on_renewed || observer) {
        // Outside the lock (the callback may read the keeper); forget()
        // waits for it.
        const Lease copy = e->lease;
        e->renewed_running = true;
        lk.unlock();
        if (observer) client_internal::renewed(observer, copy);
        if (e->on_renewed) e->on_renewed(copy);
        lk.lock();
        e->renewed_running = false;
        notified_cv_.notify_all();
      }
    }
  } else if (renewed.error().code() == Errc::lock_lost ||
             !renewed.error().retryable()) {
    e->loss = renewed.error();
    e->loss_reason = LostReason::store_said;
  } else {
    e->last_renewal_error = renewed.error().to_string();
    e->next_renew = now + std::min(e->interval, kFastRetry);
    // One that failed at the deadline is the loss, not a failure to retry.
    if (observer && now < deadline) {
      lk.unlock();
      client_internal::renewal_failed(observer, current, renewed.error(), true);
    }
    return;
  }
  notice_cv_.notify_all();
}

}  // namespace baton::client_internal
