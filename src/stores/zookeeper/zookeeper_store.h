// stores/zookeeper/zookeeper_store.h — the zookeeper:// store.
//
//   zookeeper://host:port[,host:port...][/chroot][?session_timeout=10s&request_timeout=5s]
//
// ZooKeeper's ephemeral-sequential lock recipe on the whole contract: one
// ephemeral sequential node per request under a persistent node per lock
// name; a request holds when fewer than `capacity` earlier nodes exist;
// each waiter watches only the node ahead of it. Leases expire by
// ZooKeeper's clock (a node's mtime + its TTL), fencing tokens are the zxid
// of the write that started the lease. Node layout and the safety
// argument: docs/stores/zookeeper.md.
//
// Thread safety: safe for concurrent use (Store contract).
#ifndef BATON_STORES_ZOOKEEPER_ZOOKEEPER_STORE_H_
#define BATON_STORES_ZOOKEEPER_ZOOKEEPER_STORE_H_

#include "baton/store_descriptor.h"

namespace baton::store {

const StoreDescriptor& zookeeper_descriptor();

}  // namespace baton::store

#endif  // BATON_STORES_ZOOKEEPER_ZOOKEEPER_STORE_H_
