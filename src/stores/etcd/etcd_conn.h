// stores/etcd/etcd_conn.h — the etcd:// store's gRPC connection: one channel
// per endpoint, the calls the store makes, failover between endpoints.
//
// Rule 7: every RPC carries a gRPC deadline of at most the per-request
// timeout and never later than its CallContext's deadline. A call that
// fails because its endpoint is unreachable, has no leader or answers too
// slowly is tried on the next endpoint until the per-request timeout is
// spent; the error then names the endpoint (Errc::unavailable), or is
// Errc::timeout when the call's deadline ended it. A call cut short is
// cancelled on its gRPC stream, so a late reply is never read as the
// answer to another call.
//
// Security (docs/stores/etcd.md, "Security"): with TLS on, every channel is
// gRPC's SSL channel (the server's certificate must chain to the CA given,
// else to the system CAs, and name the endpoint's host; a client
// certificate when one is given). With a user, the store trades the user
// and password for a token (etcd's Auth/Authenticate) and sends it as the
// "token" metadata of every call; the token is renewed when it is
// `token_refresh` old, and at once when etcd refuses it (expired, or the
// auth store moved on), the call then sent again once. The password and the
// token never appear in an error or a log line.
//
// Thread safety: Conn is safe for concurrent use (gRPC stubs are; the
// token is guarded by a mutex, one Authenticate at a time);
// WatchSlot::cancel() may be called from any thread.
#ifndef BATON_STORES_ETCD_ETCD_CONN_H_
#define BATON_STORES_ETCD_ETCD_CONN_H_

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "baton/error.h"
#include "baton/store.h"
#include "stores/etcd/etcd_v3.grpc.pb.h"

namespace baton::store::etcd {

namespace pb = ::etcdserverpb;
using std::chrono::milliseconds;
// Real time, which gRPC deadlines and etcd's leases run on.
using SteadyTime = std::chrono::steady_clock::time_point;

// `t` on ctx's clock as a steady instant (max() stays max()).
SteadyTime steady_at(Clock::time_point t, const CallContext& ctx);
// ctx's deadline as a steady instant.
inline SteadyTime steady_deadline(const CallContext& ctx) {
  return steady_at(ctx.deadline(), ctx);
}

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
    // TLS: gRPC's SSL channel credentials. PEM contents, not paths; an
    // empty ca_pem means gRPC's default roots (the system CAs); cert_pem
    // and key_pem are the client certificate (both or neither).
    bool tls = false;
    std::string ca_pem, cert_pem, key_pem;
    // Authentication: empty user = none (or the client certificate's CN,
    // which etcd takes as the user when it runs --client-cert-auth).
    std::string user, password;
    // A token this old is renewed before the next call (below etcd's
    // --auth-token-ttl, 300 s by default).
    milliseconds token_refresh{240000};
    // The key prefix ("<prefix>/"), named in permission errors.
    std::string prefix;
  };
  explicit Conn(Options options);

  // one_pass: each endpoint is tried once at most (the check at open,
  // which looks into a failure at once instead of retrying it).
  Result<pb::RangeResponse> range(const pb::RangeRequest& req,
                                  const CallContext& ctx,
                                  bool one_pass = false);
  Result<pb::TxnResponse> txn(const pb::TxnRequest& req,
                              const CallContext& ctx);
  // A lease of `ttl_s` seconds; the reply's TTL is what etcd granted.
  Result<pb::LeaseGrantResponse> lease_grant(std::int64_t ttl_s,
                                             const CallContext& ctx);
  Status lease_revoke(std::int64_t id, const CallContext& ctx);
  // Renews lease `id` to its full TTL; returns the TTL (0: the lease is
  // gone).
  Result<std::int64_t> keep_alive(std::int64_t id, const CallContext& ctx);
  // Seconds left of lease `id` (whole, rounded down by etcd; -1: gone).
  Result<std::int64_t> time_to_live(std::int64_t id, const CallContext& ctx);
  const std::string& where() const { return where_; }
  const Options& options() const { return options_; }

  // Counts for tests: Authenticate calls that returned a token, and calls
  // sent again after etcd refused their token.
  std::uint64_t authentications() const { return authentications_.load(); }
  std::uint64_t token_retries() const { return token_retries_.load(); }

 private:
  struct Endpoint {
    std::string address;
    std::shared_ptr<grpc::Channel> channel;
    std::unique_ptr<pb::KV::Stub> kv;
    std::unique_ptr<pb::Watch::Stub> watch;
    std::unique_ptr<pb::Lease::Stub> lease;
    std::unique_ptr<pb::Auth::Stub> auth;
  };
  // Runs `rpc` on the current endpoint, moving on to the next one after a
  // failure that another member may not have, until the request timeout.
  template <class Resp, class Fn>
  Result<Resp> call(const char* what, const CallContext& ctx, Fn rpc,
                    bool one_pass = false);
  std::size_t current() const { return current_.load() % endpoints_.size(); }
  friend class WatchStream;
  friend class EtcdFeed;  // the change feed's own stream (etcd_watch.cc)
  // The deadline and the metadata of every call: etcd's "hasleader", and
  // the token (if any).
  void deadline_of(grpc::ClientContext* ctx, SteadyTime end,
                   const std::string& token) const;
  // The token to send on `ep`, authenticating first when there is none
  // yet, when it is due (token_refresh), or when `refused` is the
  // generation etcd just refused. *gen: the generation returned. Not OK:
  // Authenticate's own status (the caller classifies it).
  grpc::Status token(Endpoint& ep, SteadyTime end, std::uint64_t refused,
                     std::string* token, std::uint64_t* gen);
  // The token for a watch stream, renewed first if due (best effort).
  std::string watch_token(std::size_t endpoint, SteadyTime end);
  // The error of a call etcd refused for want of permission or of a
  // valid login (`login`: Authenticate itself failed), as
  // Errc::permission_denied naming the store, the member, the user and the
  // key prefix, and what to do.
  Error denied(const char* what, const std::string& address,
               const grpc::Status& st, bool login) const;

  Options options_;
  milliseconds attempt_timeout_;  // one try on one member (see call())
  std::string where_;
  std::vector<Endpoint> endpoints_;
  std::atomic<std::size_t> current_{0};

  std::timed_mutex auth_mu_;     // one Authenticate at a time
  mutable std::mutex token_mu_;  // guards the three below
  std::string token_;            // "" before the first login
  std::uint64_t token_gen_ = 0;  // +1 per login
  SteadyTime token_at_{};        // when the token was obtained
  std::atomic<std::uint64_t> authentications_{0};
  std::atomic<std::uint64_t> token_retries_{0};
};

// A watch for deletes, opened before the read it guards: etcd delivers at
// once only to watches that start at its current revision (one that starts
// in the past waits for etcd's 100 ms catch-up loop), so a waiter opens the
// watch, then reads the queue, then waits.
class WatchStream {
 public:
  // A stream that ends at `end` (no I/O yet).
  WatchStream(Conn& conn, SteadyTime end);
  ~WatchStream();
  WatchStream(const WatchStream&) = delete;
  WatchStream& operator=(const WatchStream&) = delete;
  // Opens the stream watching every spec from etcd's current revision on,
  // and returns once etcd confirmed each (or the end passed, or cancel();
  // then ok() is false).
  void start(const std::vector<WatchSpec>& watches);
  bool ok() const { return ok_; }
  // Opened, and neither broken nor cancelled since: worth waiting on again.
  bool usable() const { return ok_ && !broken_ && !cancelled_.load(); }
  // Waits for a delete of a key that `wanted` accepts (nullptr: any key),
  // or a put of a key watched with `puts`. True: one came, or the stream
  // broke (read again). False: the end passed, or cancel().
  bool wait(const std::function<bool(const std::string&)>& wanted);
  // The last put of `key` delivered so far (a key watched with `puts`).
  const pb::KeyValue* put_of(const std::string& key) const {
    auto it = puts_.find(key);
    return it == puts_.end() ? nullptr : &it->second;
  }
  // Ends start() or wait() in progress, and any later one. Any thread.
  void cancel();

 private:
  Conn& conn_;
  std::size_t endpoint_;
  SteadyTime end_;
  grpc::ClientContext ctx_;
  std::unique_ptr<grpc::ClientReaderWriter<pb::WatchRequest, pb::WatchResponse>>
      stream_;
  std::atomic<bool> cancelled_{false};
  bool ok_ = false;
  bool broken_ = false;
  std::vector<std::string> early_;            // keys deleted while opening
  bool early_put_ = false;                    // a put delivered while opening
  std::map<std::string, pb::KeyValue> puts_;  // by key: the last put
};

// The watch a waiting request keeps between its waits: opened and used by
// the request's thread, cancelled from any thread (Waitable::interrupt()).
// Once cancelled, every watch it opens is cancelled too.
class WatchSlot {
 public:
  // Closes the watch held and opens one on `watches` until `end`.
  WatchStream& open(Conn& conn, const std::vector<WatchSpec>& watches,
                    SteadyTime end);
  // The watch held (nullptr: none). The owner's thread only.
  WatchStream* get() const { return w_.get(); }
  void close();
  void cancel();

 private:
  std::mutex mu_;  // guards w_'s pointer against cancel()
  std::unique_ptr<WatchStream> w_;
  bool cancelled_ = false;  // guarded by mu_
};

// The end of `range` for all keys with `prefix` (etcd's prefix range).
std::string prefix_end(std::string prefix);

// Transaction parts. compare_create: `key`'s create revision is `rev` (0:
// the key does not exist); compare_mod: its mod revision is `rev`.
void compare_create(pb::TxnRequest* t, const std::string& key,
                    std::int64_t rev);
void compare_mod(pb::TxnRequest* t, const std::string& key, std::int64_t rev);
// `op` puts `value` under `key`, leaving the key on its lease.
void put_same_lease(pb::RequestOp* op, const std::string& key,
                    std::string value);

}  // namespace baton::store::etcd

#endif  // BATON_STORES_ETCD_ETCD_CONN_H_
