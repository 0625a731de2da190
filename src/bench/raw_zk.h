// bench/raw_zk.h — raw-zk://, the ZooKeeper floor of the load generator:
// the least work a ZooKeeper lock must do, on the same C client
// (libzookeeper-mt) as the zookeeper:// store, with nothing of baton on top.
//
//   raw-zk://host:port[,host:port...][?session_timeout=10s&check=children
//                                      &api=sync|async&grant=write]
//
// One ZooKeeper session (zhandle) per simulated client. Lock `name` is the
// persistent parent /raw/<name with '/' as '_'>, made once per session.
//   try_acquire  create an EPHEMERAL_SEQUENTIAL node <parent>/n-; with
//                check=children also getChildren, and a node that is not
//                the lowest is deleted again (not_acquired);
//   acquire      create, then the ZooKeeper lock recipe: getChildren; the
//                lowest node holds; any other watches (exists) the node
//                just before it and re-lists when that one goes; with
//                grant=write a request that waited then writes its node
//                (the grant write a store-clocked, fenced lease needs);
//   release      delete the node;
//   waiters      getChildren, minus the holder (handoff workload).
// Calls are synchronous; api=async makes the create and the delete
// async + wait (the zookeeper:// store's way), to show that hop's cost.
// Workloads: uncontended, contended, handoff and fair (no extend: an
// ephemeral node lives as long as its session, there is no lease to
// extend).
//
// Built only with BATON_WITH_ZOOKEEPER (or BATON_BENCH_RAW_ZK_STANDALONE);
// without it open_raw_zk_session() is not linked and session.cc answers
// that raw-zk:// is not built in.
//
// Thread safety: one session per thread (like every Session).
#ifndef BATON_BENCH_RAW_ZK_H_
#define BATON_BENCH_RAW_ZK_H_

#include <memory>

#include "baton/error.h"
#include "bench/loadgen.h"
#include "bench/session.h"

namespace baton::bench {

// Opens one raw-zk:// session on o.store (waits for the ZooKeeper session,
// at most 10 s).
Result<std::unique_ptr<Session>> open_raw_zk_session(const LoadOptions& o);

}  // namespace baton::bench

#endif  // BATON_BENCH_RAW_ZK_H_
