// stores/baton/baton_watch.cc — see baton_watch.h.
#include "stores/baton/baton_watch.h"

#include <sys/socket.h>

#include <algorithm>
#include <mutex>
#include <utility>

#include "proto/commands.h"

namespace baton::store::baton_conn {
namespace {

using std::chrono::steady_clock;

// The longest wait sent at once (batond's limit for any wait, 7 days).
constexpr milliseconds kMaxWait{7LL * 24 * 3600 * 1000};
// How long a wait_change() naps when batond cannot be reached.
constexpr milliseconds kRetryAfter{1000};

// 1: a change since the previous answer; 0: the wait ran out.
Result<bool> read_changed(const proto::Reply& r) {
  auto v = proto::read_integer(r);
  if (!v) return v.error();
  return *v != 0;
}

class BatonWatch final : public Waitable {
 public:
  BatonWatch(std::string prefix, std::unique_ptr<Conn> armed, Connector connect,
             milliseconds request_timeout)
      : prefix_(std::move(prefix)),
        connect_(std::move(connect)),
        request_timeout_(request_timeout),
        conn_(std::move(armed)) {}

  std::optional<Grant> wait_change(Clock::time_point until,
                                   const CallContext& ctx) override {
    if (interrupted()) return std::nullopt;
    if (conn_ == nullptr) {
      // The previous connection broke: a new one, armed, and a return at
      // once (a change may have happened while none was armed).
      const Deadline d = steady_clock::now() + request_timeout_;
      auto c = connect_(d);
      if (c) {
        auto armed = arm_watch(**c, prefix_, d);
        if (armed && *armed) {
          conn_ = std::move(*c);
          return std::nullopt;
        }
      }
      // batond is not reachable (or refuses now): nap, then the caller
      // reads list() (which reports the error) and waits again.
      return Waitable::wait_change(std::min(until, ctx.now() + kRetryAfter),
                                   ctx);
    }
    const auto left =
        std::chrono::ceil<milliseconds>(ctx.cap(until) - ctx.now());
    if (left <= milliseconds::zero()) return std::nullopt;
    const milliseconds wait = std::min(left, kMaxWait);
    {
      std::lock_guard<std::mutex> lk(mu_);
      if (interrupted()) return std::nullopt;
      fd_ = conn_->fd();
    }
    auto r = conn_->call(
        [&](proto::RespWriter& w) { proto::encode_watch(w, prefix_, wait); },
        steady_clock::now() + wait + request_timeout_);
    bool shut = false;
    {
      std::lock_guard<std::mutex> lk(mu_);
      fd_ = -1;
      shut = std::exchange(shut_, false);
    }
    // Anything but batond's answer (an I/O error, an interrupt's shutdown,
    // an error reply) leaves the connection's state unknown: drop it.
    if (!r || shut || conn_->broken() || !read_changed(*r)) conn_.reset();
    return std::nullopt;
  }

  void interrupt() override {
    Waitable::interrupt();
    std::lock_guard<std::mutex> lk(mu_);
    if (fd_ >= 0) {
      // Shut down, never closed here: conn_ owns the descriptor.
      ::shutdown(fd_, SHUT_RDWR);
      fd_ = -1;
      shut_ = true;
    }
  }

 private:
  const std::string prefix_;
  const Connector connect_;
  const milliseconds request_timeout_;
  std::unique_ptr<Conn> conn_;  // the waiting thread's; null once broken
  std::mutex mu_;
  int fd_ = -1;        // mu_: conn_'s socket while a wait is in flight
  bool shut_ = false;  // mu_: interrupt() shut it down
};

}  // namespace

Result<bool> arm_watch(Conn& c, std::string_view prefix, Deadline deadline) {
  auto r = c.call(
      [&](proto::RespWriter& w) {
        proto::encode_watch(w, prefix, milliseconds::zero());
      },
      deadline);
  if (!r) return r.error();
  if (r->type == proto::Reply::Type::error &&
      r->str.starts_with("invalid_argument unknown command")) {
    return false;  // a batond older than LOCK.WATCH
  }
  auto changed = read_changed(*r);
  if (!changed) return changed.error();
  return true;
}

std::unique_ptr<Waitable> make_watch(std::string prefix,
                                     std::unique_ptr<Conn> armed,
                                     Connector connect,
                                     milliseconds request_timeout) {
  return std::make_unique<BatonWatch>(std::move(prefix), std::move(armed),
                                      std::move(connect), request_timeout);
}

}  // namespace baton::store::baton_conn
