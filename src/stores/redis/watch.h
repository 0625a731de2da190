// stores/redis/watch.h — the change feed (Store::watch) of the redis:// and
// redlock:// stores (internal): Redis keyspace notifications.
//
// Every change of a lock — a grant, a queued or withdrawn request, a
// release, an extend — is one script that SETs or DELetes the lock's key
// `<prefix>l:<name>` (docs/stores/redis.md, "Key layout"), and the key
// expires (PXAT) once its last lease and waiter have run out. A server with
// keyspace notifications on publishes each of those on the channel
// `__keyspace@<db>__:<key>`; the feed PSUBSCRIBEs to the channels of the
// keys under the watched prefix on a connection of its own and returns at
// any message. The lock calls do nothing for it: the server publishes (to
// nobody, at the cost of a lookup) whether or not anyone listens.
//
// A lease that runs out is not a write (the key expires a second after its
// last lease, and a semaphore's other holders keep it): the feed also
// returns when the earliest lease under the prefix runs out, which it reads
// with the store's list() when armed and at each return (the watcher's
// cost, as is the caller's own list()).
//
// Notifications are off by default, and the feed never turns them on (a
// server's configuration is its operator's): arming reads
// `CONFIG GET notify-keyspace-events`, and a server without the classes
// the lock keys need (kNotifyEvents) — or that refuses CONFIG — gets no
// feed: watch() answers a null pointer and the caller polls.
//
// Thread safety: the feed is a Waitable (one waiting thread; interrupt()
// from any).
#ifndef BATON_STORES_REDIS_WATCH_H_
#define BATON_STORES_REDIS_WATCH_H_

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "baton/store.h"
#include "stores/redis/instance.h"

namespace baton::store::redis {

// The keyspace event classes the feed needs: K (keyspace channels), $ (SET
// of a string key), g (DEL) and x (expired). "KA" (every class) does too.
inline constexpr const char* kNotifyEvents = "K$gx";

// How many locks under the prefix the feed reads the lease expiries of.
inline constexpr std::size_t kWatchedLocks = 1000;

// True if `flags` (CONFIG GET notify-keyspace-events) has every class of
// kNotifyEvents (A stands for g$lshzxet).
bool notifications_on(std::string_view flags);

// `text` with Redis's glob characters (* ? [ ] \) escaped: it matches
// itself only.
std::string glob_escape(std::string_view text);

// The PSUBSCRIBE pattern of the keyspace channels of the lock keys of the
// names starting with `name_prefix`, under the store's `key_prefix`, in
// database `db`.
std::string keyspace_pattern(int db, std::string_view key_prefix,
                             std::string_view name_prefix);

// The store's list() of the watched prefix: the feed reads the earliest
// lease expiry from it when it is armed and at each return.
using Lister =
    std::function<Result<std::vector<LockInfo>>(const CallContext& ctx)>;

// Arms a feed on `instances`, counting the servers whose notifications
// are on: at least `need` of them (redis://: 1; redlock://: a quorum) give
// a feed over those; fewer give a null pointer. Fewer than `need` servers
// answering at all is their connection error.
Result<std::unique_ptr<Waitable>> watch_keyspace(
    const std::vector<Instance*>& instances, std::string_view prefix,
    std::size_t need, Lister lister, const CallContext& ctx);

}  // namespace baton::store::redis

#endif  // BATON_STORES_REDIS_WATCH_H_
