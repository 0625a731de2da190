// stores/etcd/etcd_impl.h — the etcd:// store's internals, shared by its
// source files (etcd_store.cc: the descriptor, extend, release, describe,
// list, counters, the lease thread; etcd_queue.cc: reading and claiming
// the queue; etcd_acquire.cc: one acquire's Request; etcd_multi.cc:
// acquire_some / acquire_all; etcd_watch.cc: the change feed).
// docs/stores/etcd.md explains the design.
//
// Every call that does I/O takes the CallContext of the call it serves
// and passes it to the gRPC call (its deadline bounds the RPC).
//
// Thread safety: EtcdStore is safe for concurrent use (Store contract).
#ifndef BATON_STORES_ETCD_ETCD_IMPL_H_
#define BATON_STORES_ETCD_ETCD_IMPL_H_

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "baton/options.h"
#include "baton/store.h"
#include "stores/etcd/etcd_conn.h"
#include "stores/etcd/etcd_entry.h"

namespace baton::store::etcd {

// Rounds of one ask or look that meet keys changed under them (a join, a
// claim that lost a race, a key taken by an older request) before they let
// the engine call again.
inline constexpr int kRounds = 8;

struct EtcdOptions {
  Conn::Options conn;
  std::string prefix = "baton";  // every key starts with "<prefix>/"
  std::string url;               // safe URL for errors
  // lease=shared (default): a key granted at once shares a lease with
  // the store's other keys of the same length granted close together;
  // lease=own: every key gets a lease of its own (docs/stores/etcd.md).
  bool share_leases = true;
  // The server's --max-txn-ops (etcd's default 128): acquire_all and
  // acquire_some read, queue and claim their names in one transaction each,
  // so more names than this are refused before anything is written.
  std::size_t max_txn_ops = 128;
};

// Seconds of the etcd lease behind a TTL: rounded up to whole seconds
// (etcd raises it further to its minimum).
std::int64_t lease_seconds(milliseconds ttl);
// How old the shared lease may be for a grant of `ttl` to join it: the
// grant's validity is shortened by up to this (min(250 ms, ttl / 10)).
milliseconds shared_window(milliseconds ttl);
// The shortest TTL whose keys may share a lease.
inline constexpr milliseconds kShareFrom{1000};
// How often a waiter renews the etcd lease of its key: a third of its
// length (at least 100 ms).
inline milliseconds keepalive_every(std::int64_t lease_s) {
  return std::max(milliseconds(100), milliseconds(lease_s * 1000 / 3));
}

class EtcdStore final : public baton::Store {
 public:
  EtcdStore(EtcdOptions options, std::unique_ptr<Conn> conn);
  ~EtcdStore() override;

  std::unique_ptr<Request> request(const AcquireSpec& spec) override;
  std::unique_ptr<MultiRequest> request_multi(const MultiSpec& spec) override;
  Result<Grant> extend(std::string_view name, const OwnerToken& token,
                       milliseconds ttl, const CallContext& ctx) override;
  Result<ReleaseResult> release(std::string_view name, const OwnerToken& token,
                                const CallContext& ctx) override;
  Result<LockInfo> describe(std::string_view name,
                            const CallContext& ctx) override;
  Result<std::vector<LockInfo>> list(std::string_view prefix, std::size_t limit,
                                     const CallContext& ctx) override;
  Result<std::int64_t> counter_get(std::string_view name,
                                   const CallContext& ctx) override;
  Result<std::int64_t> counter_add(std::string_view name, std::int64_t delta,
                                   const CallContext& ctx) override;
  Result<std::int64_t> counter_take(std::string_view name, std::int64_t n,
                                    const CallContext& ctx) override;
  std::string safe_url() const override { return options_.url; }
  bool supports_shared() const override { return true; }
  // Every change a waiter waits for is pushed by its watch (the delete of
  // the key ahead, a put of its own key, a broken stream), and its answers
  // carry the next keep-alive as look_at: the engine never needs to pace
  // re-checks. Longer than any keep-alive interval, so that a wait's end
  // is always the end of the wait or the next keep-alive.
  milliseconds recheck_interval() const override { return kMaxTtl; }
  // The change feed: one etcd Watch on the key range of the locks under
  // `prefix`, read by a thread of the feed's own (etcd_watch.cc).
  Result<std::unique_ptr<Waitable>> watch(std::string_view prefix,
                                          const CallContext& ctx) override;

  // ---- shared by the source files (and the store's tests) ----
  const EtcdOptions& options() const { return options_; }
  // "<prefix>/l/<escaped name>/": the lock's request keys.
  std::string lock_dir(std::string_view name) const;
  // A request's identity in this store's maps (not a key in etcd).
  std::string id_of(std::string_view name, const OwnerToken& token) const {
    return lock_dir(name) + token.to_string();
  }
  // The key a request of `token` on `name` is written under (docs/stores/
  // etcd.md, "Key layout"): the one this store chose for it before (a
  // retry), else one of this store's keys of the lock that it deleted
  // itself, else a new one. Keys are reused so that a busy lock does not
  // leave a dead key per request in etcd's index, which every compare and
  // read over the lock's range walks until a compaction.
  std::string key_for(std::string_view name, const OwnerToken& token);
  // A key of this store's that no request holds: a new one.
  std::string new_key(std::string_view name, const OwnerToken& token);
  // The key this store chose for the request (nullopt: none known, e.g. a
  // request of another store, or one that ended).
  std::optional<std::string> known_key(std::string_view name,
                                       const OwnerToken& token);
  // Records that the request is under `key` (a retry found it there).
  void key_is(std::string_view name, const OwnerToken& token,
              const std::string& key);
  // The request ended. `gone`: its key is absent from etcd (this store
  // deleted it, or never created it), so a later request may reuse it.
  void key_done(std::string_view name, const OwnerToken& token, bool gone);
  // The lock's requests in create-revision order.
  Result<Queue> read_queue(std::string_view name, const CallContext& ctx);
  // Several locks' queues read at one revision (one transaction).
  Result<std::vector<Queue>> read_queues(const std::vector<std::string>& names,
                                         const CallContext& ctx);
  // One key (nullopt: missing or not a request key). `serializable`: as
  // the member answering has it (no round of the leader; may be behind).
  Result<std::optional<Entry>> read_entry(std::string_view name,
                                          const OwnerToken& token,
                                          const CallContext& ctx,
                                          bool serializable = false);
  // Grants q.entries[pos] (a single request whose slots, counted in q, are
  // free): one transaction marking it held, only if its key is the same
  // (create revision). Nothing else needs comparing: requests ahead only
  // leave, later keys are behind it, and a grant behind it counted it as
  // taken (docs/stores/etcd.md, "The queue"). Its revision is the fencing
  // token. nullopt: the key changed (read again).
  Result<std::optional<Entry>> claim(const Queue& q, std::size_t pos,
                                     const CallContext& ctx);
  // The claim of a mutex request `me` (capacity 1): one transaction grants
  // it if no key of the lock was created before it (it is first in line)
  // and reads the queue into *q if not — a waiter woken by the delete of
  // the key ahead needs no read first.
  Result<std::optional<Entry>> claim_first(const Entry& me, Queue* q,
                                           const CallContext& ctx);
  // The claim of a shared request `me` woken by the delete of the nearest
  // exclusive request ahead of it (rule 18): one transaction grants it if
  // its key is the same and none of the exclusive requests that were ahead
  // of it in *q (the last read) exists any more, and reads the queue into
  // *q if not. Keys created later are behind it, so they cannot block it.
  Result<std::optional<Entry>> claim_shared(const Entry& me, Queue* q,
                                            const CallContext& ctx);
  // Deletes e's key only if it is still the same key (create revision).
  // True if this call deleted it. `revoke`: then revoke its lease in the
  // background (a withdrawn waiter's lease is left to its waiter, which
  // tells a withdrawal from an expiry by it).
  Result<bool> remove(const Entry& e, const CallContext& ctx,
                      bool revoke = true);
  // Revokes lease `id` in the background (it has no key left to keep).
  void revoke_later(std::int64_t id);
  // Renews lease `id` in the background (a granted waiter's, off the
  // handoff's path).
  void keep_alive_later(std::int64_t id);
  // A lease of `secs` seconds for a key created held: the store's shared
  // lease of that length if its grant was sent within shared_window(ttl)
  // of now, else a new one (then the shared one). *sent: when its grant
  // was sent (the key's validity runs from then). A shared lease is never
  // kept alive nor revoked: it ends at its own TTL, and with it every key
  // on it that was not moved to a lease of its own by an extend.
  Result<std::int64_t> shared_lease(std::int64_t secs, milliseconds ttl,
                                    SteadyTime* sent, const CallContext& ctx);
  // Stops handing out shared lease `id` (etcd no longer knows it).
  void forget_shared(std::int64_t id);
  // Sets e's lease to `ttl` from now (rule 4): a keep-alive when the
  // lease's length does not change, else a new lease the key moves to in
  // one transaction guarded by the key's create revision. *refreshed: the
  // steady time when the renewing request was sent.
  Result<Entry> renew(const Entry& e, milliseconds ttl, SteadyTime* refreshed,
                      const CallContext& ctx);
  // The holders of q, with the time left on each lease.
  std::vector<HolderInfo> holders_of(const Queue& q, const CallContext& ctx);
  LockInfo info_of(std::string_view name, const Queue& q,
                   const CallContext& ctx);
  // The Grant of held entry e. valid_for runs from `call_start` (the
  // request's first ask) to `refreshed` + the TTL: etcd's lease ends no
  // earlier than that (its length is >= the TTL). Remembers e (release
  // skips its read while e is unchanged).
  Grant grant_of(std::string_view name, const Entry& e, milliseconds ttl,
                 SteadyTime call_start, SteadyTime refreshed);
  // The handoff (docs/stores/etcd.md, "The releaser grants the next"):
  // after the mutex request `holder_key` was granted from queue q after a
  // wait (a contended lock), remembers that its release may grant the
  // request behind it in the release's own transaction, if that is a
  // single exclusive mutex request that waits: the one in q, else the
  // release looks.
  void remember_next(const std::string& holder_key, const Queue& q);
  // For the release of `holder_key`: the request its release may grant
  // (nullopt: none, or the lock was not contended); forgets it. `look`:
  // read the queue if the grant's read had nothing behind it.
  std::optional<Entry> take_next(const std::string& holder_key, bool look,
                                 const CallContext& ctx);
  Conn& conn() { return *conn_; }

  // Counters (tests). Times a waiter of this store woke up for a delete
  // (one wake per release with the watch on the key just ahead).
  std::uint64_t wakeups() const { return wakeups_.load(); }
  // Releases of this store that granted the next in line in their own
  // transaction.
  std::uint64_t handoffs() const { return handoffs_.load(); }
  // Waiters of this store that found themselves granted by a release.
  std::uint64_t handed() const { return handed_.load(); }
  // Of those, the ones that read the grant from the watch event (no read).
  std::uint64_t handed_by_event() const { return handed_by_event_.load(); }
  void count_wakeup() { wakeups_.fetch_add(1, std::memory_order_relaxed); }
  void count_handed(bool by_event) {
    handed_.fetch_add(1, std::memory_order_relaxed);
    if (by_event) handed_by_event_.fetch_add(1, std::memory_order_relaxed);
  }

 private:
  std::string counter_key(std::string_view name) const;
  // A fresh marker key of one counter call (counter_update says why).
  std::string counter_marker(std::string_view name) const;
  // The seconds of the lease under counter markers: twice the request
  // timeout (at least 2 s), longer than a call's repeats of one write.
  std::int64_t counter_marker_seconds() const {
    return std::max<std::int64_t>(
        2, lease_seconds(2 * options_.conn.request_timeout));
  }
  static Result<std::int64_t> parse_counter(const std::string& key,
                                            const std::string& d);
  Result<std::int64_t> counter_update(std::string_view name, bool take,
                                      std::int64_t delta,
                                      const CallContext& ctx);
  // The release of a lease this store granted and still knows unchanged:
  // one transaction, which also grants `next` if given. nullopt: it
  // changed (the caller reads the key).
  Result<std::optional<ReleaseResult>> release_known(
      std::string_view name, const OwnerToken& token, const Entry& known,
      const std::optional<Entry>& next, const CallContext& ctx);
  Result<ReleaseResult> release_read(std::string_view name,
                                     const OwnerToken& token,
                                     const CallContext& ctx);
  Result<std::optional<Entry>> claim_or_read(pb::TxnRequest& t, const Entry& me,
                                             const std::string& dir, Queue* q,
                                             const CallContext& ctx);
  void revoker();

  EtcdOptions options_;
  std::unique_ptr<Conn> conn_;
  std::atomic<std::uint64_t> wakeups_{0};
  std::atomic<std::uint64_t> handoffs_{0};
  std::atomic<std::uint64_t> handed_{0};
  std::atomic<std::uint64_t> handed_by_event_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::int64_t> to_revoke_;   // guarded by mu_
  std::vector<std::int64_t> to_renew_;    // guarded by mu_
  std::map<std::string, Entry> granted_;  // by id_of; guarded by mu_
  // Key reuse (key_for): the key of each live request of this store, the
  // slots of each lock's keys this store deleted, and the next new slot.
  std::map<std::string, std::string> keys_;  // by id_of; guarded by mu_
  std::map<std::string, std::vector<std::uint64_t>> free_;  // by lock dir
  std::uint64_t next_slot_ = 0;                             // guarded by mu_
  const std::string store_id_;            // 16 hex, random: this store's keys
  std::map<std::string, Entry> next_of_;  // by holder key; guarded by mu_
  struct Shared {
    std::int64_t id = 0;
    SteadyTime sent{};
  };
  std::map<std::int64_t, Shared> shared_;  // by seconds; guarded by mu_
  bool stopping_ = false;                  // guarded by mu_
  std::thread revoker_;                    // last: uses everything above
};

// One acquire's Request (etcd_acquire.cc) and one acquire_some /
// acquire_all's (etcd_multi.cc).
std::unique_ptr<Request> make_request(EtcdStore& s, const AcquireSpec& spec);
std::unique_ptr<MultiRequest> make_multi(EtcdStore& s, const MultiSpec& spec);

// Range request of every key of `dir`, in create-revision order.
pb::RangeRequest dir_range(const std::string& dir);
Queue queue_of(const std::string& dir, const pb::RangeResponse& r);
std::int64_t wall_ms();

}  // namespace baton::store::etcd

#endif  // BATON_STORES_ETCD_ETCD_IMPL_H_
