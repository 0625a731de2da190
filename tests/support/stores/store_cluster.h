// tests/support/stores/store_cluster.h — private servers of one store kind
// for tests: started on free loopback ports in a directory the caller gives
// (tests/server/batond_process.h, tests/redis/redis_process.h,
// tests/postgres/pg_server.h; ZooKeeper, MariaDB, etcd and SQLite in files
// of their own here), each server behind one in-tree TCP fault proxy per
// slot (tests/support/tcp_proxy.h) when proxies are on, with the faults a
// test may inject: kill -9 and restart, freeze (SIGSTOP), a slot cut off,
// a server blackholed, and for batond libfiu failure points and a full
// disk. Every process started here is stopped by pid when the StoreCluster
// is destroyed. Library baton_test_stores; the tool baton_test_servers
// (serve_main.cc) drives it from stdin (README.md).
#ifndef BATON_TESTS_SUPPORT_STORES_STORE_CLUSTER_H_
#define BATON_TESTS_SUPPORT_STORES_STORE_CLUSTER_H_

#include <chrono>
#include <memory>
#include <string>

namespace baton::testing {

struct StoreOptions {
  // batond | postgres | redis | rediss | redlock | zookeeper | zookeeper3
  // (an ensemble of three) | mysql | etcd | etcds | sqlite. Ignored when
  // external_url is set.
  std::string kind = "batond";
  // Not empty: a store that runs elsewhere, any URL baton opens. Nothing is
  // started, killed, restarted or frozen; only the proxies are put in
  // front of each server of the URL.
  std::string external_url;
  // Number of proxy slots: each slot reaches every server through proxies
  // of its own, so one slot can be cut off while the others are not.
  int slots = 8;
  // false: no proxies; url(slot) is direct_url() and the network faults
  // are no-ops (has_proxy() false).
  bool proxies = true;
  // batond: its data dir on an 8 MiB tmpfs and batond run under fiu-run
  // (when /usr/bin/fiu-run exists), for fiu_enable() and disk_fill();
  // sqlite: the database on a 24 MiB tmpfs. Mounting needs root; without
  // it disk_fill() says why and fails.
  bool disk_faults = false;
  // zookeeper, zookeeper3: fsync every write before acknowledging it
  // (forceSync=yes), as the torture's kill -9 needs. A suite that never
  // restarts a server may turn it off: on a shared disk an fsync can take
  // longer than a call's deadline.
  bool fsync = true;
  // zookeeper, zookeeper3, redis, redlock: run each server with
  // libbaton_clockshift.so preloaded and a clock offset file of its own
  // (tests/support/server_clock.h), for step_server_clock(). start() fails
  // if the library was not built. (etcd is Go, whose runtime reads the
  // clock without libc: not reachable this way.)
  bool server_clocks = false;
  // The lease TTL the clients will use. zookeeper's URL carries a session
  // timeout of twice this (zk_cluster.cc says why); at most 30 s.
  std::chrono::milliseconds lease_ttl{1'000};
  // redlock: restart_guard in the URL (docs/stores/redis.md), and every
  // master's lock data marked as born long ago at start (a deployment that
  // has been running), so only a master restarted without its data
  // (restart_empty) is guarded. Zero: no guard.
  std::chrono::milliseconds restart_guard{0};
  // redlock: the number of masters (3..9).
  int redlock_masters = 3;
  // etcd, zookeeper3: each member in a network namespace of its own
  // (netns.h), so
  // cut_members() can partition members from each other while clients
  // reach every one. Needs root and nftables; start() fails saying why.
  bool member_namespaces = false;
};

class StoreCluster {
 public:
  // Starts the servers of options.kind in `dir` (an existing directory;
  // postgres and redis keep their data in temporary directories of their
  // own). nullptr + *error if they cannot be started or the kind is
  // unknown (nothing is left running then).
  static std::unique_ptr<StoreCluster> start(const StoreOptions& options,
                                             const std::string& dir,
                                             std::string* error);
  virtual ~StoreCluster() = default;

  // URL a client in `slot` uses: through that slot's own proxies (one per
  // server) when proxies are on, so that one client can be cut off while
  // the others keep reaching the store. slot is taken modulo the slots.
  virtual std::string url(int slot) const = 0;
  // URL straight to the servers.
  virtual std::string direct_url() const = 0;
  // libpq conninfo straight to PostgreSQL ("" for other stores).
  virtual std::string pg_conninfo() const = 0;
  // Number of servers that can be killed (0 for sqlite: none).
  virtual int servers() const = 0;
  // kill -9 server i; restart it on the same port and data.
  // restart() false + reason.
  virtual void kill9(int i) = 0;
  virtual bool restart(int i, std::string* error) = 0;
  // Deletes what server i persisted, while it is down (after kill9): its
  // restart() is then a server that lost its data. redis kinds only.
  virtual bool wipe(int /*i*/, std::string* why) {
    *why = "no data wipe on this store kind";
    return false;
  }

  // Network faults on the proxies in front of server i, every slot's
  // (no-ops without proxies).
  virtual bool has_proxy() const = 0;
  virtual void proxy_cut(int i) = 0;
  virtual void proxy_blackhole(int i, bool on) = 0;
  virtual void proxy_delay(int i, std::chrono::milliseconds one_way) = 0;
  // Blackholes every path of one slot to the store (all servers): that
  // slot's clients are cut off, the others are not.
  virtual void isolate_slot(int slot, bool on) = 0;

  // SIGSTOP (on) / SIGCONT every process of every server (a frozen store:
  // the PostgreSQL postmaster and its backends, each Redis instance, the
  // ZooKeeper Java process). false + *why if unsupported (sqlite, an
  // external store).
  virtual bool freeze(bool on, std::string* why) = 0;

  // Replicated stores (an etcd cluster, a ZooKeeper ensemble): the index of
  // the member that leads now, or -1 (none found, or no leader to find: a
  // single server, Redlock's independent masters, etcds:// whose status
  // needs TLS).
  virtual int leader() const { return -1; }
  // SIGSTOP (on) / SIGCONT server i alone: a paused leader, the process
  // pause of Jepsen's etcd analysis. false + *why if unsupported.
  virtual bool pause_server(int /*i*/, bool /*on*/, std::string* why) {
    if (why != nullptr) *why = "no server of its own to pause";
    return false;
  }
  // Drops (on) or restores (off) every packet between members i and j,
  // both ways; clients still reach both. Only with member_namespaces.
  virtual bool cut_members(int /*i*/, int /*j*/, bool /*on*/,
                           std::string* why) {
    if (why != nullptr) *why = "members are not in network namespaces";
    return false;
  }
  // The member links cut now ("0-1,0-2"; "" when none).
  virtual std::string member_cuts() const { return ""; }

  // Steps server i's wall clock to `offset` from the true time (zero
  // undoes it), at once; the server's monotonic clock never steps. Only
  // with server_clocks. false + *why if unsupported.
  virtual bool step_server_clock(int /*i*/,
                                 std::chrono::milliseconds /*offset*/,
                                 std::string* why) {
    if (why != nullptr) *why = "no server clock to step on this store";
    return false;
  }

  // batond only: libfiu failure points (false: unsupported, *why says
  // why). batond runs under fiu-run, its data dir on a tmpfs
  // (StoreOptions::disk_faults); the other stores keep these defaults,
  // which refuse.
  virtual bool fiu_enable(const std::string& /*point*/, std::string* why) {
    *why = "fiu faults are batond's only (it runs under fiu-run)";
    return false;
  }
  virtual void fiu_disable(const std::string& /*point*/) {}
  // batond and sqlite: fill / free the small tmpfs holding the data.
  virtual bool disk_fill(std::string* why) {
    *why = "disk_full is batond's and sqlite's only (data on a tmpfs)";
    return false;
  }
  virtual void disk_free() {}
};

}  // namespace baton::testing

#endif  // BATON_TESTS_SUPPORT_STORES_STORE_CLUSTER_H_
