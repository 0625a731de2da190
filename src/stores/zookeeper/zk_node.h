// stores/zookeeper/zk_node.h — the zookeeper:// store's node names and node
// data (docs/stores/zookeeper.md, "Node layout"). Pure functions, no I/O.
//
//   <root>/locks/<esc(name)>/q-<token>-<capacity>-<kind>-<seq>   a request
//     (<kind> r: a shared request; every other kind is exclusive)
//   <root>/counters/<esc(name)>                                  a counter
//   <root>/clock                                                 time probe
//
// Thread safety: plain values and pure functions.
#ifndef BATON_STORES_ZOOKEEPER_ZK_NODE_H_
#define BATON_STORES_ZOOKEEPER_ZK_NODE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "baton/lease.h"

namespace baton::store::zk {

// Every byte outside [A-Za-z0-9_-] as %XX (upper-case hex): any valid lock
// name is one path component, never "." or "..".
std::string escape(std::string_view name);
// The inverse; nullopt for a malformed component (not made by escape()).
std::optional<std::string> unescape(std::string_view component);

// What kind of call queued a request.
enum class Kind : char {
  kSingle = 'b',  // acquire / try_acquire
  kSome = 's',    // acquire_some
  kAll = 'a',     // acquire_all
  kShared = 'r',  // acquire_shared (rule 18): the one shared (read) kind
};

// "q-<32 hex token>-<capacity>-<kind>-" (ZooKeeper appends 10 digits).
std::string node_prefix(const OwnerToken& token, std::uint32_t capacity,
                        Kind kind);

struct NodeName {
  std::string child;  // the child's name as listed
  OwnerToken token;
  std::uint32_t capacity = 1;
  Kind kind = Kind::kSingle;
  std::int64_t seq = 0;
  // Rule 18: a shared (read) request; every other kind is exclusive.
  bool shared() const { return kind == Kind::kShared; }
};
std::optional<NodeName> parse_node_name(std::string_view child);

// A request's state, kept in its data.
enum class State : char {
  kHolding = 'h',  // holds (or may hold) the lease: expires at mtime + ttl
  kWaiting = 'w',  // waits in a blocking call; leaves with its session
  kQueued = 's',   // queued by acquire_some: leaves at mtime + ttl
};

struct NodeData {
  State state = State::kHolding;
  std::int64_t ttl_ms = 0;
  std::uint32_t holds = 1;
  std::uint64_t fencing = 0;  // 0 = not written yet: the grant was the
                              // node's last write, its mzxid is the token
  std::string reentrancy_key;
  std::vector<OwnerToken> aliases;  // reentrant joiners' tokens
  std::string label;
};
std::string encode(const NodeData& d);
std::optional<NodeData> decode(std::string_view data);

}  // namespace baton::store::zk

#endif  // BATON_STORES_ZOOKEEPER_ZK_NODE_H_
