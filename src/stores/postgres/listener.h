// stores/postgres/listener.h — the store's one LISTEN connection.
//
// A dedicated connection LISTENs on "<schema>_wake". Every scheduling pass
// that grants a queued request (or drops one) sends NOTIFY with the
// request's owner token / reservation as payload; the listener wakes the
// calls of this process waiting on that token. A plain single-name grant's
// payload also carries the lease ("<token>:<fencing>:<ttl_ms>:<expires_us>:
// <name>"; NOTIFY is delivered only after the granting commit), so the
// waiter returns it without another round trip (Slot::take_grant). When the
// connection is lost it reconnects with backoff and wakes every waiter (a
// notification may have been missed); waiters also re-check on a short jittered
// timer, so a missed notification costs at most one re-check interval.
//
// Who reads the connection: while a call waits, it reads the connection
// itself (the "leader"; one at a time), so the notification for it wakes
// its own thread straight from the socket instead of a background thread
// that then wakes it. Other waiting calls sleep on their condition variable
// and are woken by whoever reads. With no leader, the background thread
// reads; it also owns connecting, LISTEN and reconnecting.
//
// Thread safety: safe for concurrent use; one background thread.
#ifndef BATON_STORES_POSTGRES_LISTENER_H_
#define BATON_STORES_POSTGRES_LISTENER_H_

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "baton/lease.h"
#include "stores/postgres/pg_conn.h"

namespace baton::store::pg {

class Listener {
 public:
  Listener(Pool& pool, std::string channel);
  ~Listener();
  Listener(const Listener&) = delete;
  Listener& operator=(const Listener&) = delete;

  // Waits (at most until `deadline`) for the first LISTEN to be active.
  bool wait_ready(TimePoint deadline);

  // One waiting call, registered on its token for its lifetime.
  class Slot {
   public:
    Slot(Listener& l, const OwnerToken& token);
    ~Slot();
    Slot(const Slot&) = delete;
    Slot& operator=(const Slot&) = delete;
    // Sleeps until notified or woken (true) or `until` (false). A
    // notification that arrived since the last wait() returns at once.
    bool wait(TimePoint until);
    // Makes the wait in progress (or the next one) return at once; from
    // any thread.
    void wake();

    // A single-name grant announced by a notification since the last call
    // (the scheduling pass's payload), taken out of the slot.
    struct Granted {
      std::string name;
      std::int64_t fencing = 0;
      std::int64_t ttl_ms = 0;
      std::int64_t expires_us = 0;
    };
    std::optional<Granted> take_grant();

   private:
    friend class Listener;
    Listener& l_;
    OwnerToken token_;
    bool woken_ = false;              // guarded by l_.mu_
    std::optional<Granted> granted_;  // guarded by l_.mu_
    std::condition_variable cv_;
  };

 private:
  void run();
  // Reads the connection as the leader `s` until `s` is woken, `end`
  // passes or the connection fails (false).
  bool lead(PgConn& conn, Slot& s, TimePoint end);
  // Reads what arrived and dispatches it (`reader`: the leading slot, or
  // nullptr for the background thread); false if the connection broke.
  bool read(PgConn& conn, const Slot* reader);
  void dispatch(const char* payload, const Slot* reader);
  void wake_all();  // caller holds mu_
  static void signal(int fd);
  static void drain(int fd);

  Pool& pool_;
  const std::string channel_;
  std::mutex mu_;
  std::condition_variable ready_cv_;
  bool ready_ = false;                      // guarded by mu_
  std::multimap<OwnerToken, Slot*> slots_;  // guarded by mu_
  std::shared_ptr<PgConn> conn_;            // guarded by mu_; null while down
  Slot* leader_ = nullptr;                  // guarded by mu_
  bool broken_ = false;                     // guarded by mu_: a leader saw
                                            // conn_ fail
  std::mutex read_mu_;                      // one reader of the PGconn
  std::atomic<bool> stop_{false};
  int kick_fd_ = -1;  // eventfd: wakes run() (a leader came or went; stop)
  int lead_fd_ = -1;  // eventfd: wakes the leader (woken by another reader)
  std::thread thread_;
};

}  // namespace baton::store::pg

#endif  // BATON_STORES_POSTGRES_LISTENER_H_
