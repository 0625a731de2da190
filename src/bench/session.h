// bench/session.h — one simulated benchmark client: a baton::Client of its
// own, a raw hiredis connection for the raw-redis:// and raw-baton://
// baselines, or a ZooKeeper session for the raw-zk:// floor (raw_zk.h).
// Internal to the load generator.
//
// Thread safety: one Session per thread.
#ifndef BATON_BENCH_SESSION_H_
#define BATON_BENCH_SESSION_H_

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include "baton/error.h"
#include "bench/loadgen.h"

namespace baton::bench {

using std::chrono::milliseconds;

// One simulated client: one connection (pool) of its own.
class Session {
 public:
  virtual ~Session() = default;
  virtual Status try_acquire(const std::string& name) = 0;
  // Errc::timeout when `wait` passes without a grant.
  virtual Status acquire(const std::string& name, milliseconds wait) = 0;
  virtual Status release() = 0;
  // Extends the held lease to its TTL from now (mixed workload).
  virtual Status extend() = 0;
  virtual Result<std::size_t> waiters(const std::string& name) = 0;
};

// raw-redis:// or raw-baton://: only the uncontended workload.
bool is_raw(std::string_view url);
// raw-zk://: uncontended, contended, handoff and fair (raw_zk.h).
bool is_raw_zk(std::string_view url);

// Opens one session on o.store (fails if the store cannot be reached).
Result<std::unique_ptr<Session>> open_session(const LoadOptions& o);

}  // namespace baton::bench

#endif  // BATON_BENCH_SESSION_H_
