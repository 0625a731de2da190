// stores/sqlstep/sql_acquire.cc — one acquire pass of the SQL stores
// (mysql://, sqlite://) on rows their transaction holds, a waiter's
// non-locking look, and describe() from the rows. Both kinds of request
// (rule 18) share one queue: a request is granted when it fits the holders
// and nothing live waits ahead of it; the scheduling step (Tx::pump) grants
// the head while it fits, so consecutive shared requests at the head are
// granted together and a waiting writer is passed by no later reader.
#include <algorithm>

#include "core/validate.h"
#include "stores/sqlstep/sql_state.h"

namespace baton::store::sqlstep {
namespace {

// Why a try on `s` is refused (after "lock NAME").
std::string busy_reason(const NameState& s, bool shared, std::int64_t now) {
  const int live = s.live_holders(now);
  bool any_shared = false, any_exclusive = false;
  for (const auto& h : s.holders) {
    if (h.expires_us <= now) continue;
    (h.shared ? any_shared : any_exclusive) = true;
  }
  if (!shared && any_shared) {
    return " is held shared by " + std::to_string(live) +
           (live == 1 ? " holder" : " holders");
  }
  if (shared && any_exclusive) return " is held exclusively";
  if (!shared && live >= s.capacity) {
    return " is held (" + std::to_string(live) + " of " +
           std::to_string(s.capacity) + ")";
  }
  return " has " + std::to_string(s.waiting(now)) +
         " waiters ahead of this request";
}

// Nothing granted and nothing left queued.
AcquireOutcome ended() {
  AcquireOutcome out;
  out.ended = true;
  return out;
}

int place_of(const NameState& s, const Request* mine) {
  int pos = 0;
  for (const auto& x : s.queue) {
    if (!x.withdrawn) ++pos;
    if (&x == mine) break;
  }
  return std::max(pos, 1);
}

}  // namespace

Result<AcquireOutcome> acquire_step(Tx& tx, const AcquireSpec& spec,
                                    const std::string& token, MultiMode mode,
                                    long long wait_ms, std::int64_t hb_us,
                                    std::int64_t* arrival) {
  const std::string& name = spec.name;
  const int cap = static_cast<int>(spec.capacity);
  const std::int64_t now = tx.now();
  if (*arrival == 0) *arrival = now;
  tx.schedule(name);
  NameState& s = tx.at(name);
  if (auto e = capacity_conflict(name, s, cap, now)) return *e;
  // Rule 17: the same token again is the same lease, or keeps its place.
  if (const Holder* h = s.holder_of(token)) {
    return AcquireOutcome{tx.to_grant(*h, s.capacity, *arrival), 0, nullptr};
  }
  if (Request* q = s.request_of(token)) {
    if (q->withdrawn) {
      tx.remove_request(name, q->id);
      return Error(Errc::not_acquired, "the request for lock " +
                                           core::quote_name(name) +
                                           " was withdrawn while it waited");
    }
    if (mode != MultiMode::wait || wait_ms <= 0) {
      tx.remove_request(name, q->id);
      tx.pump(name);
      return ended();
    }
    if (q->kind == 0 && *q->heartbeat_us < now + hb_us / 2) {
      tx.refresh(*q, now + wait_ms * 1000, now + hb_us);
    }
    return AcquireOutcome{std::nullopt, place_of(s, q), q};
  }
  if (!spec.reentrancy_key.empty()) {
    for (auto& h : s.holders) {
      if (h.rkey != spec.reentrancy_key) continue;
      if (h.holds >= 2147483647) {
        return Error(Errc::invalid_argument,
                     "lock " + core::quote_name(name) +
                         " has reached the maximum hold count");
      }
      tx.join(h, token, spec.ttl.count());
      return AcquireOutcome{tx.to_grant(h, s.capacity, *arrival), 0, nullptr};
    }
  }
  if (s.waiting(now) == 0 && s.fits(spec.shared, now)) {
    auto& h = tx.grant(name, token, spec.ttl.count(), cap, spec.label,
                       spec.reentrancy_key, spec.shared);
    return AcquireOutcome{tx.to_grant(h, cap, *arrival), 0, nullptr};
  }
  if (mode == MultiMode::try_) {
    Error e(Errc::not_acquired, "lock " + core::quote_name(name) +
                                    busy_reason(s, spec.shared, now));
    auto hs = tx.holder_infos(name);
    if (!hs.empty()) e.with_holders(std::move(hs));
    return e;
  }
  if (mode == MultiMode::withdraw || wait_ms <= 0) return ended();
  tx.enqueue(name, token, 0, spec.ttl.count(), cap, spec.label,
             spec.reentrancy_key, now + wait_ms * 1000, now + hb_us,
             spec.shared);
  return AcquireOutcome{std::nullopt, s.waiting(now), s.request_of(token)};
}

namespace {

int quiet_position(const NameState& s, const Request* mine, std::int64_t now,
                   std::int64_t hb_us) {
  if (mine == nullptr || mine->withdrawn || !mine->live(now) ||
      mine->kind != 0 || *mine->heartbeat_us < now + hb_us / 2) {
    return 0;
  }
  for (const auto& h : s.holders) {
    if (h.expires_us <= now) return 0;
  }
  const Request* head = nullptr;
  for (const auto& q : s.queue) {
    if (!q.live(now)) return 0;
    if (head == nullptr && !q.withdrawn) head = &q;
  }
  if (head == nullptr) return 0;
  // An acquire_all head waits for its owner's pass while there is room.
  const bool stuck = head->kind == 2 ? s.live_holders(now) >= s.capacity
                                     : !s.fits(head->shared, now);
  return stuck ? place_of(s, mine) : 0;
}

}  // namespace

AcquireOutcome quiet_look(const Tx& tx, const NameState& s,
                          const std::string& token, std::int64_t hb_us,
                          std::int64_t arrival) {
  AcquireOutcome out;
  const std::int64_t now = tx.now();
  for (const auto& h : s.holders) {
    if (h.has(token) && h.expires_us > now) {
      out.grant = tx.to_grant(h, s.capacity, arrival);
      return out;
    }
  }
  for (const auto& q : s.queue) {
    if (q.token == token) out.mine = &q;
  }
  out.position = quiet_position(s, out.mine, now, hb_us);
  return out;
}

LockInfo lock_info(const std::string& name, const NameState& s,
                   std::int64_t now) {
  LockInfo info;
  info.name = name;
  info.last_fencing_token = static_cast<std::uint64_t>(s.last_fencing);
  info.capacity = s.active(now) ? static_cast<std::uint32_t>(s.capacity) : 1u;
  for (const auto& h : s.holders) {
    if (h.expires_us <= now) continue;
    info.holders.push_back({h.label, static_cast<std::uint64_t>(h.fencing),
                            milliseconds{(h.expires_us - now) / 1000},
                            static_cast<std::uint32_t>(h.holds), h.shared});
  }
  for (const auto& q : s.queue) {
    if (q.withdrawn || !q.live(now)) continue;
    info.waiters.push_back(
        {q.label,
         milliseconds{std::max<std::int64_t>(0, now - q.arrived_us) / 1000},
         q.kind == 2, q.shared});
  }
  return info;
}

}  // namespace baton::store::sqlstep
