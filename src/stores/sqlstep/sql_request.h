// stores/sqlstep/sql_request.h — the requests of the table-backed SQL
// stores (mysql://, sqlite://) as the engine drives them (baton/store.h):
// each ask, look and withdraw is one scheduling pass (one transaction) or a
// non-locking read of the rows, and a waiter naps on its store's in-process
// bell (LocalBell) until a release or withdrawal in this process rings it,
// or until the store's next look is due. A store supplies its transactions,
// its reads and its wake-ups; the mapping of the step's outcomes onto the
// engine's answers is here, once.
//
// No I/O here. Thread safety: a request belongs to one calling thread,
// except interrupt(); LocalBell is safe for concurrent use.
#ifndef BATON_STORES_SQLSTEP_SQL_REQUEST_H_
#define BATON_STORES_SQLSTEP_SQL_REQUEST_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>

#include "baton/store.h"
#include "stores/sqlstep/sql_state.h"

namespace baton::store::sqlstep {

using SteadyTime = std::chrono::steady_clock::time_point;

// The steady-clock instant by which one round trip of a call must end:
// `cap` from now, and never after the call context's deadline (I/O
// timeouts run on the steady clock; the context may run on another).
SteadyTime io_deadline(const CallContext& ctx, milliseconds cap);
// `t`, an instant on ctx's clock, on the steady clock.
SteadyTime steady_of(Clock::time_point t, const CallContext& ctx);
// With `lk` held: waits on `cv` until notified or `until`, at most 100 ms
// (timed on the system clock: libfaketime fakes the steady clock but not
// pthread_cond_clockwait). Callers re-check their condition.
void wait_slice(std::condition_variable& cv, std::unique_lock<std::mutex>& lk,
                SteadyTime until);

// In-process wake-ups: a generation that a release or withdrawal bumps,
// and the naps of waiters that wait for it to move.
class LocalBell {
 public:
  std::uint64_t generation();
  // Bumps the generation and wakes every nap.
  void ring();
  // Sleeps until `until`, until the generation differs from `seen`, or
  // until `stop` is set (and poke() called).
  void nap(SteadyTime until, std::uint64_t seen, const std::atomic<bool>& stop);
  // Wakes every nap to look at its stop flag.
  void poke();

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::uint64_t gen_ = 0;  // guarded by mu_
};

// The wait a queued row is given: what is left of the caller's, at most a
// day (every pass while its waiter lives extends it).
long long row_wait_ms(milliseconds wait_left);

// A request's naps on its store's bell: the generation it saw before its
// last look (a ring after that ends the next nap at once) and its stop
// flag.
class BellNap {
 public:
  explicit BellNap(LocalBell& bell) : bell_(bell) {}
  // Before a look or pass.
  void mark() { seen_ = bell_.generation(); }
  // Until a ring since mark(), `until` (on ctx's clock) or stop().
  void nap(Clock::time_point until, const CallContext& ctx);
  // From any thread: ends a nap in progress and every later one.
  void stop();
  bool stopped() const { return stop_.load(); }

 private:
  LocalBell& bell_;
  std::uint64_t seen_ = 0;
  std::atomic<bool> stop_{false};
};

// One acquire call's request on a SQL store.
class StepRequest : public baton::Request {
 public:
  StepRequest(const AcquireSpec& spec, LocalBell& bell);

  Result<Answer> ask(AskMode mode, milliseconds wait_left,
                     const CallContext& ctx) override;
  // A non-locking look first (granted, or nothing a pass could change
  // now), else a pass, which also refreshes the waiter's heartbeat.
  Result<Answer> look(milliseconds wait_left, const CallContext& ctx) override;
  Result<Answer> withdraw(const CallContext& ctx) override;
  // Naps on the bell until `until` (the engine's pacing, or look_at).
  std::optional<Grant> wait_change(Clock::time_point until,
                                   const CallContext& ctx) override;
  void interrupt() override;

 protected:
  // One locking pass in `mode` (one transaction; `mine` is not kept).
  virtual Result<AcquireOutcome> pass(const CallContext& ctx, MultiMode mode,
                                      long long wait_ms) = 0;
  // The non-locking look (quiet_look): the grant, or position > 0 when a
  // locking pass could change nothing now, else position 0.
  virtual Result<AcquireOutcome> peek(const CallContext& ctx) = 0;
  // When a queued request looks again if nothing wakes it (on ctx's
  // clock).
  virtual Clock::time_point next_look(const CallContext& ctx) = 0;
  // Wakes the other waiters after this request left the queue.
  virtual void ring() = 0;
  // The request ended with (granted) or without a lease.
  virtual void finished(bool granted, const CallContext& ctx) {
    (void)granted;
    (void)ctx;
  }

  // The engine's answer to a pass or look.
  Result<Answer> answer(Result<AcquireOutcome> r, const CallContext& ctx);

  const AcquireSpec spec_;
  const std::string token_;
  std::int64_t arrival_ = 0;  // store time of the first pass
  BellNap nap_;
};

// What a store gives its acquire_some / acquire_all requests.
struct MultiHooks {
  using Step = std::function<Result<MultiOutcome>(Tx&)>;
  // Runs `step` in one transaction holding every name of the request.
  std::function<Result<MultiOutcome>(const CallContext&, const Step&)> transact;
  // How long the `round`th look waits when nothing wakes it.
  std::function<milliseconds(int round)> pause;
  // Wakes the other waiters after the reservation left the queues.
  std::function<void()> ring;
  std::int64_t waiter_timeout_us = 0;
};

// One acquire_some / acquire_all call's requests on a SQL store: every
// ask, look and withdraw is one multi-name step (multi_step); waiters nap
// on the bell.
class StepMulti final : public baton::MultiRequest {
 public:
  StepMulti(const MultiSpec& spec, LocalBell& bell, MultiHooks hooks);

  Result<MultiAnswer> ask(AskMode mode, milliseconds wait_left,
                          const CallContext& ctx) override;
  Result<MultiAnswer> look(milliseconds wait_left,
                           const CallContext& ctx) override;
  Result<MultiAnswer> withdraw(const CallContext& ctx) override;
  std::optional<Grant> wait_change(Clock::time_point until,
                                   const CallContext& ctx) override;
  void interrupt() override;

 private:
  Result<MultiOutcome> step(const CallContext& ctx, MultiMode mode,
                            long long wait_ms);
  Result<MultiAnswer> answer(Result<MultiOutcome> r, const CallContext& ctx);

  const MultiSpec spec_;
  const MultiHooks hooks_;
  std::int64_t arrival_ = 0;  // store time of the first step
  int round_ = 0;
  BellNap nap_;
};

}  // namespace baton::store::sqlstep

#endif  // BATON_STORES_SQLSTEP_SQL_REQUEST_H_
