// stores/memory/memory_store.cc — core::LockTable behind a mutex, as the
// primitives of baton/store.h.
//
// A queued request parks in the table (with the wait deadline the engine
// gives); the table's events (grant, wait timed out) are drained into the
// parked request's record under the mutex and wake its wait_change(). Its
// wake-up therefore carries the grant itself.
#include "stores/memory/memory_store.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include "baton/clock.h"
#include "core/lock_table.h"
#include "core/validate.h"

namespace baton::store {
namespace {

using core::Instant;
using core::Nanos;
using std::chrono::duration_cast;

// The outcome of a parked single request, shared by every Request parked
// on the same (name, token).
struct Parked {
  int waiters = 0;
  bool done = false;
  bool granted = false;
  bool withdrawn = false;  // released by its owner token while parked
  core::CoreGrant grant;
};

// A parked acquire_some / acquire_all, keyed by reservation.
struct ParkedMulti {
  int waiters = 0;
  bool timed_out = false;
  bool withdrawn = false;
  std::vector<core::CoreGrant> granted;
};

std::int64_t wall_now_ms() {
  return duration_cast<milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

class MemoryStore;

class MemRequest final : public Request {
 public:
  MemRequest(MemoryStore& s, const AcquireSpec& spec) : s_(s), spec_(spec) {}
  ~MemRequest() override;
  Result<Answer> ask(AskMode mode, milliseconds wait_left,
                     const CallContext& ctx) override;
  Result<Answer> look(milliseconds wait_left, const CallContext& ctx) override;
  Result<Answer> withdraw(const CallContext& ctx) override;
  std::optional<Grant> wait_change(baton::Clock::time_point until,
                                   const CallContext& ctx) override;
  void interrupt() override;

 private:
  Answer answer_locked(const Parked& p) const;

  MemoryStore& s_;
  const AcquireSpec spec_;
  bool parked_ = false;  // counted in the store's record (s_.mu_)
  Instant first_ask_{};  // table time of the first ask
};

class MemMulti final : public MultiRequest {
 public:
  MemMulti(MemoryStore& s, const MultiSpec& spec) : s_(s), spec_(spec) {}
  ~MemMulti() override;
  Result<MultiAnswer> ask(AskMode mode, milliseconds wait_left,
                          const CallContext& ctx) override;
  Result<MultiAnswer> look(milliseconds wait_left,
                           const CallContext& ctx) override;
  Result<MultiAnswer> withdraw(const CallContext& ctx) override;
  std::optional<Grant> wait_change(baton::Clock::time_point until,
                                   const CallContext& ctx) override;
  void interrupt() override;

 private:
  core::MultiRequest table_request(Instant now, milliseconds wait_left) const;

  MemoryStore& s_;
  const MultiSpec spec_;
  bool parked_ = false;
};

class MemoryStore final : public baton::Store {
 public:
  MemoryStore(std::string url, std::shared_ptr<const baton::Clock> clock)
      : url_(std::move(url)), clock_(std::move(clock)), table_(*clock_) {}

  std::unique_ptr<Request> request(const AcquireSpec& spec) override {
    return std::make_unique<MemRequest>(*this, spec);
  }
  std::unique_ptr<MultiRequest> request_multi(const MultiSpec& spec) override {
    return std::make_unique<MemMulti>(*this, spec);
  }

  Result<Grant> extend(std::string_view name, const OwnerToken& token,
                       milliseconds ttl, const CallContext&) override {
    std::lock_guard<std::mutex> lk(mu_);
    auto r = table_.extend(name, token, ttl);
    drain_locked();
    if (!r.ok()) return std::move(r).error();
    return to_grant(*r);
  }

  Result<ReleaseResult> release(std::string_view name, const OwnerToken& token,
                                const CallContext&) override {
    std::lock_guard<std::mutex> lk(mu_);
    auto r = release_locked(name, token);
    if (!r.ok()) return std::move(r).error();
    return ReleaseResult{r->was_held, r->holds_left};
  }

  Result<LockInfo> describe(std::string_view name,
                            const CallContext&) override {
    std::lock_guard<std::mutex> lk(mu_);
    auto r = table_.describe(name);
    drain_locked();
    return r;
  }

  Result<std::vector<LockInfo>> list(std::string_view prefix, std::size_t limit,
                                     const CallContext&) override {
    std::lock_guard<std::mutex> lk(mu_);
    auto r = table_.list(prefix, limit);
    drain_locked();
    return r;
  }

  Result<std::int64_t> counter_get(std::string_view name,
                                   const CallContext&) override {
    std::lock_guard<std::mutex> lk(mu_);
    return table_.counter_get(name);
  }
  Result<std::int64_t> counter_add(std::string_view name, std::int64_t delta,
                                   const CallContext&) override {
    std::lock_guard<std::mutex> lk(mu_);
    return table_.counter_add(name, delta);
  }
  Result<std::int64_t> counter_take(std::string_view name, std::int64_t n,
                                    const CallContext&) override {
    std::lock_guard<std::mutex> lk(mu_);
    return table_.counter_take(name, n);
  }

  bool supports_shared() const override { return true; }
  bool leases_outlive_client() const override { return false; }
  // Every change wakes its waiters, so a look is never needed for them;
  // a long interval only bounds a wait the table forgot to answer.
  milliseconds recheck_interval() const override { return milliseconds{1000}; }
  std::string safe_url() const override { return url_; }

  Result<std::unique_ptr<Waitable>> watch(std::string_view prefix,
                                          const CallContext&) override;

 private:
  friend class MemRequest;
  friend class MemMulti;
  friend class MemWatch;

  // Requires mu_. A release by `token` also ends a parked request of it.
  Result<core::ReleaseOutcome> release_locked(std::string_view name,
                                              const OwnerToken& token) {
    auto r = table_.release(name, token);
    if (r.ok() && r->withdrew_waiter) {
      auto it = parked_.find({std::string(name), token});
      if (it != parked_.end() && !it->second.done) {
        it->second.done = true;
        it->second.withdrawn = true;
      }
      if (auto m = multi_.find(token); m != multi_.end()) {
        m->second.withdrawn = true;
      }
      cv_.notify_all();
    }
    drain_locked();
    return r;
  }

  // Requires mu_. Records the outcome of parked requests and wakes them.
  void drain_locked() {
    bool wake = false;
    for (auto& ev : table_.take_events()) {
      switch (ev.kind) {
        case core::Event::Kind::granted: {
          auto it = parked_.find({ev.name, ev.token});
          if (it != parked_.end() && !it->second.done) {
            it->second.done = true;
            it->second.granted = true;
            it->second.grant = ev.grant;
            wake = true;
          }
          if (auto m = multi_.find(ev.token); m != multi_.end()) {
            m->second.granted.push_back(ev.grant);
            wake = true;
          }
          break;
        }
        case core::Event::Kind::wait_timed_out:
        case core::Event::Kind::session_ended: {
          auto it = parked_.find({ev.name, ev.token});
          if (it != parked_.end() && !it->second.done) {
            it->second.done = true;
            wake = true;
          }
          if (auto m = multi_.find(ev.token); m != multi_.end()) {
            m->second.timed_out = true;
            wake = true;
          }
          break;
        }
        case core::Event::Kind::lease_expired:
          break;
      }
    }
    // A change feed (MemWatch) sleeps on cv_ too: wake it when what list()
    // reports moved. Without feeds this costs nothing.
    if (watchers_ > 0 && table_.change_count() != last_change_) {
      last_change_ = table_.change_count();
      wake = true;
    }
    if (wake) cv_.notify_all();
  }

  // Requires mu_ (held by `lk`). Sleeps until `until`, the table's next
  // deadline or a notification, then lets the table process what is due.
  void nap_locked(std::unique_lock<std::mutex>& lk, Instant until) {
    Instant wake = until;
    if (auto next = table_.next_deadline(); next && *next < wake) wake = *next;
    clock_->wait_until(cv_, lk, wake);
    table_.advance();
    drain_locked();
  }

  Grant to_grant(const core::CoreGrant& g) const {
    return core::to_grant(g, clock_->now(), wall_now_ms());
  }

  const std::string url_;
  const std::shared_ptr<const baton::Clock> clock_;
  std::mutex mu_;
  std::condition_variable cv_;
  core::LockTable table_;  // guarded by mu_
  std::map<std::pair<std::string, OwnerToken>, Parked> parked_;  // mu_
  std::map<OwnerToken, ParkedMulti> multi_;                      // mu_
  int watchers_ = 0;                                             // mu_
  std::uint64_t last_change_ = 0;                                // mu_
};

// The change feed: any change of the table wakes it (the prefix is not
// looked at: a spurious return is allowed, and memory: is one process).
class MemWatch final : public Waitable {
 public:
  explicit MemWatch(MemoryStore& s) : s_(s) {
    std::lock_guard<std::mutex> lk(s_.mu_);
    ++s_.watchers_;
    seen_ = s_.table_.change_count();
  }
  ~MemWatch() override {
    std::lock_guard<std::mutex> lk(s_.mu_);
    --s_.watchers_;
  }
  std::optional<Grant> wait_change(baton::Clock::time_point until,
                                   const CallContext&) override {
    std::unique_lock<std::mutex> lk(s_.mu_);
    for (;;) {
      // Expiries are processed by time passing (nap_locked advances).
      s_.table_.advance();
      s_.drain_locked();
      if (s_.table_.change_count() != seen_ || interrupted() ||
          s_.clock_->now() >= until) {
        seen_ = s_.table_.change_count();
        return std::nullopt;
      }
      s_.nap_locked(lk, until);
    }
  }
  void interrupt() override {
    Waitable::interrupt();
    std::lock_guard<std::mutex> lk(s_.mu_);
    s_.cv_.notify_all();
  }

 private:
  MemoryStore& s_;
  std::uint64_t seen_ = 0;  // s_.mu_
};

Result<std::unique_ptr<Waitable>> MemoryStore::watch(std::string_view,
                                                     const CallContext&) {
  return std::unique_ptr<Waitable>(std::make_unique<MemWatch>(*this));
}

// --- MemRequest --------------------------------------------------------------

MemRequest::~MemRequest() {
  if (!parked_) return;
  std::lock_guard<std::mutex> lk(s_.mu_);
  const std::pair<std::string, OwnerToken> key{spec_.name, spec_.token};
  auto it = s_.parked_.find(key);
  if (it != s_.parked_.end() && --it->second.waiters == 0) {
    s_.parked_.erase(it);
  }
}

Answer MemRequest::answer_locked(const Parked& p) const {
  if (p.granted) {
    Grant g = s_.to_grant(p.grant);
    // valid_for counts from this Request's first ask (a repeat of an older
    // request finds the table's arrival earlier than that).
    const auto since_first =
        duration_cast<std::chrono::microseconds>(p.grant.expiry - first_ask_);
    g.valid_for = std::min(g.valid_for, since_first);
    return Answer::granted_with(std::move(g));
  }
  if (p.withdrawn) {
    return Answer::refused_with(
        Error(Errc::not_acquired, "the request for lock " +
                                      core::quote_name(spec_.name) +
                                      " was withdrawn while it waited"));
  }
  Answer a;
  a.kind = p.done ? Answer::Kind::expired : Answer::Kind::queued;
  a.gone = p.done;
  return a;
}

Result<Answer> MemRequest::ask(AskMode mode, milliseconds wait_left,
                               const CallContext&) {
  std::lock_guard<std::mutex> lk(s_.mu_);
  const Instant now = s_.clock_->now();
  if (first_ask_ == Instant{}) first_ask_ = now;
  core::AcquireRequest req;
  req.name = spec_.name;
  req.token = spec_.token;
  req.ttl = spec_.ttl;
  req.capacity = spec_.capacity;
  req.label = spec_.label;
  req.reentrancy_key = spec_.reentrancy_key;
  req.shared = spec_.shared;
  if (mode == AskMode::wait) req.wait_deadline = now + Nanos(wait_left);
  auto r = s_.table_.acquire(req);
  if (!r.ok() || r->granted) {
    s_.drain_locked();
    if (!r.ok()) {
      if (r.error().code() == Errc::not_acquired) {
        return Answer::refused_with(std::move(r).error());
      }
      return std::move(r).error();
    }
    Parked granted;
    granted.granted = true;
    granted.grant = r->grant;
    return answer_locked(granted);
  }
  if (!parked_) {
    Parked& p = s_.parked_[{spec_.name, spec_.token}];
    ++p.waiters;
    p.done = false;  // a repeat of a request that ended: parked anew
    parked_ = true;
  }
  s_.drain_locked();
  return answer_locked(s_.parked_[{spec_.name, spec_.token}]);
}

Result<Answer> MemRequest::look(milliseconds wait_left,
                                const CallContext& ctx) {
  {
    std::lock_guard<std::mutex> lk(s_.mu_);
    s_.table_.advance();
    s_.drain_locked();
    auto it = s_.parked_.find({spec_.name, spec_.token});
    if (parked_ && it != s_.parked_.end()) return answer_locked(it->second);
  }
  return ask(AskMode::wait, wait_left, ctx);
}

Result<Answer> MemRequest::withdraw(const CallContext&) {
  std::lock_guard<std::mutex> lk(s_.mu_);
  s_.table_.advance();
  s_.drain_locked();
  auto it = s_.parked_.find({spec_.name, spec_.token});
  if (it != s_.parked_.end() && it->second.granted) {
    return answer_locked(it->second);
  }
  auto r = s_.release_locked(spec_.name, spec_.token);
  if (!r.ok()) return std::move(r).error();
  Answer a;
  a.kind = Answer::Kind::expired;
  a.gone = true;
  return a;
}

std::optional<Grant> MemRequest::wait_change(baton::Clock::time_point until,
                                             const CallContext& ctx) {
  std::unique_lock<std::mutex> lk(s_.mu_);
  const Instant end = ctx.cap(until);
  auto it = s_.parked_.find({spec_.name, spec_.token});
  if (it == s_.parked_.end()) return std::nullopt;
  while (!it->second.done && !interrupted() && s_.clock_->now() < end) {
    s_.nap_locked(lk, end);
  }
  if (it->second.granted) return answer_locked(it->second).grant;
  return std::nullopt;
}

void MemRequest::interrupt() {
  Waitable::interrupt();
  std::lock_guard<std::mutex> lk(s_.mu_);
  s_.cv_.notify_all();
}

// --- MemMulti ----------------------------------------------------------------

MemMulti::~MemMulti() {
  if (!parked_) return;
  std::lock_guard<std::mutex> lk(s_.mu_);
  auto it = s_.multi_.find(spec_.reservation);
  if (it != s_.multi_.end() && --it->second.waiters == 0) s_.multi_.erase(it);
}

core::MultiRequest MemMulti::table_request(Instant now,
                                           milliseconds wait_left) const {
  core::MultiRequest req;
  req.names.assign(spec_.names.begin(), spec_.names.end());
  req.reservation = spec_.reservation;
  req.ttl = spec_.ttl;
  req.capacity = spec_.capacity;
  req.label = spec_.label;
  req.all_or_nothing = spec_.all_or_nothing;
  if (spec_.all_or_nothing) {
    if (wait_left > milliseconds::zero()) {
      req.queue_deadline = now + Nanos(wait_left);
    }
  } else {
    req.queue_deadline = now + Nanos(spec_.ttl);
  }
  return req;
}

Result<MultiAnswer> MemMulti::ask(AskMode mode, milliseconds wait_left,
                                  const CallContext&) {
  std::lock_guard<std::mutex> lk(s_.mu_);
  auto r = s_.table_.acquire_multi(table_request(
      s_.clock_->now(),
      mode == AskMode::try_only ? milliseconds::zero() : wait_left));
  s_.drain_locked();
  if (!r.ok()) return std::move(r).error();
  MultiAnswer a;
  if (spec_.all_or_nothing && mode == AskMode::try_only &&
      r->granted.size() < spec_.names.size()) {
    a.kind = MultiAnswer::Kind::refused;
    a.error = Error(Errc::not_acquired, "not all of the " +
                                            std::to_string(spec_.names.size()) +
                                            " locks are free");
    a.gone = true;
    return a;
  }
  for (const auto& g : r->granted) a.grants.push_back(s_.to_grant(g));
  a.pending = r->pending;
  if (a.pending > 0 && !parked_) {
    ParkedMulti& m = s_.multi_[spec_.reservation];
    ++m.waiters;
    parked_ = true;
  }
  return a;
}

Result<MultiAnswer> MemMulti::look(milliseconds wait_left,
                                   const CallContext& ctx) {
  if (!spec_.all_or_nothing) return ask(AskMode::wait, wait_left, ctx);
  std::lock_guard<std::mutex> lk(s_.mu_);
  s_.table_.advance();
  s_.drain_locked();
  MultiAnswer a;
  auto it = s_.multi_.find(spec_.reservation);
  if (it == s_.multi_.end()) {
    a.kind = MultiAnswer::Kind::expired;
    return a;
  }
  const ParkedMulti& m = it->second;
  if (m.withdrawn) {
    a.kind = MultiAnswer::Kind::refused;
    a.error = Error(Errc::not_acquired,
                    "the reservation was withdrawn while it waited");
    a.gone = true;
    return a;
  }
  for (const auto& g : m.granted) a.grants.push_back(s_.to_grant(g));
  a.pending =
      spec_.names.size() - std::min(spec_.names.size(), a.grants.size());
  if (m.timed_out && a.pending > 0) {
    a.kind = MultiAnswer::Kind::expired;
    a.gone = true;
  }
  return a;
}

Result<MultiAnswer> MemMulti::withdraw(const CallContext& ctx) {
  if (spec_.all_or_nothing) {
    auto seen = look(milliseconds::zero(), ctx);
    if (seen.ok() && seen->kind == MultiAnswer::Kind::progress &&
        seen->pending == 0) {
      return seen;
    }
  }
  std::lock_guard<std::mutex> lk(s_.mu_);
  for (const auto& n : spec_.names) {
    auto r = s_.release_locked(n, spec_.reservation);
    if (!r.ok()) return std::move(r).error();
  }
  MultiAnswer a;
  a.kind = MultiAnswer::Kind::expired;
  a.gone = true;
  return a;
}

std::optional<Grant> MemMulti::wait_change(baton::Clock::time_point until,
                                           const CallContext& ctx) {
  std::unique_lock<std::mutex> lk(s_.mu_);
  const Instant end = ctx.cap(until);
  auto it = s_.multi_.find(spec_.reservation);
  if (it == s_.multi_.end()) return std::nullopt;
  const std::size_t seen = it->second.granted.size();
  while (it->second.granted.size() == seen && !it->second.timed_out &&
         !it->second.withdrawn && !interrupted() && s_.clock_->now() < end) {
    s_.nap_locked(lk, end);
  }
  return std::nullopt;
}

void MemMulti::interrupt() {
  Waitable::interrupt();
  std::lock_guard<std::mutex> lk(s_.mu_);
  s_.cv_.notify_all();
}

// Forwards to a shared named store (memory:<name>).
class SharedMemoryStore final : public baton::Store {
 public:
  explicit SharedMemoryStore(std::shared_ptr<baton::Store> s)
      : s_(std::move(s)) {}
  std::unique_ptr<Request> request(const AcquireSpec& spec) override {
    return s_->request(spec);
  }
  std::unique_ptr<MultiRequest> request_multi(const MultiSpec& spec) override {
    return s_->request_multi(spec);
  }
  Result<Grant> extend(std::string_view name, const OwnerToken& token,
                       milliseconds ttl, const CallContext& ctx) override {
    return s_->extend(name, token, ttl, ctx);
  }
  Result<ReleaseResult> release(std::string_view name, const OwnerToken& token,
                                const CallContext& ctx) override {
    return s_->release(name, token, ctx);
  }
  Result<LockInfo> describe(std::string_view name,
                            const CallContext& ctx) override {
    return s_->describe(name, ctx);
  }
  Result<std::vector<LockInfo>> list(std::string_view prefix, std::size_t limit,
                                     const CallContext& ctx) override {
    return s_->list(prefix, limit, ctx);
  }
  Result<std::int64_t> counter_get(std::string_view name,
                                   const CallContext& ctx) override {
    return s_->counter_get(name, ctx);
  }
  Result<std::int64_t> counter_add(std::string_view name, std::int64_t delta,
                                   const CallContext& ctx) override {
    return s_->counter_add(name, delta, ctx);
  }
  Result<std::int64_t> counter_take(std::string_view name, std::int64_t n,
                                    const CallContext& ctx) override {
    return s_->counter_take(name, n, ctx);
  }
  bool supports_shared() const override { return s_->supports_shared(); }
  bool leases_outlive_client() const override {
    return s_->leases_outlive_client();
  }
  milliseconds recheck_interval() const override {
    return s_->recheck_interval();
  }
  Result<std::unique_ptr<Waitable>> watch(std::string_view prefix,
                                          const CallContext& ctx) override {
    return s_->watch(prefix, ctx);
  }
  std::string safe_url() const override { return s_->safe_url(); }

 private:
  std::shared_ptr<baton::Store> s_;
};

Result<std::unique_ptr<baton::Store>> open_memory(const StoreUrl& url) {
  if (!url.hosts.empty() || !url.path.empty()) {
    return Error(Errc::invalid_argument,
                 "store URL \"" + url.safe +
                     "\": memory: takes no host or path (use memory: or "
                     "memory:<name>)");
  }
  if (url.opaque.empty()) return make_memory_store();
  static std::mutex mu;
  static std::map<std::string, std::weak_ptr<baton::Store>> named;
  std::lock_guard<std::mutex> lk(mu);
  std::shared_ptr<baton::Store> s = named[url.opaque].lock();
  if (!s) {
    s = make_memory_store("memory:" + url.opaque);
    named[url.opaque] = s;
  }
  return std::unique_ptr<baton::Store>(std::make_unique<SharedMemoryStore>(s));
}

}  // namespace

std::unique_ptr<baton::Store> make_memory_store(
    std::string url, std::shared_ptr<const baton::Clock> clock) {
  if (!clock) clock = baton::Clock::steady();
  return std::make_unique<MemoryStore>(std::move(url), std::move(clock));
}

const StoreDescriptor& memory_descriptor() {
  static const StoreDescriptor d = [] {
    StoreDescriptor m;
    m.name = "memory";
    m.schemes = {"memory"};
    m.summary =
        "in-process locks (memory:<name> shares one store by name within "
        "the process)";
    m.url_form = "memory:[<name>]";
    m.hosts_required = false;
    m.open = open_memory;
    return m;
  }();
  return d;
}

}  // namespace baton::store
