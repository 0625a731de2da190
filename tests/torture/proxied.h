// tests/torture/proxied.h — what the StoreCluster implementations share
// (stores.cc: batond, postgres, redis, redlock, an external store;
// zk_cluster.cc: zookeeper): the per-slot TcpProxies in front of the servers,
// and the factory of each implementation that lives in a file of its own.
#ifndef BATON_TESTS_TORTURE_PROXIED_H_
#define BATON_TESTS_TORTURE_PROXIED_H_

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "stores.h"
#include "torture.h"
#ifdef BATON_TORTURE_PROXY
#include "tests/support/tcp_proxy.h"
#endif

namespace baton::torture {

// The TcpProxies in front of each server, one set per worker slot (network
// faults; one slot can be cut off alone), if built.
class Proxied : public StoreCluster {
 public:
  std::string url(int slot) const override {
    return slot_urls_.empty()
               ? direct_url()
               : slot_urls_[static_cast<std::size_t>(slot) % slot_urls_.size()];
  }
#ifdef BATON_TORTURE_PROXY
  bool has_proxy() const override { return !proxies_.empty(); }
  void proxy_cut(int i) override {
    for_server(i, [](testing::TcpProxy& p) { p.cut_all(); });
  }
  void proxy_blackhole(int i, bool on) override {
    for_server(i, [on](testing::TcpProxy& p) { p.set_mode(mode(on)); });
  }
  void proxy_delay(int i, std::chrono::milliseconds d) override {
    for_server(i, [d](testing::TcpProxy& p) { p.set_delay(d); });
  }
  void isolate_slot(int slot, bool on) override {
    if (proxies_.empty()) return;
    auto& v = proxies_[static_cast<std::size_t>(slot) % proxies_.size()];
    for (auto& p : v) p->set_mode(mode(on));
  }
#else
  bool has_proxy() const override { return false; }
  void proxy_cut(int) override {}
  void proxy_blackhole(int, bool) override {}
  void proxy_delay(int, std::chrono::milliseconds) override {}
  void isolate_slot(int, bool) override {}
#endif

 protected:
  // One proxy per (slot, server) in front of `hosts` ({host, port});
  // `url_of` builds a slot's URL from its "127.0.0.1:port" list.
  bool add_proxies(
      int slots, const std::vector<std::pair<std::string, int>>& hosts,
      const std::function<std::string(const std::vector<std::string>&)>& url_of,
      std::string* error) {
#ifdef BATON_TORTURE_PROXY
    for (int s = 0; s < slots; ++s) {
      std::vector<std::unique_ptr<testing::TcpProxy>> v;
      std::vector<std::string> via;
      for (const auto& [host, port] : hosts) {
        auto p =
            testing::TcpProxy::start(host, static_cast<std::uint16_t>(port));
        if (!p) {
          *error = "proxy to " + host + ":" + std::to_string(port) + ": " +
                   p.error().to_string();
          return false;
        }
        via.push_back("127.0.0.1:" + std::to_string((*p)->port()));
        v.push_back(std::move(*p));
      }
      proxies_.push_back(std::move(v));
      slot_urls_.push_back(url_of(via));
    }
#else
    (void)slots, (void)hosts, (void)url_of, (void)error;
#endif
    return true;
  }
  void drop_proxies() {
#ifdef BATON_TORTURE_PROXY
    proxies_.clear();
#endif
  }

 private:
#ifdef BATON_TORTURE_PROXY
  static testing::TcpProxy::Mode mode(bool blackhole) {
    return blackhole ? testing::TcpProxy::Mode::blackhole
                     : testing::TcpProxy::Mode::pass;
  }
  template <typename F>
  void for_server(int i, F f) {
    for (auto& v : proxies_) {
      if (!v.empty()) f(*v[static_cast<std::size_t>(i) % v.size()]);
    }
  }
  std::vector<std::vector<std::unique_ptr<testing::TcpProxy>>> proxies_;
#endif
  std::vector<std::string> slot_urls_;
};

// --store-kind zookeeper: one private ZooKeeper server (zk_cluster.cc).
// nullptr + *error if it cannot be started.
std::unique_ptr<StoreCluster> start_zookeeper(const Options& options,
                                              const std::string& dir,
                                              std::string* error);
// --store-kind mysql: one private MariaDB server (my_cluster.cc).
std::unique_ptr<StoreCluster> start_mysql(const Options& options,
                                          const std::string& dir,
                                          std::string* error);
// --store-kind etcd: a private 3-member etcd cluster (etcd_cluster.cc).
std::unique_ptr<StoreCluster> start_etcd(const Options& options,
                                         const std::string& dir,
                                         std::string* error);
// --store-kind sqlite: one database file, no server (sqlite_cluster.cc).
std::unique_ptr<StoreCluster> start_sqlite(const Options& options,
                                           const std::string& dir,
                                           std::string* error);

}  // namespace baton::torture

#endif  // BATON_TESTS_TORTURE_PROXIED_H_
