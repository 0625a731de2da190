// stores/memory/memory_requests.cc — MemRequest and MemMulti: one acquire,
// and one acquire_some / acquire_all, on the memory: store (memory_impl.h).
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "baton/clock.h"
#include "baton/error.h"
#include "baton/lease.h"
#include "baton/store.h"
#include "core/clock.h"
#include "core/lock_table.h"
#include "core/validate.h"
#include "stores/memory/memory_impl.h"

namespace baton::store::memory {

using core::Nanos;
using std::chrono::duration_cast;

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

}  // namespace baton::store::memory
