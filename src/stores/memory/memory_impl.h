// stores/memory/memory_impl.h — the memory: store's classes, shared by its
// source files (memory_store.cc: MemoryStore, its change feed, memory:<name>
// and the descriptor; memory_requests.cc: MemRequest and MemMulti).
//
// core::LockTable behind a mutex, as the primitives of baton/store.h. A
// queued request parks in the table (with the wait deadline the engine
// gives); the table's events (grant, wait timed out) are drained into the
// parked request's record under the mutex and wake its wait_change(). Its
// wake-up therefore carries the grant itself.
//
// Thread safety: MemoryStore is safe for concurrent use (Store contract).
#ifndef BATON_STORES_MEMORY_MEMORY_IMPL_H_
#define BATON_STORES_MEMORY_MEMORY_IMPL_H_

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
#include "core/clock.h"
#include "core/lock_table.h"

namespace baton::store::memory {

using core::Instant;

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

class MemoryStore;
class MemWatch;  // the change feed (memory_store.cc)

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
                       milliseconds ttl, const CallContext&) override;
  Result<ReleaseResult> release(std::string_view name, const OwnerToken& token,
                                const CallContext&) override;
  Result<LockInfo> describe(std::string_view name, const CallContext&) override;
  Result<std::vector<LockInfo>> list(std::string_view prefix, std::size_t limit,
                                     const CallContext&) override;

  Result<std::int64_t> counter_get(std::string_view name,
                                   const CallContext&) override;
  Result<std::int64_t> counter_add(std::string_view name, std::int64_t delta,
                                   const CallContext&) override;
  Result<std::int64_t> counter_take(std::string_view name, std::int64_t n,
                                    const CallContext&) override;

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
                                              const OwnerToken& token);

  // Requires mu_. Records the outcome of parked requests and wakes them.
  void drain_locked();

  // Requires mu_ (held by `lk`). Sleeps until `until`, the table's next
  // deadline or a notification, then lets the table process what is due.
  void nap_locked(std::unique_lock<std::mutex>& lk, Instant until);

  Grant to_grant(const core::CoreGrant& g) const;

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

}  // namespace baton::store::memory

#endif  // BATON_STORES_MEMORY_MEMORY_IMPL_H_
