// stores/sqlstep/sql_multi.cc — acquire_some / acquire_all (reservations
// of several names) as one scheduling step over every name of the request,
// all of which the store's transaction holds (mysql://: their serialization
// rows; sqlite://: the one write transaction).
#include "core/validate.h"
#include "stores/sqlstep/sql_state.h"

namespace baton::store::sqlstep {

Result<MultiOutcome> multi_step(Tx& tx, const MultiSpec& spec, MultiMode mode,
                                long long wait_ms,
                                std::int64_t waiter_timeout_us,
                                std::int64_t arrival_us) {
  const std::string token = spec.reservation.to_string();
  const int cap = static_cast<int>(spec.capacity);
  const bool all = spec.all_or_nothing;
  const int kind = all ? 2 : 1;
  const std::int64_t now = tx.now();
  MultiOutcome out;
  for (const auto& n : spec.names) tx.schedule(n);
  for (const auto& n : spec.names) {
    NameState& s = tx.at(n);
    if (auto e = capacity_conflict(n, s, cap, now)) return *e;
    if (Request* q = s.request_of(token); q != nullptr && q->kind != kind) {
      return Error(Errc::invalid_argument,
                   "reservation is already queued on lock " +
                       core::quote_name(n) + " by " +
                       (all ? "acquire_some" : "acquire_all"));
    }
  }
  auto collect = [&] {
    for (const auto& n : spec.names) {
      NameState& s = tx.at(n);
      for (const auto& h : s.holders) {
        if (h.token == token) {
          out.grants.push_back(tx.to_grant(h, s.capacity, arrival_us));
        }
      }
    }
    return out;
  };
  auto drop_all = [&] {
    for (const auto& n : spec.names) {
      if (Request* q = tx.at(n).request_of(token)) tx.remove_request(n, q->id);
    }
    for (const auto& n : spec.names) tx.pump(n);
  };
  auto held = [&](const std::string& n) {
    const Holder* h = tx.at(n).holder_of(token);
    return h != nullptr && h->token == token;
  };
  auto free = [&](const std::string& n) {
    NameState& s = tx.at(n);
    return s.waiting(now) == 0 && s.live_holders(now) < cap;
  };
  if (all) {
    bool queued = false, withdrawn = false;
    for (const auto& n : spec.names) {
      if (Request* q = tx.at(n).request_of(token)) {
        queued = true;
        withdrawn = withdrawn || q->withdrawn;
      }
    }
    if (withdrawn) {
      drop_all();
      return Error(Errc::not_acquired,
                   "the reservation was withdrawn while it waited");
    }
    if (queued) {
      // Granted only when it heads every queue it is in, with room.
      bool ready = true;
      for (const auto& n : spec.names) {
        NameState& s = tx.at(n);
        if (held(n)) continue;
        const Request* head = nullptr;
        for (const auto& q : s.queue) {
          if (!q.withdrawn) {
            head = &q;
            break;
          }
        }
        if (head == nullptr || head->token != token ||
            s.live_holders(now) >= s.capacity) {
          ready = false;
          break;
        }
      }
      if (ready) {
        for (const auto& n : spec.names) {
          if (Request* q = tx.at(n).request_of(token)) {
            const std::int64_t ttl = q->ttl_ms;
            const std::string label = q->label;
            tx.remove_request(n, q->id);
            tx.grant(n, token, ttl, cap, label, "");
          }
        }
        return collect();
      }
      if (mode != MultiMode::wait || wait_ms <= 0) {
        drop_all();
        out.ended = true;
        return out;
      }
      for (const auto& n : spec.names) {
        if (Request* q = tx.at(n).request_of(token)) {
          if (*q->heartbeat_us < now + waiter_timeout_us / 2) {
            tx.refresh(*q, now + wait_ms * 1000, now + waiter_timeout_us);
          }
          ++out.pending;
        }
      }
      return collect();
    }
    std::string blocked;
    for (const auto& n : spec.names) {
      if (!held(n) && !free(n)) {
        blocked = n;
        break;
      }
    }
    if (blocked.empty()) {
      for (const auto& n : spec.names) {
        if (!held(n)) tx.grant(n, token, spec.ttl.count(), cap, spec.label, "");
      }
      return collect();
    }
    if (mode == MultiMode::try_) {
      NameState& s = tx.at(blocked);
      Error e(Errc::not_acquired,
              "lock " + core::quote_name(blocked) + " is not free (" +
                  std::to_string(s.live_holders(now)) + " of " +
                  std::to_string(s.capacity) + " held, " +
                  std::to_string(s.waiting(now)) + " waiting)");
      auto hs = tx.holder_infos(blocked);
      if (!hs.empty()) e.with_holders(std::move(hs));
      return e;
    }
    if (mode == MultiMode::withdraw || wait_ms <= 0) {
      out.ended = true;
      return out;
    }
    for (const auto& n : spec.names) {
      if (held(n)) continue;
      tx.enqueue(n, token, 2, spec.ttl.count(), cap, spec.label, "",
                 now + wait_ms * 1000, now + waiter_timeout_us);
      ++out.pending;
    }
    return collect();
  }
  // acquire_some: every name on its own. A withdrawal leaves every queue
  // and keeps what is held.
  if (mode == MultiMode::withdraw) {
    drop_all();
    out = collect();
    out.ended = true;
    return out;
  }
  for (const auto& n : spec.names) {
    NameState& s = tx.at(n);
    if (held(n)) continue;
    if (Request* q = s.request_of(token)) {
      if (q->withdrawn) continue;
      tx.refresh(*q, now + spec.ttl.count() * 1000, std::nullopt);
      ++out.pending;
    } else if (free(n)) {
      tx.grant(n, token, spec.ttl.count(), cap, spec.label, "");
    } else if (mode != MultiMode::try_) {
      tx.enqueue(n, token, 1, spec.ttl.count(), cap, spec.label, "",
                 now + spec.ttl.count() * 1000, std::nullopt);
      ++out.pending;
    }
  }
  return collect();
}

}  // namespace baton::store::sqlstep
