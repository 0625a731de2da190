// bench/raw_etcd.cc — raw-etcd://, the etcd floor (raw_etcd.h).
#include "bench/raw_etcd.h"

#include <algorithm>
#include <chrono>
#include <string>

#include "baton/lease.h"
#include "stores/etcd/etcd_conn.h"

namespace baton::bench {
namespace {

namespace etcd = store::etcd;
namespace pb = store::etcd::pb;
using std::chrono::steady_clock;

class RawEtcdSession final : public Session {
 public:
  RawEtcdSession(etcd::Conn::Options o, milliseconds ttl)
      : conn_(std::move(o)),
        ttl_s_(std::max<std::int64_t>(1, (ttl.count() + 999) / 1000)),
        token_(OwnerToken::random().to_string()) {}

  Status try_acquire(const std::string& name) override {
    if (lease_ == 0 ||
        steady_clock::now() - leased_at_ > std::chrono::seconds(ttl_s_) / 2) {
      leased_at_ = steady_clock::now();
      auto l = conn_.lease_grant(ttl_s_, CallContext{});
      if (!l) return l.error();
      lease_ = l->id();
    }
    key_ = "raw/" + name;
    pb::TxnRequest t;
    auto* c = t.add_compare();
    c->set_key(key_);
    c->set_target(pb::Compare::CREATE);
    c->set_create_revision(0);
    auto* put = t.add_success()->mutable_request_put();
    put->set_key(key_);
    put->set_value(token_);
    put->set_lease(lease_);
    auto r = conn_.txn(t, CallContext{});
    if (!r) return r.error();
    if (!r->succeeded()) {
      return Error(Errc::not_acquired, "raw-etcd: " + key_ + " exists");
    }
    rev_ = r->header().revision();
    return {};
  }
  Status acquire(const std::string&, milliseconds) override {
    return Error(Errc::invalid_argument,
                 "raw-etcd:// has no waiting acquire (uncontended only)");
  }
  Status release() override {
    pb::TxnRequest t;
    auto* c = t.add_compare();
    c->set_key(key_);
    c->set_target(pb::Compare::CREATE);
    c->set_create_revision(rev_);
    t.add_success()->mutable_request_delete_range()->set_key(key_);
    auto r = conn_.txn(t, CallContext{});
    if (!r) return r.error();
    if (!r->succeeded()) return Error(Errc::lock_lost, "raw-etcd: not held");
    return {};
  }
  Status extend() override {
    return Error(Errc::invalid_argument, "raw-etcd:// has no extend");
  }
  Result<std::size_t> waiters(const std::string&) override {
    return Error(Errc::invalid_argument, "raw-etcd:// has no waiters");
  }

 private:
  etcd::Conn conn_;
  std::int64_t ttl_s_;
  std::string token_;
  std::int64_t lease_ = 0;
  steady_clock::time_point leased_at_{};
  std::string key_;
  std::int64_t rev_ = 0;
};

}  // namespace

bool is_raw_etcd(std::string_view url) {
  return url.starts_with("raw-etcd://");
}

Result<std::unique_ptr<Session>> open_raw_etcd_session(const LoadOptions& o) {
  std::string_view rest = std::string_view(o.store).substr(11);
  if (rest.find_first_of("/?") != std::string_view::npos) {
    return Error(Errc::invalid_argument,
                 "raw-etcd://host:port[,host:port...] takes no path or "
                 "options: " +
                     o.store);
  }
  etcd::Conn::Options co;
  while (!rest.empty()) {
    const auto comma = rest.find(',');
    co.endpoints.emplace_back(rest.substr(0, comma));
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  if (co.endpoints.empty() || co.endpoints[0].empty()) {
    return Error(Errc::invalid_argument, "raw-etcd:// needs host:port");
  }
  return std::unique_ptr<Session>(
      std::make_unique<RawEtcdSession>(std::move(co), o.ttl));
}

}  // namespace baton::bench
