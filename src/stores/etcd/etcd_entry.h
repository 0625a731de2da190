// stores/etcd/etcd_entry.h — the etcd:// store's keys and values: how a
// lock name becomes a key prefix, what a request key holds, and a lock's
// queue as read from etcd (pure functions; no I/O).
//
// Layout (docs/stores/etcd.md):
//   <prefix>/l/<escaped name>/<32 hex>   one key per request: a key of the
//                                        store that wrote it (16 hex: the
//                                        store, 16 hex: a slot it reuses)
//                                        or, written by an older baton, the
//                                        owner token
//   <prefix>/c/<escaped name>            a counter
// The owner token is in the value (Value::owner).
// The name is escaped so that no lock's key range holds another lock's
// keys ('%' -> %25, '/' -> %2F).
//
// Thread safety: plain values and pure functions.
#ifndef BATON_STORES_ETCD_ETCD_ENTRY_H_
#define BATON_STORES_ETCD_ETCD_ENTRY_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "baton/lease.h"

namespace baton::store::etcd {

// What a request key holds.
struct Value {
  bool held = false;  // a transaction granted it (the claim)
  bool all = false;   // part of an acquire_all
  // A shared (read) request (rule 18). Encoded as the value's first bytes
  // ("b2 " where an exclusive request has "b1 "), so that one Txn compare
  // over the lock's range (every value > kSharedFloor) tells that every key
  // of the lock is shared.
  bool shared = false;
  // Its etcd lease is the store's shared lease (EtcdStore::shared_lease):
  // other keys may be on it, so it is never kept alive nor revoked for
  // this key; an extend moves the key to a lease of its own.
  bool shared_lease = false;
  std::uint32_t capacity = 1;
  std::uint32_t holds = 1;
  std::int64_t lease_s = 0;  // seconds its etcd lease was asked for
  // The fencing token once the key was written again after its claim;
  // 0: the key's mod revision (the claim itself).
  std::int64_t fencing = 0;
  std::int64_t queued_at_ms = 0;  // client wall clock (for describe only)
  std::string label;
  std::string reentrancy_key;
  // The request's owner token (32 hex; empty in a value written by an
  // older baton, whose key is the token). Encoded as the label's first 32
  // bytes with bit 2 of the `all` field set, so that an older baton still
  // decodes the value and counts the request (it then shows the token in
  // the label and takes the request for an acquire_all: no handoff to it).
  std::string owner;
};
std::string encode(const Value& v);
// Every shared request's value sorts above this, every exclusive one below.
inline constexpr std::string_view kSharedFloor = "b2";
std::optional<Value> decode(std::string_view data);

// One request key as read.
struct Entry {
  std::string key;
  OwnerToken token;
  std::int64_t create_rev = 0;
  std::int64_t mod_rev = 0;
  std::int64_t lease = 0;
  Value v;
  std::uint64_t fencing() const {
    return static_cast<std::uint64_t>(v.fencing != 0 ? v.fencing : mod_rev);
  }
};

// A lock's requests in create-revision order, read at `revision`.
struct Queue {
  std::int64_t revision = 0;
  std::vector<Entry> entries;
  int index_of(const OwnerToken& token) const;
  std::uint32_t capacity() const {
    return entries.empty() ? 0 : entries[0].v.capacity;
  }
  std::size_t held() const;
  // Granted requests (held) plus every request ahead of `pos` that waits,
  // single or acquire_all (a waiting acquire_all counts as the
  // exclusive request it is): the slots taken from the view of position
  // `pos` (entries.size() for a request not queued yet). An exclusive
  // request may claim if this is < capacity.
  std::size_t taken_before(std::size_t pos) const;
  // Whether a request at `pos` (entries.size(): not queued yet) of kind
  // `shared` must wait. Exclusive: taken_before(pos) >= capacity. Shared
  // (rule 18, capacity 1): an exclusive holder, or an exclusive request
  // (single or acquire_all) waiting ahead of it.
  bool blocked(std::size_t pos, bool shared, std::uint32_t capacity) const;
  // The position of the nearest exclusive request ahead of `pos`; -1: none.
  int exclusive_before(std::size_t pos) const;
};

std::string escape_name(std::string_view name);
std::string unescape_name(std::string_view escaped);

// Parses a request key "<dir><32 hex>" into e (false: not a request key).
// The owner token is the value's (Value::owner), else the key's 32 hex.
bool parse_entry(std::string_view dir, std::string key, std::int64_t create,
                 std::int64_t mod, std::int64_t lease, std::string_view value,
                 Entry* e);

}  // namespace baton::store::etcd

#endif  // BATON_STORES_ETCD_ETCD_ENTRY_H_
