// tests/torture/stores.h — the store under test: private server(s) on free
// loopback ports (tests/server/batond_process.h, tests/redis/redis_process.h,
// tests/postgres/pg_server.h; ZooKeeper: zk_cluster.cc), each behind an
// in-tree TCP fault proxy when the proxy library is built (proxied.h), with
// the faults the nemesis may inject.
#ifndef BATON_TESTS_TORTURE_STORES_H_
#define BATON_TESTS_TORTURE_STORES_H_

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "torture.h"

namespace baton::torture {

class StoreCluster {
 public:
  // Starts the servers of options.store_kind in `dir`. nullptr + *error.
  static std::unique_ptr<StoreCluster> start(const Options& options,
                                             const std::string& dir,
                                             std::string* error);
  virtual ~StoreCluster() = default;

  // URL the worker in `slot` uses: through TcpProxies of that slot's own
  // (one per server) when the proxy library is built, so that one worker
  // can be cut off while the others keep reaching the store.
  virtual std::string url(int slot) const = 0;
  // URL straight to the servers (recovery probe, counter read).
  virtual std::string direct_url() const = 0;
  // libpq conninfo straight to PostgreSQL ("" for other stores).
  virtual std::string pg_conninfo() const = 0;
  // Number of servers that can be killed (0 for memory:).
  virtual int servers() const = 0;
  // kill -9 server i; restart it on the same port. restart() false + reason.
  virtual void kill9(int i) = 0;
  virtual bool restart(int i, std::string* error) = 0;

  // Network faults on the proxies in front of server i, every slot's (no-ops
  // without them).
  virtual bool has_proxy() const = 0;
  virtual void proxy_cut(int i) = 0;
  virtual void proxy_blackhole(int i, bool on) = 0;
  virtual void proxy_delay(int i, std::chrono::milliseconds one_way) = 0;
  // Blackholes every path of one worker slot to the store (all servers):
  // that worker is cut off, the others are not.
  virtual void isolate_slot(int slot, bool on) = 0;

  // SIGSTOP (on) / SIGCONT every process of every server (a frozen store:
  // the PostgreSQL postmaster and its backends, each Redis instance, the
  // ZooKeeper Java process).
  // false + *why if unsupported (an external store).
  virtual bool freeze(bool on, std::string* why) = 0;

  // batond only: libfiu failure points (false: unsupported, *why says
  // why). batond runs under fiu-run, its data dir on a tmpfs; the other
  // stores keep these defaults, which refuse.
  virtual bool fiu_enable(const std::string& /*point*/, std::string* why) {
    *why = "fiu faults are batond's only (it runs under fiu-run)";
    return false;
  }
  virtual void fiu_disable(const std::string& /*point*/) {}
  // batond only: fill / free the small tmpfs holding its data dir.
  virtual bool disk_fill(std::string* why) {
    *why = "disk_full is batond's only (its data dir on a tmpfs)";
    return false;
  }
  virtual void disk_free() {}
};

}  // namespace baton::torture

#endif  // BATON_TESTS_TORTURE_STORES_H_
