// stores/memory/memory_store.cc — core::LockTable behind a mutex.
#include "stores/memory/memory_store.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include "baton/clock.h"
#include "core/clock.h"
#include "core/lock_table.h"
#include "core/validate.h"

namespace baton::store {
namespace {

using core::Instant;
using core::Nanos;
using std::chrono::duration_cast;
using std::chrono::microseconds;

// Waits longer than this are treated as "forever" (and clamped to it so
// deadlines never overflow).
constexpr Nanos kForever = core::kForeverWait;
// A parked call whose deadline passed this long ago without an outcome from
// the table cleans up by itself (defensive; the table normally answers).
constexpr Nanos kGrace = std::chrono::milliseconds(50);

Nanos clamp_wait(milliseconds wait) {
  return core::is_forever(wait) ? kForever : Nanos(wait);
}

// The outcome of a parked single acquire, shared by every call parked on the
// same (name, token).
struct Pending {
  int waiters = 0;
  bool done = false;
  bool granted = false;
  bool withdrawn = false;
  core::CoreGrant grant;
};

// A parked acquire_multi, keyed by reservation.
struct MultiPending {
  int waiters = 0;
  bool timed_out = false;
  bool withdrawn = false;  // released by its reservation token while parked
  std::vector<core::CoreGrant> granted;
};

// The store's time, read from a baton::Clock (the steady clock, or a test's
// ManualClock shared with the client).
class TableClock final : public core::Clock {
 public:
  explicit TableClock(std::shared_ptr<const baton::Clock> c)
      : c_(std::move(c)) {}
  Instant now() const override {
    return duration_cast<Instant>(c_->now().time_since_epoch());
  }
  const baton::Clock& source() const { return *c_; }

 private:
  std::shared_ptr<const baton::Clock> c_;
};

class MemoryStore final : public Store {
 public:
  MemoryStore(std::string url, std::shared_ptr<const baton::Clock> clock)
      : url_(std::move(url)), clock_(std::move(clock)), table_(clock_) {}

  Result<Grant> acquire(const AcquireSpec& spec, milliseconds wait) override {
    if (Status st = core::validate_wait(wait); !st.ok()) return st.error();
    std::unique_lock<std::mutex> lk(mu_);
    core::AcquireRequest req;
    req.name = spec.name;
    req.token = spec.token;
    req.ttl = spec.ttl;
    req.capacity = spec.capacity;
    req.label = spec.label;
    req.reentrancy_key = spec.reentrancy_key;
    req.shared = spec.shared;
    if (wait > milliseconds::zero()) {
      req.wait_deadline = clock_.now() + clamp_wait(wait);
    }
    auto r = table_.acquire(req);
    if (!r.ok() || r->granted) {
      drain_locked();
      if (!r.ok()) return std::move(r).error();
      return to_grant(r->grant);
    }
    const std::pair<std::string, OwnerToken> key{spec.name, spec.token};
    Pending& p = pending_[key];
    ++p.waiters;
    drain_locked();
    const Instant deadline = *req.wait_deadline;
    while (!p.done) {
      if (clock_.now() >= deadline + kGrace) {
        // The table should have timed the request out; make sure nothing
        // stays queued. A grant would have been drained into `p` already.
        auto rel = table_.release(spec.name, spec.token);
        drain_locked();
        if (!p.done) p.done = true;  // timed out
        (void)rel;
        break;
      }
      wait_locked(lk, deadline);
    }
    const Pending out = p;
    if (--p.waiters == 0) pending_.erase(key);
    if (out.granted) return to_grant(out.grant);
    if (out.withdrawn) {
      return Error(Errc::not_acquired, "the request for lock " +
                                           core::quote_name(spec.name) +
                                           " was withdrawn while it waited");
    }
    return Error(Errc::timeout, "lock " + core::quote_name(spec.name) +
                                    " was not granted within " +
                                    std::to_string(wait.count()) + "ms");
  }

  Result<Grant> extend(std::string_view name, const OwnerToken& token,
                       milliseconds ttl) override {
    std::lock_guard<std::mutex> lk(mu_);
    auto r = table_.extend(name, token, ttl);
    drain_locked();
    if (!r.ok()) return std::move(r).error();
    return to_grant(*r);
  }

  Result<ReleaseResult> release(std::string_view name,
                                const OwnerToken& token) override {
    std::lock_guard<std::mutex> lk(mu_);
    auto r = table_.release(name, token);
    if (r.ok() && r->withdrew_waiter) {
      auto it = pending_.find({std::string(name), token});
      if (it != pending_.end() && !it->second.done) {
        it->second.done = true;
        it->second.withdrawn = true;
        cv_.notify_all();
      }
      if (auto m = multi_.find(token); m != multi_.end()) {
        m->second.withdrawn = true;
        cv_.notify_all();
      }
    }
    drain_locked();
    if (!r.ok()) return std::move(r).error();
    return ReleaseResult{r->was_held, r->holds_left};
  }

  Result<LockInfo> describe(std::string_view name) override {
    std::lock_guard<std::mutex> lk(mu_);
    auto r = table_.describe(name);
    drain_locked();
    return r;
  }

  Result<std::vector<LockInfo>> list(std::string_view prefix,
                                     std::size_t limit) override {
    std::lock_guard<std::mutex> lk(mu_);
    auto r = table_.list(prefix, limit);
    drain_locked();
    return r;
  }

  Result<std::vector<Grant>> acquire_multi(const MultiSpec& spec,
                                           milliseconds wait) override {
    if (Status st = core::validate_wait(wait); !st.ok()) return st.error();
    std::unique_lock<std::mutex> lk(mu_);
    core::MultiRequest req;
    req.names.assign(spec.names.begin(), spec.names.end());
    req.reservation = spec.reservation;
    req.ttl = spec.ttl;
    req.capacity = spec.capacity;
    req.label = spec.label;
    req.all_or_nothing = spec.all_or_nothing;
    const Instant start = clock_.now();
    const Instant wait_deadline = start + clamp_wait(wait);
    if (spec.all_or_nothing) {
      if (wait > milliseconds::zero()) req.queue_deadline = wait_deadline;
    } else {
      req.queue_deadline = start + Nanos(spec.ttl);
    }
    auto r = table_.acquire_multi(req);
    if (!r.ok()) {
      drain_locked();
      return std::move(r).error();
    }
    if (!r->granted.empty() || r->pending == 0 ||
        wait <= milliseconds::zero()) {
      drain_locked();
      if (spec.all_or_nothing && r->granted.size() < spec.names.size()) {
        return Error(Errc::not_acquired, "not all of the " +
                                             std::to_string(spec.names.size()) +
                                             " locks are free");
      }
      return to_grants(r->granted);
    }
    MultiPending& m = multi_[spec.reservation];
    ++m.waiters;
    drain_locked();
    for (;;) {
      if (m.withdrawn) break;
      if (spec.all_or_nothing) {
        if (m.granted.size() >= spec.names.size() || m.timed_out) break;
        if (clock_.now() >= wait_deadline + kGrace) {
          for (const auto& n : spec.names) {
            (void)table_.release(n, spec.reservation);
          }
          drain_locked();
          m.timed_out = m.granted.size() < spec.names.size();
          break;
        }
      } else if (!m.granted.empty() || clock_.now() >= wait_deadline) {
        break;
      }
      wait_locked(lk, wait_deadline);
    }
    const MultiPending out = m;
    if (--m.waiters == 0) multi_.erase(spec.reservation);
    if (out.withdrawn) {
      return Error(Errc::not_acquired,
                   "the reservation was withdrawn while it waited");
    }
    if (spec.all_or_nothing) {
      if (out.granted.size() < spec.names.size()) {
        return Error(Errc::timeout, "not all of the " +
                                        std::to_string(spec.names.size()) +
                                        " locks were granted within " +
                                        std::to_string(wait.count()) + "ms");
      }
      return to_grants(out.granted);
    }
    // acquire_some: report everything the reservation holds among the names
    // (and refresh its queued requests).
    req.queue_deadline = clock_.now() + Nanos(spec.ttl);
    auto again = table_.acquire_multi(req);
    drain_locked();
    if (!again.ok()) return std::move(again).error();
    return to_grants(again->granted);
  }

  Result<std::int64_t> counter_get(std::string_view name) override {
    std::lock_guard<std::mutex> lk(mu_);
    auto r = table_.counter_get(name);
    drain_locked();
    return r;
  }
  Result<std::int64_t> counter_add(std::string_view name,
                                   std::int64_t delta) override {
    std::lock_guard<std::mutex> lk(mu_);
    auto r = table_.counter_add(name, delta);
    drain_locked();
    return r;
  }
  Result<std::int64_t> counter_take(std::string_view name,
                                    std::int64_t n) override {
    std::lock_guard<std::mutex> lk(mu_);
    auto r = table_.counter_take(name, n);
    drain_locked();
    return r;
  }

  bool supports_shared() const override { return true; }
  bool leases_outlive_client() const override { return false; }
  std::string safe_url() const override { return url_; }

 private:
  // Requires mu_. Records the outcome of parked calls and wakes them.
  void drain_locked() {
    bool wake = false;
    for (auto& ev : table_.take_events()) {
      switch (ev.kind) {
        case core::Event::Kind::granted: {
          auto it = pending_.find({ev.name, ev.token});
          if (it != pending_.end() && !it->second.done) {
            it->second.done = true;
            it->second.granted = true;
            it->second.grant = ev.grant;
            wake = true;
          }
          auto m = multi_.find(ev.token);
          if (m != multi_.end()) {
            m->second.granted.push_back(ev.grant);
            wake = true;
          }
          break;
        }
        case core::Event::Kind::wait_timed_out:
        case core::Event::Kind::session_ended: {
          auto it = pending_.find({ev.name, ev.token});
          if (it != pending_.end() && !it->second.done) {
            it->second.done = true;
            wake = true;
          }
          auto m = multi_.find(ev.token);
          if (m != multi_.end()) {
            m->second.timed_out = true;
            wake = true;
          }
          break;
        }
        case core::Event::Kind::lease_expired:
          break;
      }
    }
    if (wake) cv_.notify_all();
  }

  // Requires mu_ (held by `lk`). Parks until `until`, the table's next
  // deadline or a notification, then lets the table process what is due.
  void wait_locked(std::unique_lock<std::mutex>& lk, Instant until) {
    Instant wake = until;
    if (auto next = table_.next_deadline(); next && *next < wake) wake = *next;
    const auto tp = std::chrono::steady_clock::time_point(
        duration_cast<std::chrono::steady_clock::duration>(wake));
    clock_.source().wait_until(cv_, lk, tp);
    table_.advance();
    drain_locked();
  }

  Grant to_grant(const core::CoreGrant& g) const {
    return core::to_grant(g, clock_.now(), wall_now_ms());
  }

  static std::int64_t wall_now_ms() {
    return duration_cast<milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  }

  std::vector<Grant> to_grants(const std::vector<core::CoreGrant>& gs) const {
    std::vector<Grant> out;
    out.reserve(gs.size());
    for (const auto& g : gs) out.push_back(to_grant(g));
    return out;
  }

  const std::string url_;
  TableClock clock_;
  std::mutex mu_;
  std::condition_variable cv_;
  core::LockTable table_;  // guarded by mu_
  std::map<std::pair<std::string, OwnerToken>, Pending> pending_;  // mu_
  std::map<OwnerToken, MultiPending> multi_;                       // mu_
};

// Forwards to a shared named store (memory:<name>).
class SharedMemoryStore final : public Store {
 public:
  explicit SharedMemoryStore(std::shared_ptr<Store> s) : s_(std::move(s)) {}
  Result<Grant> acquire(const AcquireSpec& spec, milliseconds wait) override {
    return s_->acquire(spec, wait);
  }
  Result<Grant> extend(std::string_view name, const OwnerToken& token,
                       milliseconds ttl) override {
    return s_->extend(name, token, ttl);
  }
  Result<ReleaseResult> release(std::string_view name,
                                const OwnerToken& token) override {
    return s_->release(name, token);
  }
  Result<LockInfo> describe(std::string_view name) override {
    return s_->describe(name);
  }
  Result<std::vector<LockInfo>> list(std::string_view prefix,
                                     std::size_t limit) override {
    return s_->list(prefix, limit);
  }
  Result<std::vector<Grant>> acquire_multi(const MultiSpec& spec,
                                           milliseconds wait) override {
    return s_->acquire_multi(spec, wait);
  }
  Result<std::int64_t> counter_get(std::string_view name) override {
    return s_->counter_get(name);
  }
  Result<std::int64_t> counter_add(std::string_view name,
                                   std::int64_t delta) override {
    return s_->counter_add(name, delta);
  }
  Result<std::int64_t> counter_take(std::string_view name,
                                    std::int64_t n) override {
    return s_->counter_take(name, n);
  }
  bool supports_shared() const override { return s_->supports_shared(); }
  bool leases_outlive_client() const override {
    return s_->leases_outlive_client();
  }
  std::string safe_url() const override { return s_->safe_url(); }

 private:
  std::shared_ptr<Store> s_;
};

}  // namespace

std::unique_ptr<Store> make_memory_store(
    std::string url, std::shared_ptr<const baton::Clock> clock) {
  if (!clock) clock = baton::Clock::steady();
  return std::make_unique<MemoryStore>(std::move(url), std::move(clock));
}

Result<std::unique_ptr<Store>> open_memory_store(const core::Url& url) {
  if (!url.hosts.empty() || !url.path.empty()) {
    return Error(Errc::invalid_argument,
                 "store URL \"" + url.safe() +
                     "\": memory: takes no host or path (use memory: or "
                     "memory:<name>)");
  }
  if (url.opaque.empty()) return make_memory_store();
  static std::mutex mu;
  static std::map<std::string, std::weak_ptr<Store>> named;
  std::lock_guard<std::mutex> lk(mu);
  std::shared_ptr<Store> s = named[url.opaque].lock();
  if (!s) {
    s = make_memory_store("memory:" + url.opaque);
    named[url.opaque] = s;
  }
  return std::unique_ptr<Store>(std::make_unique<SharedMemoryStore>(s));
}

}  // namespace baton::store
