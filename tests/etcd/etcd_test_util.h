// tests/etcd/etcd_test_util.h — the one 3-member etcd cluster of
// etcd_store_test (started on first use, stopped at exit) and a store
// opened on it with its internals reachable: its single calls are called
// directly (baton/store.h), its acquires go through a baton::Client that
// wraps it (the engine), with no retry, as one call of the store.
#ifndef BATON_TESTS_ETCD_ETCD_TEST_UTIL_H_
#define BATON_TESTS_ETCD_ETCD_TEST_UTIL_H_

#include <chrono>
#include <cstdlib>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "baton/client.h"
#include "baton/lease.h"
#include "baton/store.h"
#include "baton/store_descriptor.h"
#include "etcd_process.h"
#include "eventually.h"
#include "stores/etcd/etcd_impl.h"

namespace baton::testing {

inline EtcdCluster*& shared_cluster_ptr() {
  static EtcdCluster* c = nullptr;
  return c;
}
inline EtcdCluster& shared_cluster() {
  if (shared_cluster_ptr() == nullptr) {
    shared_cluster_ptr() = new EtcdCluster(3);
    std::atexit([] { delete shared_cluster_ptr(); });
  }
  return *shared_cluster_ptr();
}

// The context of one direct store call: 10 s from now.
inline CallContext cx() {
  return CallContext(std::chrono::steady_clock::now() +
                     std::chrono::seconds(10));
}

// A store on the shared cluster (all members), its EtcdStore view, and a
// client driving it.
struct TestStore {
  std::shared_ptr<baton::Store> owner;
  store::etcd::EtcdStore* etcd = nullptr;
  std::optional<Client> client;

  static AcquireOptions options_of(const AcquireSpec& spec) {
    AcquireOptions o;
    o.ttl = spec.ttl;
    o.capacity = spec.capacity;
    o.label = spec.label;
    o.reentrancy_key = spec.reentrancy_key;
    o.token = spec.token;
    return o;
  }
  // acquire / try_acquire (wait 0) / acquire_shared of `spec`, with its
  // owner token.
  Result<Lease> acquire(const AcquireSpec& spec,
                        std::chrono::milliseconds wait) const {
    const AcquireOptions o = options_of(spec);
    if (spec.shared) return client->acquire_shared(spec.name, wait, o);
    return client->acquire(spec.name, wait, o);
  }
  // acquire_all / acquire_some of `m`, under its reservation.
  Result<std::vector<Lease>> acquire_multi(
      const MultiSpec& m, std::chrono::milliseconds wait) const {
    AcquireOptions o;
    o.ttl = m.ttl;
    o.capacity = m.capacity;
    o.label = m.label;
    o.token = m.reservation;
    if (m.all_or_nothing) return client->acquire_all(m.names, wait, o);
    return client->acquire_some(m.names, m.reservation, wait, o);
  }
  // The store's single calls, each with its own context.
  Result<ReleaseResult> release(const std::string& name,
                                const OwnerToken& token) const {
    return etcd->release(name, token, cx());
  }
  Result<LockInfo> describe(const std::string& name) const {
    return etcd->describe(name, cx());
  }
  Result<Grant> extend(const std::string& name, const OwnerToken& token,
                       std::chrono::milliseconds ttl) const {
    return etcd->extend(name, token, ttl, cx());
  }
};

inline TestStore open_test_store(const std::string& url) {
  auto s = baton::open_store(url);
  if (!s.ok()) throw std::runtime_error(s.error().to_string());
  TestStore t;
  t.owner = std::shared_ptr<baton::Store>(std::move(*s));
  t.etcd = dynamic_cast<store::etcd::EtcdStore*>(t.owner.get());
  if (t.etcd == nullptr) throw std::runtime_error(url + " is not etcd://");
  ClientOptions o;
  o.max_retries = 0;
  t.client = Client::wrap(t.owner, o);
  return t;
}

// A try through one Request of the store (baton/store.h), for tests that
// look at the Grant itself (its valid_for).
inline Result<Grant> grant_now(const TestStore& t, const AcquireSpec& spec) {
  auto req = t.etcd->request(spec);
  auto a = req->ask(AskMode::try_only, std::chrono::milliseconds(0), cx());
  if (!a.ok()) return std::move(a).error();
  if (a->kind != Answer::Kind::granted) {
    return Error(Errc::not_acquired,
                 "lock " + spec.name + " not granted: " + a->error.to_string());
  }
  return a->grant;
}

// A mutex request on `name` with a new owner token.
inline AcquireSpec spec_of(const std::string& name,
                           std::chrono::milliseconds ttl,
                           const std::string& label = "t") {
  AcquireSpec s;
  s.name = name;
  s.token = OwnerToken::random();
  s.ttl = ttl;
  s.label = label;
  return s;
}

// A lock name unique to this run.
// Requests waiting on `name` (0 if describe fails).
inline std::size_t waiters_of(const TestStore& s, const std::string& name) {
  auto info = s.describe(name);
  return info.ok() ? info->waiters.size() : 0;
}

inline std::string unique_name(const std::string& what) {
  return "etcd-test/" + what + "/" +
         OwnerToken::random().to_string().substr(0, 8);
}

}  // namespace baton::testing

#endif  // BATON_TESTS_ETCD_ETCD_TEST_UTIL_H_
