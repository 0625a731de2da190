#include "bench/session.h"

#include <hiredis/hiredis.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "baton/client.h"
#include "bench/raw.h"
#include "bench/raw_flock.h"
#include "bench/raw_zk.h"
#if BATON_BENCH_RAW_ETCD
#include "bench/raw_etcd.h"
#endif

namespace baton::bench {

namespace {

class ClientSession final : public Session {
 public:
  ClientSession(Client client, milliseconds ttl) : client_(std::move(client)) {
    opts_.ttl = ttl;
  }
  Status try_acquire(const std::string& name) override {
    auto l = client_.try_acquire(name, opts_);
    if (!l) return l.error();
    lease_ = std::move(*l);
    return {};
  }
  Status acquire(const std::string& name, milliseconds wait) override {
    auto l = client_.acquire(name, wait, opts_);
    if (!l) return l.error();
    lease_ = std::move(*l);
    return {};
  }
  Status release() override {
    if (!lease_) return Error(Errc::internal, "release without a lease");
    auto r = client_.release(*lease_);
    lease_.reset();
    if (!r) return r.error();
    if (!*r) return Error(Errc::lock_lost, "release: lease was not held");
    return {};
  }
  Status extend() override {
    if (!lease_) return Error(Errc::internal, "extend without a lease");
    auto l = client_.extend(*lease_);
    if (!l) return l.error();
    lease_ = std::move(*l);
    return {};
  }
  Result<std::size_t> waiters(const std::string& name) override {
    auto info = client_.describe(name);
    if (!info) return info.error();
    return info->waiters.size();
  }

 private:
  Client client_;
  AcquireOptions opts_;
  std::optional<Lease> lease_;
};

// The baseline: SET NX PX, then Lua compare-and-delete, over hiredis.
constexpr const char* kCompareAndDelete =
    "if redis.call('get', KEYS[1]) == ARGV[1] then "
    "return redis.call('del', KEYS[1]) else return 0 end";

// The fencing floor (`script=fenced`): the least a lease with a fencing
// token and a store-clock expiry needs from Redis when the grant is a
// script: read the server's TIME, check the key, INCR the lock's counter and
// write the lease (token and expiry, PXAT); release reads TIME and the key
// and deletes it if the token holds an unexpired lease. No queue, no
// reentrancy, no labels: what baton's redis:// fast paths cannot go below.
constexpr const char* kFencedAcquire =
    "local tm = redis.call('TIME') "
    "local now = tonumber(tm[1]) * 1000000 + tonumber(tm[2]) "
    "if redis.call('GET', KEYS[1]) then return 0 end "
    "local f = redis.call('INCR', KEYS[2]) "
    "local e = now + tonumber(ARGV[2]) * 1000 "
    "redis.call('SET', KEYS[1], ARGV[1] .. ':' .. string.format('%d', e), "
    "'PXAT', string.format('%d', math.floor(e / 1000))) "
    "return {f, e, now}";
constexpr const char* kFencedRelease =
    "local tm = redis.call('TIME') "
    "local now = tonumber(tm[1]) * 1000000 + tonumber(tm[2]) "
    "local v = redis.call('GET', KEYS[1]) "
    "if v and string.sub(v, 1, #ARGV[1] + 1) == ARGV[1] .. ':' and "
    "tonumber(string.sub(v, #ARGV[1] + 2)) > now then "
    "return redis.call('DEL', KEYS[1]) end "
    "return 0";

class RedisSession final : public Session {
 public:
  // shas: {} (EVAL), {compare-and-delete} or {fenced acquire, release}.
  RedisSession(std::unique_ptr<RawConn> conn, milliseconds ttl, bool evalsha,
               std::vector<std::string> shas)
      : conn_(std::move(conn)),
        ttl_(std::to_string(ttl.count())),
        evalsha_(evalsha),
        fenced_(shas.size() == 2),
        sha_(shas.empty() ? std::string() : shas.back()),
        acquire_sha_(shas.empty() ? std::string() : shas.front()) {}
  Status try_acquire(const std::string& name) override {
    key_ = name;
    token_ = OwnerToken::random().to_string();
    if (fenced_) {
      auto r = conn_->call(
          {"EVALSHA", acquire_sha_, "2", key_, key_ + ":f", token_, ttl_});
      if (!r) return r.error();
      if (r->type == REDIS_REPLY_ARRAY && r->elements.size() == 3) return {};
      return Error(Errc::not_acquired, "fenced acquire: busy");
    }
    auto r = conn_->call({"SET", key_, token_, "NX", "PX", ttl_});
    if (!r) return r.error();
    if (r->type == REDIS_REPLY_STATUS && r->str == "OK") return {};
    if (r->type == REDIS_REPLY_NIL) {
      return Error(Errc::not_acquired, "SET NX: key exists");
    }
    return Error(Errc::internal, "SET NX: unexpected reply " + r->str);
  }
  Status acquire(const std::string&, milliseconds) override {
    return Error(Errc::invalid_argument,
                 "raw-redis has no blocking acquire (only uncontended)");
  }
  Status release() override {
    auto r = evalsha_
                 ? conn_->call({"EVALSHA", sha_, "1", key_, token_})
                 : conn_->call({"EVAL", kCompareAndDelete, "1", key_, token_});
    if (!r) return r.error();
    if (r->type == REDIS_REPLY_INTEGER && r->integer == 1) return {};
    return Error(Errc::lock_lost,
                 "compare-and-delete: " + (r->type == REDIS_REPLY_INTEGER
                                               ? std::to_string(r->integer)
                                               : r->str));
  }
  Status extend() override {
    return Error(Errc::invalid_argument, "raw-redis: no extend");
  }
  Result<std::size_t> waiters(const std::string&) override {
    return Error(Errc::invalid_argument, "raw-redis has no queue");
  }

 private:
  std::unique_ptr<RawConn> conn_;
  std::string ttl_;
  bool evalsha_;
  bool fenced_;
  std::string sha_;  // compare-and-delete, or the fenced release
  std::string acquire_sha_;
  std::string key_, token_;
};

// batond over the same raw hiredis harness: separates the server's cost
// from baton::Client's.
class RawBatonSession final : public Session {
 public:
  RawBatonSession(std::unique_ptr<RawConn> conn, milliseconds ttl)
      : conn_(std::move(conn)), ttl_(std::to_string(ttl.count())) {}
  Status try_acquire(const std::string& name) override {
    key_ = name;
    token_ = OwnerToken::random().to_string();
    auto r = conn_->call({"LOCK.ACQUIRE", key_, token_, ttl_});
    if (!r) return r.error();
    if (r->type == REDIS_REPLY_ARRAY && !r->elements.empty() &&
        r->elements[0].str == "granted") {
      return {};
    }
    return Error(
        Errc::not_acquired,
        "LOCK.ACQUIRE: " + (r->elements.empty() ? r->str : r->elements[0].str));
  }
  Status acquire(const std::string&, milliseconds) override {
    return Error(Errc::invalid_argument,
                 "raw-baton has no blocking acquire (only uncontended)");
  }
  Status release() override {
    auto r = conn_->call({"LOCK.RELEASE", key_, token_});
    if (!r) return r.error();
    if (r->type == REDIS_REPLY_ARRAY && r->elements.size() >= 2 &&
        r->elements[1].integer == 1) {
      return {};
    }
    return Error(Errc::lock_lost, "LOCK.RELEASE: not held");
  }
  Status extend() override {
    return Error(Errc::invalid_argument, "raw-baton: no extend");
  }
  Result<std::size_t> waiters(const std::string&) override {
    return Error(Errc::invalid_argument, "raw-baton: no describe");
  }

 private:
  std::unique_ptr<RawConn> conn_;
  std::string ttl_;
  std::string key_, token_;
};

bool is_raw_redis(std::string_view url) {
  return url.starts_with("raw-redis://");
}
}  // namespace

bool is_raw(std::string_view url) {
  return is_raw_redis(url) || url.starts_with("raw-baton://");
}

bool is_raw_zk(std::string_view url) { return url.starts_with("raw-zk://"); }

Result<std::unique_ptr<Session>> open_session(const LoadOptions& o) {
  if (is_raw_redis(o.store)) {
    auto ep = parse_endpoint(o.store);
    if (!ep) return ep.error();
    bool evalsha = false, fenced = false;
    if (!ep->query.empty()) {
      if (ep->query == "script=evalsha") {
        evalsha = true;
      } else if (ep->query == "script=fenced") {
        evalsha = fenced = true;
      } else if (ep->query != "script=eval") {
        return Error(Errc::invalid_argument,
                     "raw-redis: unknown option " + ep->query +
                         " (script=eval|evalsha|fenced)");
      }
    }
    auto conn = RawConn::connect(*ep, milliseconds(5000));
    if (!conn) return conn.error();
    std::vector<std::string> shas;
    std::vector<const char*> texts;
    if (fenced) {
      texts = {kFencedAcquire, kFencedRelease};
    } else if (evalsha) {
      texts = {kCompareAndDelete};
    }
    for (const char* text : texts) {
      auto r = (*conn)->call({"SCRIPT", "LOAD", text});
      if (!r) return r.error();
      if (r->type != REDIS_REPLY_STRING) {
        return Error(Errc::internal, "SCRIPT LOAD: " + r->str);
      }
      shas.push_back(r->str);
    }
    return std::unique_ptr<Session>(std::make_unique<RedisSession>(
        std::move(*conn), o.ttl, evalsha, std::move(shas)));
  }
  if (o.store.starts_with("raw-baton://")) {
    auto ep = parse_endpoint(o.store);
    if (!ep) return ep.error();
    auto conn = RawConn::connect(*ep, milliseconds(5000));
    if (!conn) return conn.error();
    return std::unique_ptr<Session>(
        std::make_unique<RawBatonSession>(std::move(*conn), o.ttl));
  }
  if (is_raw_flock(o.store)) return open_raw_flock_session(o);
  if (is_raw_zk(o.store)) {
#if BATON_BENCH_RAW_ZK
    return open_raw_zk_session(o);
#else
    return Error(Errc::invalid_argument,
                 "raw-zk:// is not built into this binary (configure with "
                 "-DBATON_WITH_ZOOKEEPER=ON; needs libzookeeper-mt-dev)");
#endif
  }
  if (o.store.starts_with("raw-etcd://")) {
#if BATON_BENCH_RAW_ETCD
    return open_raw_etcd_session(o);
#else
    return Error(Errc::invalid_argument,
                 "raw-etcd:// is not built into this binary (configure with "
                 "-DBATON_WITH_ETCD=ON)");
#endif
  }
  ClientOptions copts;
  copts.max_retries = 0;  // count failures instead of hiding them
  copts.observer = o.observer;
  auto c = Client::open(o.store, copts);
  if (!c) return c.error();
  return std::unique_ptr<Session>(
      std::make_unique<ClientSession>(std::move(*c), o.ttl));
}

}  // namespace baton::bench
