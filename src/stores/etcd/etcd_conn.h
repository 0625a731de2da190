// stores/etcd/etcd_conn.h — the etcd:// store's gRPC connection: one channel
// per endpoint, the calls the store makes, failover between endpoints.
//
// Rule 7: every RPC carries a gRPC deadline of at most the per-request
// timeout and never later than the call deadline (stores/call_deadline.h).
// A call that fails because its endpoint is unreachable, has no leader or
// answers too slowly is tried on the next endpoint until the per-request
// timeout is spent; the error then names the endpoint (Errc::unavailable),
// or is Errc::timeout when the call deadline ended it.
//
// Thread safety: Conn is safe for concurrent use (gRPC stubs are).
#ifndef BATON_STORES_ETCD_ETCD_CONN_H_
#define BATON_STORES_ETCD_ETCD_CONN_H_

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "baton/error.h"
#include "stores/call_deadline.h"
#include "stores/etcd/etcd_v3.grpc.pb.h"

namespace baton::store::etcd {

namespace pb = ::etcdserverpb;
using std::chrono::milliseconds;

// One watch of WaitForDelete: a key, or [key, range_end) if range_end is set.
struct WatchSpec {
  std::string key;
  std::string range_end;
  bool puts = false;  // deliver its puts too (WatchStream::put_of), not
                      // only its deletes
};

class Conn {
 public:
  struct Options {
    std::vector<std::string> endpoints;  // "host:port"
    milliseconds request_timeout{5000};
  };
  explicit Conn(Options options);

  Result<pb::RangeResponse> range(const pb::RangeRequest& req);
  Result<pb::TxnResponse> txn(const pb::TxnRequest& req);
  // A lease of `ttl_s` seconds; the reply's TTL is what etcd granted.
  Result<pb::LeaseGrantResponse> lease_grant(std::int64_t ttl_s);
  Status lease_revoke(std::int64_t id);
  // Renews lease `id` to its full TTL; returns the TTL (0: the lease is
  // gone).
  Result<std::int64_t> keep_alive(std::int64_t id);
  // Seconds left of lease `id` (whole, rounded down by etcd; -1: gone).
  Result<std::int64_t> time_to_live(std::int64_t id);
  const std::string& where() const { return where_; }

 private:
  struct Endpoint {
    std::string address;
    std::shared_ptr<grpc::Channel> channel;
    std::unique_ptr<pb::KV::Stub> kv;
    std::unique_ptr<pb::Watch::Stub> watch;
    std::unique_ptr<pb::Lease::Stub> lease;
  };
  // Runs `rpc` on the current endpoint, moving on to the next one after a
  // failure that another member may not have, until the request timeout.
  template <class Resp, class Fn>
  Result<Resp> call(const char* what, Fn rpc);
  std::size_t current() const { return current_.load() % endpoints_.size(); }
  friend class WatchStream;
  void deadline_of(grpc::ClientContext* ctx, SteadyTime end) const;

  Options options_;
  milliseconds attempt_timeout_;  // one try on one member (see call())
  std::string where_;
  std::vector<Endpoint> endpoints_;
  std::atomic<std::size_t> current_{0};
};

// A watch for deletes, opened before the read it guards: etcd delivers at
// once only to watches that start at its current revision (one that starts
// in the past waits for etcd's 100 ms catch-up loop), so a waiter opens the
// watch, then reads the queue, then waits.
class WatchStream {
 public:
  // Opens one stream watching every spec from etcd's current revision on,
  // and returns once etcd confirmed each (or `until`, capped by the call
  // deadline, passed; then ok() is false).
  WatchStream(Conn& conn, const std::vector<WatchSpec>& watches,
              SteadyTime until);
  ~WatchStream();
  WatchStream(const WatchStream&) = delete;
  WatchStream& operator=(const WatchStream&) = delete;
  bool ok() const { return ok_; }
  // Waits for a delete of a key that `wanted` accepts (nullptr: any key),
  // or a put of a key watched with `puts`. True: one came, or the stream
  // broke (read again). False: the time given at opening ran out.
  bool wait(const std::function<bool(const std::string&)>& wanted);
  // The last put of `key` delivered so far (a key watched with `puts`).
  const pb::KeyValue* put_of(const std::string& key) const {
    auto it = puts_.find(key);
    return it == puts_.end() ? nullptr : &it->second;
  }

 private:
  Conn& conn_;
  std::size_t endpoint_;
  SteadyTime end_;
  grpc::ClientContext ctx_;
  std::unique_ptr<grpc::ClientReaderWriter<pb::WatchRequest, pb::WatchResponse>>
      stream_;
  bool ok_ = false;
  bool broken_ = false;
  std::vector<std::string> early_;            // keys deleted while opening
  bool early_put_ = false;                    // a put delivered while opening
  std::map<std::string, pb::KeyValue> puts_;  // by key: the last put
};

// The end of `range` for all keys with `prefix` (etcd's prefix range).
std::string prefix_end(std::string prefix);

}  // namespace baton::store::etcd

#endif  // BATON_STORES_ETCD_ETCD_CONN_H_
