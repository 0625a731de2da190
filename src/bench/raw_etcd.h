// bench/raw_etcd.h — raw-etcd://, the etcd floor of the load generator: the
// least work an etcd lock must do, on the same gRPC client as the etcd://
// store (stores/etcd/etcd_conn.h), with nothing of baton on top.
//
//   raw-etcd://host:port[,host:port...]
//
// One gRPC connection and one etcd lease (of the bench TTL, granted again
// when half of it has passed) per simulated client, like a session of
// etcd's Go concurrency package. Per pair:
//   try_acquire  one Txn: if the key <raw>/<name> does not exist, put it
//                with the session's lease (else not_acquired);
//   release      one Txn: delete the key if its create revision is ours.
// Workload: uncontended only (the floor of one grant and one release).
//
// Thread safety: one session per thread (like every Session).
#ifndef BATON_BENCH_RAW_ETCD_H_
#define BATON_BENCH_RAW_ETCD_H_

#include <memory>
#include <string_view>

#include "baton/error.h"
#include "bench/loadgen.h"
#include "bench/session.h"

namespace baton::bench {

bool is_raw_etcd(std::string_view url);
Result<std::unique_ptr<Session>> open_raw_etcd_session(const LoadOptions& o);

}  // namespace baton::bench

#endif  // BATON_BENCH_RAW_ETCD_H_
