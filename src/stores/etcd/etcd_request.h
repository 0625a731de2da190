// stores/etcd/etcd_request.h — one acquire on etcd:// as a Request
// (baton/store.h), shared by etcd_acquire.cc (the ask, the queue and the
// grant) and etcd_acquire_wait.cc (the wait for a change and the look
// after it). Internal to the store.
#ifndef BATON_STORES_ETCD_ETCD_REQUEST_H_
#define BATON_STORES_ETCD_ETCD_REQUEST_H_

#include <optional>
#include <string>

#include "stores/etcd/etcd_impl.h"

namespace baton::store::etcd {

// What the last wait_change() saw, for the look() that follows it.
enum class Wake {
  none,        // nothing known: renew the lease if due, read the queue
  read,        // the queue was read after the watch was opened
  ahead_gone,  // the key just ahead went (a mutex or a shared request)
  carried,     // the watch event carried the grant (carried_)
};

class EtcdRequest final : public Request {
 public:
  EtcdRequest(EtcdStore& s, const AcquireSpec& spec)
      : s_(s), spec_(spec), dir_(s.lock_dir(spec.name)) {}
  ~EtcdRequest() override { drop_spare(); }

  Result<Answer> ask(AskMode mode, milliseconds wait_left,
                     const CallContext& ctx) override;
  Result<Answer> look(milliseconds wait_left, const CallContext& ctx) override;
  Result<Answer> withdraw(const CallContext& ctx) override;
  std::optional<Grant> wait_change(Clock::time_point until,
                                   const CallContext& ctx) override;
  void interrupt() override {
    Request::interrupt();
    watch_.cancel();
  }

 private:
  // The value of its key, granted (`held`) or waiting.
  Value value(bool held) const;
  Status own_lease(const CallContext& ctx);
  void drop_spare();
  Result<std::optional<Answer>> fast_path(const CallContext& ctx);
  Result<Answer> settle(const CallContext& ctx);
  Result<std::optional<Answer>> join(bool* changed, const CallContext& ctx);
  Status enqueue(const CallContext& ctx);
  Result<bool> own_waiting_lease(const CallContext& ctx);
  Result<Answer> vanished(const CallContext& ctx);
  Result<Answer> handoff(const CallContext& ctx);
  bool needs_keepalive() const;
  Result<Answer> granted(Entry e, const CallContext& ctx);
  Result<Answer> renewed(const Entry& e, const CallContext& ctx);
  Answer queued(int pos) const;
  void kept_alive(SteadyTime at, const CallContext& ctx);
  void end_key(bool gone) { s_.key_done(spec_.name, spec_.token, gone); }
  // The key a waiter at `pos` of q_ watches: the key just ahead (a mutex),
  // the nearest exclusive request ahead (a shared request); "" = the
  // lock's range (a semaphore, or nothing ahead).
  std::string ahead_of(int pos) const;
  // Whether q_ shows this request still waiting behind `ahead`.
  bool still_behind(const std::string& ahead) const;

  EtcdStore& s_;
  const AcquireSpec spec_;
  const std::string dir_;
  std::string key_;  // the request's key (chosen at the first ask)
  bool try_only_ = false;
  SteadyTime start_{};  // just before the first ask: valid_for's start
  // A lease this request got that no key holds (revoked when unused).
  std::int64_t spare_ = 0;
  bool spare_shared_ = false;
  std::int64_t granted_s_ = 0;  // the length etcd gave the waiter's lease
  Queue q_;                     // the last read of the lock's queue
  bool queued_ = false;         // its key is in the queue (made or found)
  Entry me_;                    // its key as last read (queued_)
  bool waited_ = false;         // it waited for a change
  // The waiter's lease: last renewed (sent) at, and the next renewal on
  // the call's clock (the queued answers' look_at).
  SteadyTime last_keepalive_{};
  Clock::time_point keepalive_at_ = Clock::time_point::max();
  Wake wake_ = Wake::none;
  Entry carried_;
  WatchSlot watch_;
  std::string watched_ahead_;  // what watch_ covers, and until when
  Clock::time_point watch_until_{};
};

}  // namespace baton::store::etcd

#endif  // BATON_STORES_ETCD_ETCD_REQUEST_H_
