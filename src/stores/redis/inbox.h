// stores/redis/inbox.h — the wake-up source of one waiting request of the
// redis:// or redlock:// store (internal).
//
// A queued request is told of its grant or withdrawal by a message on its
// store's inbox channel on each instance (Instance::subscribe_inbox), which
// the store's Subscriber hands to the Notifier slot of the request's owner
// token. The inbox is subscribed only after a reply left the request
// queued, so an uncontended acquire never touches pub/sub; when a
// subscription became active after that script was sent, a message may
// have been published before it, and the request looks again at once.
//
// Thread safety: belongs to one request (one calling thread), except
// poke(), which any thread may call.
#ifndef BATON_STORES_REDIS_INBOX_H_
#define BATON_STORES_REDIS_INBOX_H_

#include <algorithm>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "stores/redis/common.h"
#include "stores/redis/conn.h"
#include "stores/redis/instance.h"

namespace baton::store::redis {

class Inbox {
 public:
  // `key`: the owner token (or reservation) messages are addressed to;
  // `instances`: where the request waits.
  Inbox(Notifier& notifier, std::string key, std::vector<Instance*> instances)
      : notifier_(notifier),
        key_(std::move(key)),
        inst_(std::move(instances)) {}
  ~Inbox() {
    if (subscribed_) {
      for (Instance* i : inst_) i->unsubscribe_inbox();
    }
    if (slot_) notifier_.leave(key_);
  }
  Inbox(const Inbox&) = delete;
  Inbox& operator=(const Inbox&) = delete;

  // Before a script that may queue the request or report its state: the
  // messages so far are superseded by its reply; those that arrive from
  // now on wake the next wait().
  void before_send() {
    if (!slot_) {
      auto slot = notifier_.enter(key_);
      std::lock_guard<std::mutex> lk(mu_);
      slot_ = std::move(slot);
    }
    seen_ = notifier_.gen(*slot_);
    (void)notifier_.take_pushes(*slot_);
    sent_ = Steady::now();
  }

  // After a reply that left the request queued: subscribes the inbox on
  // every instance (once; all requests first, then the confirmations, at
  // most 250 ms). True if the request must look again at once: some
  // subscription was not active before the script was sent.
  bool subscribe(const CallContext& ctx) {
    if (subscribed_) return false;
    subscribed_ = true;
    for (Instance* i : inst_) i->subscribe_inbox();
    const auto until = std::min(steady_at(ctx, ctx.deadline()),
                                Steady::now() + milliseconds(250));
    bool recheck = false;
    for (Instance* i : inst_) {
      auto since = i->await_inbox(until);
      if (!since || *since >= sent_) recheck = true;
    }
    return recheck;
  }

  // Waits until a message arrives (since before_send() or the last wait),
  // `until`, or poke(); returns the messages (none on a timeout or poke).
  template <typename Stopped>
  std::vector<Notifier::Push> wait(Steady::time_point until,
                                   Stopped&& stopped) {
    if (!slot_ || stopped()) return {};
    seen_ = notifier_.wait(*slot_, seen_, until);
    return notifier_.take_pushes(*slot_);
  }

  // Wakes a wait() in progress (or the next one) at once.
  void poke() {
    std::lock_guard<std::mutex> lk(mu_);
    if (slot_) notifier_.poke(*slot_);
  }

 private:
  Notifier& notifier_;
  const std::string key_;
  const std::vector<Instance*> inst_;
  std::mutex mu_;  // guards slot_'s assignment against poke()
  std::shared_ptr<Notifier::Slot> slot_;  // entered by the first send
  std::uint64_t seen_ = 0;
  Steady::time_point sent_{};
  bool subscribed_ = false;
};

// A Request or MultiRequest (Base) whose wake-up source is its inbox.
// wait_change() returns at the first message (a reservation's message
// carries no grant); single-lock requests override it to use the grant a
// message carries.
template <typename Base>
class InboxRequest : public Base {
 public:
  std::optional<Grant> wait_change(Clock::time_point until,
                                   const CallContext& ctx) override {
    (void)messages(until, ctx);
    return std::nullopt;
  }
  void interrupt() override {
    Waitable::interrupt();
    inbox_.poke();
  }

 protected:
  InboxRequest(Notifier& notifier, std::string key,
               std::vector<Instance*> instances)
      : inbox_(notifier, std::move(key), std::move(instances)) {}

  // The messages that came by `until` (on ctx's clock), or none.
  std::vector<Notifier::Push> messages(Clock::time_point until,
                                       const CallContext& ctx) {
    return inbox_.wait(steady_at(ctx, ctx.cap(until)),
                       [this] { return this->interrupted(); });
  }

  Inbox inbox_;
};

}  // namespace baton::store::redis

#endif  // BATON_STORES_REDIS_INBOX_H_
