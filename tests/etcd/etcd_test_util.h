// tests/etcd/etcd_test_util.h — the one 3-member etcd cluster of
// etcd_store_test (started on first use, stopped at exit) and a store
// opened on it with its internals reachable.
#ifndef BATON_TESTS_ETCD_ETCD_TEST_UTIL_H_
#define BATON_TESTS_ETCD_ETCD_TEST_UTIL_H_

#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>

#include "baton/lease.h"
#include "core/url.h"
#include "etcd_process.h"
#include "stores/etcd/etcd_impl.h"
#include "stores/etcd/etcd_store.h"

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

// A store on the shared cluster (all members), and its EtcdStore view.
struct TestStore {
  std::unique_ptr<store::Store> owner;
  store::etcd::EtcdStore* etcd = nullptr;
};
inline TestStore open_test_store(const std::string& url) {
  auto u = core::parse_url(url);
  if (!u.ok()) throw std::runtime_error(u.error().to_string());
  auto s = store::open_etcd_store(*u);
  if (!s.ok()) throw std::runtime_error(s.error().to_string());
  TestStore t;
  t.owner = std::move(*s);
  t.etcd = dynamic_cast<store::etcd::EtcdStore*>(t.owner.get());
  return t;
}

// A mutex request on `name` with a new owner token.
inline store::AcquireSpec spec_of(const std::string& name,
                                  std::chrono::milliseconds ttl,
                                  const std::string& label = "t") {
  store::AcquireSpec s;
  s.name = name;
  s.token = OwnerToken::random();
  s.ttl = ttl;
  s.label = label;
  return s;
}

// A lock name unique to this run.
inline std::string unique_name(const std::string& what) {
  return "etcd-test/" + what + "/" +
         OwnerToken::random().to_string().substr(0, 8);
}

}  // namespace baton::testing

#endif  // BATON_TESTS_ETCD_ETCD_TEST_UTIL_H_
