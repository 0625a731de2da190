// stores/memory/memory_store.cc — MemoryStore (the memory: store's
// primitives), its change feed, memory:<name> and the descriptor.
#include "stores/memory/memory_store.h"

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "baton/clock.h"
#include "baton/error.h"
#include "baton/lease.h"
#include "baton/store.h"
#include "baton/store_descriptor.h"
#include "core/clock.h"
#include "core/lock_table.h"
#include "stores/memory/memory_impl.h"

namespace baton::store::memory {
namespace {

using std::chrono::duration_cast;

std::int64_t wall_now_ms() {
  return duration_cast<milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

Result<Grant> MemoryStore::extend(std::string_view name,
                                  const OwnerToken& token, milliseconds ttl,
                                  const CallContext&) {
  std::lock_guard<std::mutex> lk(mu_);
  auto r = table_.extend(name, token, ttl);
  drain_locked();
  if (!r.ok()) return std::move(r).error();
  return to_grant(*r);
}

Result<ReleaseResult> MemoryStore::release(std::string_view name,
                                           const OwnerToken& token,
                                           const CallContext&) {
  std::lock_guard<std::mutex> lk(mu_);
  auto r = release_locked(name, token);
  if (!r.ok()) return std::move(r).error();
  return ReleaseResult{r->was_held, r->holds_left};
}

Result<LockInfo> MemoryStore::describe(std::string_view name,
                                       const CallContext&) {
  std::lock_guard<std::mutex> lk(mu_);
  auto r = table_.describe(name);
  drain_locked();
  return r;
}

Result<std::vector<LockInfo>> MemoryStore::list(std::string_view prefix,
                                                std::size_t limit,
                                                const CallContext&) {
  std::lock_guard<std::mutex> lk(mu_);
  auto r = table_.list(prefix, limit);
  drain_locked();
  return r;
}

Result<std::int64_t> MemoryStore::counter_get(std::string_view name,
                                              const CallContext&) {
  std::lock_guard<std::mutex> lk(mu_);
  return table_.counter_get(name);
}

Result<std::int64_t> MemoryStore::counter_add(std::string_view name,
                                              std::int64_t delta,
                                              const CallContext&) {
  std::lock_guard<std::mutex> lk(mu_);
  return table_.counter_add(name, delta);
}

Result<std::int64_t> MemoryStore::counter_take(std::string_view name,
                                               std::int64_t n,
                                               const CallContext&) {
  std::lock_guard<std::mutex> lk(mu_);
  return table_.counter_take(name, n);
}

Result<core::ReleaseOutcome> MemoryStore::release_locked(
    std::string_view name, const OwnerToken& token) {
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

void MemoryStore::drain_locked() {
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

void MemoryStore::nap_locked(std::unique_lock<std::mutex>& lk, Instant until) {
  Instant wake = until;
  if (auto next = table_.next_deadline(); next && *next < wake) wake = *next;
  clock_->wait_until(cv_, lk, wake);
  table_.advance();
  drain_locked();
}

Grant MemoryStore::to_grant(const core::CoreGrant& g) const {
  return core::to_grant(g, clock_->now(), wall_now_ms());
}

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

}  // namespace baton::store::memory

namespace baton::store {
namespace {

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
  return std::make_unique<memory::MemoryStore>(std::move(url),
                                               std::move(clock));
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
