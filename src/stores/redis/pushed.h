// stores/redis/pushed.h — the grants pushed to one Redlock waiter by its
// instances (internal; see "Blocking acquire" in docs/stores/redis.md).
//
// When a release grants the waiter on an instance, that instance publishes
// the grant (lease token, fencing token, expiry and its own time) to the
// waiter's inbox. Once every instance has pushed a grant of this request,
// those grants are the waiter's round: no refresh round on all instances.
//
// A push from instance k counts only if k made it after its latest
// `queued` reply to this waiter (compared on k's own clock: the push's
// now_us > the reply's now_us), so the grant happened after that round was
// sent, and the lease is counted from that send time (as a round's reply
// is). Any other reply from k (granted, busy, an error: a round that may
// have been undone by a clean-up) disables k's pushes until k answers
// `queued` again, so a push of a grant that was given back (release_all,
// a split's yield) is never used.
//
// Pushes from a quorum (but not every instance) are a grant too, as a
// round with the same replies would be, once the others had 1 ms to come:
// instances that queued waiters in different orders (before a refresh
// round aligned their tickets) grant different waiters, and the missing
// push then never comes. Anything else (a withdrawal, a message of another
// lock, pushes from fewer than a quorum after a 5 ms wait) falls back to a
// refresh round.
//
// Thread safety: belongs to one waiting thread.
#ifndef BATON_STORES_REDIS_PUSHED_H_
#define BATON_STORES_REDIS_PUSHED_H_

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "stores/redis/common.h"
#include "stores/redis/conn.h"
#include "stores/redis/instance.h"

namespace baton::store::redis {

class Pushed {
 public:
  enum class Use {
    none,    // run a refresh round
    wait,    // some instances pushed: wait a moment for the others
    quorum,  // a quorum pushed and the others did not come: replies()
    all      // every instance pushed: replies() is the round
  };

  explicit Pushed(std::size_t n) : last_(n), got_(n) {}

  // Records each reply of a round sent at `sent`: a `queued` reply (with
  // the instance's time) enables later pushes of that instance; any other
  // outcome disables them.
  void round(const std::vector<Result<AcqReply>>& replies,
             Steady::time_point sent) {
    for (std::size_t k = 0; k < replies.size() && k < last_.size(); ++k) {
      const auto& r = replies[k];
      if (r.ok() && r->kind == AcqReply::Kind::queued) {
        last_[k] = Queued{r->now_us, sent};
      } else {
        last_[k].reset();
      }
    }
  }

  // Takes the pushes delivered since the last call. `index_of(from)` maps
  // a push's source to its instance (>= n: unknown).
  template <typename F>
  Use take(std::vector<Notifier::Push> pushes, std::string_view name,
           std::size_t quorum, F&& index_of) {
    bool other = false;
    for (auto& p : pushes) {
      const std::size_t k = index_of(p.from);
      auto g = parse_pushed_grant(p.payload, name);
      if (k >= got_.size() || !g) {
        other = true;  // a withdrawal, a reservation's grant, ...
        continue;
      }
      if (!last_[k] || g->now_us <= last_[k]->now_us) continue;  // stale
      got_[k] = std::move(*g);
    }
    if (other) return Use::none;
    const auto have = static_cast<std::size_t>(std::count_if(
        got_.begin(), got_.end(), [](const auto& g) { return g.has_value(); }));
    if (have == got_.size()) return Use::all;
    if (have == 0) return Use::none;
    const auto now = Steady::now();
    if (!first_push_) first_push_ = now;
    if (have >= quorum) {
      return now < *first_push_ + kWaitForQuorumRest ? Use::wait : Use::quorum;
    }
    return now < *first_push_ + kWaitForQuorum ? Use::wait : Use::none;
  }

  // The pushed grants as a round's replies (after take() said all or
  // quorum): an instance that pushed nothing answers as not granted.
  std::vector<Result<AcqReply>> replies() const {
    std::vector<Result<AcqReply>> out;
    for (const auto& g : got_) {
      if (g) {
        out.emplace_back(*g);
      } else {
        out.emplace_back(Error(Errc::unavailable, "no grant was pushed"));
      }
    }
    return out;
  }
  // The earliest send time of the rounds the pushes are counted from.
  Steady::time_point since() const {
    Steady::time_point t = Steady::time_point::max();
    for (const auto& q : last_) {
      if (q) t = std::min(t, q->sent);
    }
    return t;
  }
  // How long to nap while waiting for the remaining pushes.
  milliseconds nap() const { return milliseconds(1); }
  void clear() {
    got_.assign(got_.size(), std::nullopt);
    first_push_.reset();
  }

 private:
  struct Queued {
    std::int64_t now_us;      // the instance's time of its `queued` reply
    Steady::time_point sent;  // when that round was sent
  };
  std::vector<std::optional<Queued>> last_;
  std::vector<std::optional<AcqReply>> got_;
  // When the first push of this wait came.
  std::optional<Steady::time_point> first_push_;
  static constexpr milliseconds kWaitForQuorumRest{1};
  static constexpr milliseconds kWaitForQuorum{5};
};

}  // namespace baton::store::redis

#endif  // BATON_STORES_REDIS_PUSHED_H_
