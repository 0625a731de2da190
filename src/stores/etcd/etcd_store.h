// stores/etcd/etcd_store.h — the etcd:// store.
//
//   etcd://host:port[,host:port...][/prefix][?request_timeout=5s]
//   etcds://[user@]host:port[,...][/prefix]?ca=...&cert=...&key=...
//       [&password_file=...]   (TLS and etcd authentication:
//       etcd_security.h, docs/stores/etcd.md "Security")
//
// etcd's own lock recipe (the Go concurrency package) on the whole
// contract: one key per request under a key per lock name, each with its
// own etcd lease; a request holds once a transaction marks it granted,
// which it may do when fewer than `capacity` requests are ahead of it in
// create-revision order; each waiter watches only the key just ahead of it.
// Fencing tokens are the revision of the granting write. Key layout, leases
// and the safety argument: docs/stores/etcd.md.
//
// Thread safety: safe for concurrent use (Store contract).
#ifndef BATON_STORES_ETCD_ETCD_STORE_H_
#define BATON_STORES_ETCD_ETCD_STORE_H_

#include "baton/store_descriptor.h"

namespace baton::store {

const StoreDescriptor& etcd_descriptor();

}  // namespace baton::store

#endif  // BATON_STORES_ETCD_ETCD_STORE_H_
