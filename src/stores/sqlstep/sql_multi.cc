// stores/sqlstep/sql_multi.cc — acquire_some / acquire_all (reservations
// of several names) as one scheduling step over every name of the request,
// all of which the store's transaction holds (mysql://: their serialization
// rows; sqlite://: the one write transaction).
#include "core/validate.h"
#include "stores/sqlstep/sql_state.h"

namespace baton::store::sqlstep {

namespace {

// Kinds of queued request (Request::kind).
constexpr int kSomeKind = 1;  // acquire_some
constexpr int kAllKind = 2;   // acquire_all

// One multi_step call: its request, the rows' time, and the outcome it
// builds. Every name of the request is scheduled (expired, pumped) before
// any decision; each decision below ends the step.
class MultiStep {
 public:
  MultiStep(Tx& tx, const MultiSpec& spec, MultiMode mode, long long wait_ms,
            std::int64_t waiter_timeout_us, std::int64_t arrival_us)
      : tx_(tx),
        spec_(spec),
        mode_(mode),
        wait_ms_(wait_ms),
        waiter_timeout_us_(waiter_timeout_us),
        arrival_us_(arrival_us),
        token_(spec.reservation.to_string()),
        cap_(static_cast<int>(spec.capacity)),
        now_(tx.now()) {}

  Result<MultiOutcome> run();

 private:
  std::optional<Error> check_names();
  Result<MultiOutcome> acquire_all();
  Result<MultiOutcome> retry_all();
  bool heads_every_queue();
  Result<MultiOutcome> grant_queued();
  const std::string* first_blocked();
  Error busy(const std::string& name);
  Result<MultiOutcome> enqueue_all();
  Result<MultiOutcome> acquire_some();

  // The reservation holds a lease on `n` with its own token (an alias of
  // another lease does not count).
  bool held(const std::string& n) {
    const Holder* h = tx_.at(n).holder_of(token_);
    return h != nullptr && h->token == token_;
  }
  // A new lease on `n` would jump no live request and fit the capacity.
  bool free(const std::string& n) {
    NameState& s = tx_.at(n);
    return s.waiting(now_) == 0 && s.live_holders(now_) < cap_;
  }
  // Adds the leases the reservation holds (names' order) and hands the
  // outcome out: the last call of a step.
  MultiOutcome collect();
  // Nothing of the reservation is queued any more; what it holds is not
  // reported (the outcome so far, marked ended).
  MultiOutcome ended() {
    out_.ended = true;
    return std::move(out_);
  }
  // Removes the reservation's request from every queue, then grants what
  // that frees.
  void drop_all();

  Tx& tx_;
  const MultiSpec& spec_;
  const MultiMode mode_;
  const long long wait_ms_;
  const std::int64_t waiter_timeout_us_;
  const std::int64_t arrival_us_;
  const std::string token_;  // the reservation
  const int cap_;
  const std::int64_t now_;
  MultiOutcome out_;
};

Result<MultiOutcome> MultiStep::run() {
  for (const auto& n : spec_.names) tx_.schedule(n);
  if (std::optional<Error> e = check_names()) return std::move(*e);
  return spec_.all_or_nothing ? acquire_all() : acquire_some();
}

// Refuses a capacity other than that of a lock in use, and a reservation
// queued on a name by the other kind of request.
std::optional<Error> MultiStep::check_names() {
  const bool all = spec_.all_or_nothing;
  const int kind = all ? kAllKind : kSomeKind;
  for (const auto& n : spec_.names) {
    NameState& s = tx_.at(n);
    if (auto e = capacity_conflict(n, s, cap_, now_)) return e;
    if (Request* q = s.request_of(token_); q != nullptr && q->kind != kind) {
      return Error(Errc::invalid_argument,
                   "reservation is already queued on lock " +
                       core::quote_name(n) + " by " +
                       (all ? "acquire_some" : "acquire_all"));
    }
  }
  return std::nullopt;
}

// acquire_all: every name at once or none. A reservation that waits is
// queued on every name it does not hold; the pump never grants such a
// request (Tx::pump), so the reservation takes all its names in one pass
// of its own, once it heads every queue with room.
Result<MultiOutcome> MultiStep::acquire_all() {
  bool queued = false, withdrawn = false;
  for (const auto& n : spec_.names) {
    if (Request* q = tx_.at(n).request_of(token_)) {
      queued = true;
      withdrawn = withdrawn || q->withdrawn;
    }
  }
  if (withdrawn) {
    drop_all();
    return Error(Errc::not_acquired,
                 "the reservation was withdrawn while it waited");
  }
  if (queued) return retry_all();
  const std::string* blocked = first_blocked();
  if (blocked == nullptr) {
    for (const auto& n : spec_.names) {
      if (!held(n))
        tx_.grant(n, token_, spec_.ttl.count(), cap_, spec_.label, "");
    }
    return collect();
  }
  if (mode_ == MultiMode::try_) return busy(*blocked);
  if (mode_ == MultiMode::withdraw || wait_ms_ <= 0) return ended();
  return enqueue_all();
}

// A pass of a queued acquire_all: granted on every name once its turn came
// on all of them; else it leaves every queue unless it still waits; else
// its requests stay, their deadline and heartbeat rewritten only once the
// heartbeat has less than half of waiter_timeout left (a write spared on
// most passes).
Result<MultiOutcome> MultiStep::retry_all() {
  if (heads_every_queue()) return grant_queued();
  if (mode_ != MultiMode::wait || wait_ms_ <= 0) {
    drop_all();
    return ended();
  }
  for (const auto& n : spec_.names) {
    if (Request* q = tx_.at(n).request_of(token_)) {
      if (*q->heartbeat_us < now_ + waiter_timeout_us_ / 2) {
        tx_.refresh(*q, now_ + wait_ms_ * 1000, now_ + waiter_timeout_us_);
      }
      ++out_.pending;
    }
  }
  return collect();
}

// On every name the reservation does not hold, its request is the first
// one not withdrawn, and a holder's place is free.
bool MultiStep::heads_every_queue() {
  for (const auto& n : spec_.names) {
    NameState& s = tx_.at(n);
    if (held(n)) continue;
    const Request* head = nullptr;
    for (const auto& q : s.queue) {
      if (!q.withdrawn) {
        head = &q;
        break;
      }
    }
    if (head == nullptr || head->token != token_ ||
        s.live_holders(now_) >= s.capacity) {
      return false;
    }
  }
  return true;
}

// The reservation's queued requests become leases, with the TTL and label
// they were queued with.
Result<MultiOutcome> MultiStep::grant_queued() {
  for (const auto& n : spec_.names) {
    if (Request* q = tx_.at(n).request_of(token_)) {
      // Copies: removing the request invalidates `q`.
      const std::int64_t ttl = q->ttl_ms;
      const std::string label = q->label;
      tx_.remove_request(n, q->id);
      tx_.grant(n, token_, ttl, cap_, label, "");
    }
  }
  return collect();
}

// The first name, in the request's order, that the reservation does not
// hold and that is not free; nullptr if none.
const std::string* MultiStep::first_blocked() {
  for (const auto& n : spec_.names) {
    if (!held(n) && !free(n)) return &n;
  }
  return nullptr;
}

// not_acquired for a try: `name` is not free (with its holders, if any).
Error MultiStep::busy(const std::string& name) {
  NameState& s = tx_.at(name);
  Error e(Errc::not_acquired,
          "lock " + core::quote_name(name) + " is not free (" +
              std::to_string(s.live_holders(now_)) + " of " +
              std::to_string(s.capacity) + " held, " +
              std::to_string(s.waiting(now_)) + " waiting)");
  auto hs = tx_.holder_infos(name);
  if (!hs.empty()) e.with_holders(std::move(hs));
  return e;
}

// Queues the reservation on every name it does not hold, until the end of
// the caller's wait, with a waiter heartbeat.
Result<MultiOutcome> MultiStep::enqueue_all() {
  for (const auto& n : spec_.names) {
    if (held(n)) continue;
    tx_.enqueue(n, token_, kAllKind, spec_.ttl.count(), cap_, spec_.label, "",
                now_ + wait_ms_ * 1000, now_ + waiter_timeout_us_);
    ++out_.pending;
  }
  return collect();
}

// acquire_some: every name on its own. A withdrawal leaves every queue and
// keeps what is held. Otherwise, on each name not held: a queued request
// (unless withdrawn) stays, its deadline one TTL ahead (the caller's next
// call refreshes it); a free name is granted; a busy one is queued unless
// this is a try.
Result<MultiOutcome> MultiStep::acquire_some() {
  if (mode_ == MultiMode::withdraw) {
    drop_all();
    MultiOutcome out = collect();
    out.ended = true;
    return out;
  }
  const std::int64_t ttl_ms = spec_.ttl.count();
  for (const auto& n : spec_.names) {
    NameState& s = tx_.at(n);
    if (held(n)) continue;
    if (Request* q = s.request_of(token_)) {
      if (q->withdrawn) continue;
      tx_.refresh(*q, now_ + ttl_ms * 1000, std::nullopt);
      ++out_.pending;
    } else if (free(n)) {
      tx_.grant(n, token_, ttl_ms, cap_, spec_.label, "");
    } else if (mode_ != MultiMode::try_) {
      tx_.enqueue(n, token_, kSomeKind, ttl_ms, cap_, spec_.label, "",
                  now_ + ttl_ms * 1000, std::nullopt);
      ++out_.pending;
    }
  }
  return collect();
}

MultiOutcome MultiStep::collect() {
  for (const auto& n : spec_.names) {
    NameState& s = tx_.at(n);
    for (const auto& h : s.holders) {
      if (h.token == token_) {
        out_.grants.push_back(tx_.to_grant(h, s.capacity, arrival_us_));
      }
    }
  }
  return std::move(out_);
}

void MultiStep::drop_all() {
  for (const auto& n : spec_.names) {
    if (Request* q = tx_.at(n).request_of(token_)) {
      tx_.remove_request(n, q->id);
    }
  }
  for (const auto& n : spec_.names) tx_.pump(n);
}

}  // namespace

Result<MultiOutcome> multi_step(Tx& tx, const MultiSpec& spec, MultiMode mode,
                                long long wait_ms,
                                std::int64_t waiter_timeout_us,
                                std::int64_t arrival_us) {
  return MultiStep(tx, spec, mode, wait_ms, waiter_timeout_us, arrival_us)
      .run();
}

}  // namespace baton::store::sqlstep
