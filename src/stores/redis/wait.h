// stores/redis/wait.h — the waiting loop shared by every blocking call of
// the redis:// and redlock:// stores (internal).
//
// A blocking call runs "rounds" (one script per instance each) until a
// round decides. Between rounds the thread sleeps until its owner token is
// pushed (pub/sub, see Subscriber), or a jittered re-check period passes, or
// the round's own nap hint (e.g. the holder's expiry) is due. The store's
// inbox channels (Instance::subscribe_inbox) are subscribed only after the
// first round queued the request, so an uncontended acquire never touches
// pub/sub; when a subscription became
// active after that round was sent (a grant could have been published
// before), the next round runs at once. A round that reports a split
// (Redlock: granted on fewer than a quorum) for longer than a jittered
// split timeout is requeued (Redlock: its grants given back, its ticket
// kept). Every sleep is capped by the call deadline
// (stores/call_deadline.h); once it passed, run() returns `timeout`.
//
// Thread safety: a Waiter belongs to one calling thread.
#ifndef BATON_STORES_REDIS_WAIT_H_
#define BATON_STORES_REDIS_WAIT_H_

#include <algorithm>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "stores/call_deadline.h"
#include "stores/redis/common.h"
#include "stores/redis/instance.h"

namespace baton::store::redis {

// A round that did not decide: keep waiting.
struct Keep {
  bool expired = false;         // the script answered timeout: stop waiting
  bool split = false;           // Redlock: granted on fewer than a quorum
  milliseconds nap = kForever;  // wake no later than this (re-check sooner)
};

template <typename T>
using Round = std::variant<Result<T>, Keep>;

// How long a Redlock split may last before the waiter requeues: 0.3–0.9 s.
inline milliseconds split_timeout() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  return milliseconds(std::uniform_int_distribution<int>(300, 900)(rng));
}

class Waiter {
 public:
  // `key`: the owner token (or reservation) pushes are addressed to;
  // `instances`: where the locks waited on live.
  Waiter(Notifier& notifier, std::string key, std::vector<Instance*> instances)
      : notifier_(notifier),
        key_(std::move(key)),
        instances_(std::move(instances)),
        slot_(notifier_.enter(key_)) {}
  ~Waiter() {
    if (subscribed_) {
      for (Instance* i : instances_) i->unsubscribe_inbox();
    }
    notifier_.leave(key_);
  }
  Waiter(const Waiter&) = delete;
  Waiter& operator=(const Waiter&) = delete;

  // The payload of the last push to this waiter ("" if none since the last
  // call): a round may use a grant carried by the message.
  std::string take_payload() { return notifier_.take_payload(*slot_); }
  // Every push since the last take, with the subscriber it came from.
  std::vector<Notifier::Push> take_pushes() {
    return notifier_.take_pushes(*slot_);
  }

  // Runs rounds until one returns a result (returned) or the wait ends
  // (nullopt: the caller withdraws). `round(first, left_ms)`: `first` is
  // true for the first round and after a requeue; `left_ms` is the wait
  // left (0 once `end` passed). With `stop_at_end`, no round runs after
  // `end`. `requeue()` gives up a split's partial grants.
  template <typename T, typename R, typename Q>
  std::optional<Result<T>> run(Steady::time_point end, bool stop_at_end,
                               R&& round, Q&& requeue) {
    Steady::time_point split_since{};  // epoch: no split
    for (bool first = true;;) {
      const std::uint64_t seen = notifier_.gen(*slot_);
      const std::int64_t left = ms_left(end);
      // Rule 7: past the call deadline no round runs (the caller has
      // given up; it withdraws the request by token).
      if (store::call_deadline_passed()) {
        return Result<T>(Error(Errc::timeout,
                               "no answer from the store before the call "
                               "deadline (end of the wait + grace)"));
      }
      if (stop_at_end && left <= 0) return std::nullopt;
      const auto sent = Steady::now();
      Round<T> r = round(std::exchange(first, false), left);
      if (auto* done = std::get_if<Result<T>>(&r)) return std::move(*done);
      const Keep keep = std::get<Keep>(r);
      if (keep.expired) return std::nullopt;
      if (!subscribed_ && subscribe(sent, end)) continue;  // re-check now
      if (keep.split) {
        if (split_since == Steady::time_point{}) {
          split_since = Steady::now();
        } else if (Steady::now() - split_since > split_timeout()) {
          requeue();  // give the partial grants back
          split_since = {};
          first = true;
          continue;
        }
      } else {
        split_since = {};
      }
      const milliseconds nap =
          std::max(milliseconds(1), std::min(keep.nap, recheck_period()));
      notifier_.wait(
          *slot_, seen,
          store::cap_to_call_deadline(std::min(end, Steady::now() + nap)));
    }
  }

 private:
  // Subscribes the inbox on every instance (in parallel: all requests
  // first, then the confirmations). True if a round must run at once: some
  // subscription was not active before `sent`, so a push may be missed.
  bool subscribe(Steady::time_point sent, Steady::time_point end) {
    subscribed_ = true;
    for (Instance* i : instances_) i->subscribe_inbox();
    const auto until = store::cap_to_call_deadline(
        std::min(end, Steady::now() + milliseconds(250)));
    bool recheck = false;
    for (Instance* i : instances_) {
      auto since = i->await_inbox(until);
      if (!since || *since >= sent) recheck = true;
    }
    return recheck;
  }

  Notifier& notifier_;
  const std::string key_;
  const std::vector<Instance*> instances_;
  std::shared_ptr<Notifier::Slot> slot_;
  bool subscribed_ = false;
};

}  // namespace baton::store::redis

#endif  // BATON_STORES_REDIS_WAIT_H_
