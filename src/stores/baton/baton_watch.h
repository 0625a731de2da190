// stores/baton/baton_watch.h — baton://'s change feed (Store::watch) on
// batond's LOCK.WATCH (docs/protocol.md).
//
// The feed owns one connection of its own (never the pool's, so lock
// calls are never queued behind a parked watch). batond keeps the feed's
// state on that connection: LOCK.WATCH prefix 0 arms it, and each
// wait_change() sends LOCK.WATCH prefix <wait left>, which batond answers
// :1 once the table changed since its previous answer (at once if it
// already had) or :0 when the wait ran out. batond takes the new
// starting point as it answers, so a change made between two waits is
// answered by the second: none is lost. interrupt() shuts the socket down
// (the parked reply then ends at once); a connection that broke is
// replaced by the next wait_change(), which then returns at once (a
// change may have been missed meanwhile).
//
// Thread safety: wait_change() on one thread; interrupt() from any.
#ifndef BATON_STORES_BATON_BATON_WATCH_H_
#define BATON_STORES_BATON_BATON_WATCH_H_

#include <functional>
#include <memory>
#include <string>

#include "baton/store.h"
#include "stores/baton/conn.h"

namespace baton::store::baton_conn {

// A new authenticated connection by the deadline (the store's take()).
using Connector = std::function<Result<std::unique_ptr<Conn>>(Deadline)>;

// Arms a feed over `prefix` on `c` (LOCK.WATCH prefix 0). False if
// batond is older than LOCK.WATCH (it refused the command by name,
// changing nothing: `c` is still good); an error for a refusal (a bad
// prefix, permission_denied) or a broken connection.
Result<bool> arm_watch(Conn& c, std::string_view prefix, Deadline deadline);

// The feed over `prefix` on `armed` (arm_watch answered true on it).
std::unique_ptr<Waitable> make_watch(std::string prefix,
                                     std::unique_ptr<Conn> armed,
                                     Connector connect,
                                     milliseconds request_timeout);

}  // namespace baton::store::baton_conn

#endif  // BATON_STORES_BATON_BATON_WATCH_H_
