// tests/support/stores/proxied.h — what the StoreCluster implementations
// share (store_cluster.cc: batond, postgres, redis, redlock, an external
// store; a file each for zookeeper, mysql, etcd and sqlite): the per-slot
// TcpProxies in front of the servers, and the factory of each
// implementation that lives in a file of its own. Internal to the library.
#ifndef BATON_TESTS_SUPPORT_STORES_PROXIED_H_
#define BATON_TESTS_SUPPORT_STORES_PROXIED_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "baton/client.h"
#include "tests/support/stores/store_cluster.h"
#include "tests/support/tcp_proxy.h"

namespace baton::testing {

// The TcpProxies in front of each server, one set per slot (network
// faults; one slot can be cut off alone), if any were added.
class Proxied : public StoreCluster {
 public:
  std::string url(int slot) const override {
    return slot_urls_.empty()
               ? direct_url()
               : slot_urls_[static_cast<std::size_t>(slot) % slot_urls_.size()];
  }
  bool has_proxy() const override { return !proxies_.empty(); }
  void proxy_cut(int i) override {
    for_server(i, [](TcpProxy& p) { p.cut_all(); });
  }
  void proxy_blackhole(int i, bool on) override {
    for_server(i, [on](TcpProxy& p) { p.set_mode(mode(on)); });
  }
  void proxy_delay(int i, std::chrono::milliseconds d) override {
    for_server(i, [d](TcpProxy& p) { p.set_delay(d); });
  }
  void isolate_slot(int slot, bool on) override {
    if (proxies_.empty()) return;
    auto& v = proxies_[static_cast<std::size_t>(slot) % proxies_.size()];
    for (auto& p : v) p->set_mode(mode(on));
  }

 protected:
  // One proxy per (slot, server) in front of `hosts` ({host, port});
  // `url_of` builds a slot's URL from its "127.0.0.1:port" list.
  bool add_proxies(
      int slots, const std::vector<std::pair<std::string, int>>& hosts,
      const std::function<std::string(const std::vector<std::string>&)>& url_of,
      std::string* error) {
    for (int s = 0; s < slots; ++s) {
      std::vector<std::unique_ptr<TcpProxy>> v;
      std::vector<std::string> via;
      for (const auto& [host, port] : hosts) {
        auto p = TcpProxy::start(host, static_cast<std::uint16_t>(port));
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
    return true;
  }
  void drop_proxies() { proxies_.clear(); }

 private:
  static TcpProxy::Mode mode(bool blackhole) {
    return blackhole ? TcpProxy::Mode::blackhole : TcpProxy::Mode::pass;
  }
  template <typename F>
  void for_server(int i, F f) {
    for (auto& v : proxies_) {
      if (!v.empty()) f(*v[static_cast<std::size_t>(i) % v.size()]);
    }
  }
  std::vector<std::vector<std::unique_ptr<TcpProxy>>> proxies_;
  std::vector<std::string> slot_urls_;
};

// `c` once its init() succeeded and baton opens its direct URL; nullptr +
// *error otherwise (c's servers stopped then). The stores reached through
// the registry (zookeeper://, mysql://, etcd://, sqlite://) are built only
// with their BATON_WITH_ option: say so here rather than have every client
// fail to open the store. With the store built, this also shows that the
// servers take clients.
template <typename C>
std::unique_ptr<StoreCluster> opened(std::unique_ptr<C> c, std::string* error) {
  if (!c->init(error)) return nullptr;
  auto client = Client::open(c->direct_url());
  if (!client) {
    *error = c->direct_url() + ": " + client.error().to_string();
    return nullptr;
  }
  return c;
}

// kind zookeeper: one private ZooKeeper server (zk_cluster.cc).
// nullptr + *error if it cannot be started.
std::unique_ptr<StoreCluster> start_zookeeper(const StoreOptions& options,
                                              const std::string& dir,
                                              std::string* error);
// kind mysql: one private MariaDB server (my_cluster.cc).
std::unique_ptr<StoreCluster> start_mysql(const StoreOptions& options,
                                          const std::string& dir,
                                          std::string* error);
// kinds etcd and etcds (TLS, client certificates, auth on): a private
// 3-member etcd cluster (etcd_cluster.cc).
std::unique_ptr<StoreCluster> start_etcd(const StoreOptions& options,
                                         const std::string& dir,
                                         std::string* error);
// kind sqlite: one database file, no server (sqlite_cluster.cc).
std::unique_ptr<StoreCluster> start_sqlite(const StoreOptions& options,
                                           const std::string& dir,
                                           std::string* error);

}  // namespace baton::testing

#endif  // BATON_TESTS_SUPPORT_STORES_PROXIED_H_
