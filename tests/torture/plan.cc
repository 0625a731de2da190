// tests/torture/plan.cc — the nemesis's schedule (nemesis.h): which fault
// kinds a store takes, and when, how long and how far each fault is, as a
// pure function of the options and the seed.
#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "nemesis.h"

namespace baton::torture {

std::vector<Planned> plan_faults(const Options& o, bool has_proxy, int servers,
                                 std::uint64_t seed) {
  std::mt19937_64 rng(seed ^ 0x6e656d65736973ULL);
  const std::int64_t ttl = o.ttl.count();
  const std::int64_t end = o.duration.count() - 1500;  // quiet tail
  std::vector<std::string> kinds;
  if (o.pause_longer) {
    kinds = {"pause_holder"};
  } else {
    kinds = {"pause_holder", "pause_holder", "kill_holder"};
    // An external store (--store URL) is not ours to kill.
    if (servers > 0 && o.store_url.empty()) {
      kinds.insert(kinds.end(), {"kill_store", "kill_store"});
    }
    if (has_proxy) {
      kinds.insert(kinds.end(), {"proxy_cut", "proxy_blackhole", "proxy_delay",
                                 "isolate_holder"});
    }
    if (servers > 0 && o.store_url.empty()) kinds.push_back("pause_store");
    // A replicated store's leader: paused past the TTL (Jepsen's etcd
    // finding), or killed (during a grant, as often as not).
    if (o.store_url.empty() &&
        (o.store_kind == "etcd" || o.store_kind == "zookeeper3")) {
      kinds.insert(kinds.end(), {"pause_leader", "kill_leader"});
    }
    // Redlock masters killed and restarted without their data, one or a
    // majority at once (the classic way Redlock grants twice;
    // restart_guard is the answer, torture.h).
    if (o.store_url.empty() && o.store_kind == "redlock" && !o.split_masters) {
      kinds.insert(kinds.end(), {"restart_empty", "restart_empty_majority"});
    }
    // Members cut from each other while clients reach every one: the
    // leader from both followers, one link (a bridge: the third member
    // sees both halves), a link that flaps.
    if (o.member_namespaces) {
      kinds.insert(kinds.end(),
                   {"partition_leader", "partition_bridge", "partition_flap"});
    }
    if (o.clock_faults) kinds.push_back("clock_step");
    // A server's wall clock stepped by more than the TTL (run.cc says on
    // which stores): a ZooKeeper lease ends at its node's mtime + TTL, the
    // leader's clock; a Redis key's expiry is the master's clock.
    if (server_clocks_on(o)) kinds.push_back("server_clock_step");
    if (o.store_kind == "batond" && o.store_url.empty() && o.disk_faults) {
      kinds.insert(kinds.end(), {"fiu_fsync", "fiu_write", "disk_full"});
    }
    // sqlite://: its database on a small tmpfs
    // (tests/support/stores/sqlite_cluster.cc).
    if (o.store_kind == "sqlite" && o.store_url.empty() && o.disk_faults) {
      kinds.push_back("disk_full");
    }
  }
  if (!o.only_faults.empty()) {
    std::erase_if(kinds, [&](const std::string& k) {
      return std::find(o.only_faults.begin(), o.only_faults.end(), k) ==
             o.only_faults.end();
    });
  }
  std::vector<Planned> plan;
  if (kinds.empty()) return plan;
  std::int64_t t = 500;
  while (true) {
    t += o.pause_longer ? between(rng, 300, 900) : between(rng, 400, 1600);
    if (t >= end) break;
    Planned p;
    p.at_ms = t;
    p.kind = kinds[static_cast<std::size_t>(
        between(rng, 0, static_cast<std::int64_t>(kinds.size()) - 1))];
    p.pick = rng();
    if (p.kind == "pause_holder") {
      p.length_ms = o.pause_longer ? between(rng, ttl * 3 / 2, ttl * 3)
                                   : between(rng, ttl / 5, ttl * 3);
    } else if (p.kind == "isolate_holder" || p.kind == "pause_store" ||
               p.kind == "pause_leader" || p.kind == "partition_leader" ||
               p.kind == "partition_bridge") {
      // Longer than the TTL: the holder's lease runs out while it is cut
      // off (rule 13), or while the store is frozen.
      p.length_ms = between(rng, ttl * 6 / 5, ttl * 3);
    } else if (p.kind == "kill_store" || p.kind == "kill_leader" ||
               p.kind == "restart_empty") {
      p.length_ms = between(rng, 100, 1500);
      p.amount = servers > 0 ? between(rng, 0, servers - 1) : 0;
    } else if (p.kind == "partition_flap") {
      p.length_ms = between(rng, 1500, 3000);
      p.amount = servers > 0 ? between(rng, 0, servers - 1) : 0;
    } else if (p.kind == "restart_empty_majority") {
      // A quick restart (a supervisor's): back within the TTL, while the
      // leases the masters forgot still run.
      p.length_ms = between(rng, 50, 400);
      p.amount = servers > 0 ? between(rng, 0, servers - 1) : 0;
    } else if (p.kind == "proxy_blackhole") {
      p.length_ms = between(rng, 300, 2500);
      p.amount = servers > 0 ? between(rng, 0, servers - 1) : 0;
    } else if (p.kind == "proxy_delay") {
      p.length_ms = between(rng, 1000, 3000);
      p.amount = between(rng, 20, 400);
    } else if (p.kind == "proxy_cut") {
      p.amount = servers > 0 ? between(rng, 0, servers - 1) : 0;
    } else if (p.kind == "clock_step") {
      p.length_ms = between(rng, 1000, 3000);
      p.amount = between(rng, 1, 5) * (between(rng, 0, 1) ? 1 : -1);
    } else if (p.kind == "server_clock_step") {
      // More than the TTL, forward or back, whole seconds (libfaketime).
      p.length_ms = between(rng, 1500, 4000);
      const std::int64_t ttl_s = std::max<std::int64_t>(1, ttl / 1000);
      p.amount = between(rng, ttl_s + 1, std::min<std::int64_t>(5, ttl_s + 4)) *
                 (between(rng, 0, 1) ? 1 : -1);
    } else if (p.kind == "fiu_fsync" || p.kind == "fiu_write" ||
               p.kind == "disk_full") {
      p.length_ms = between(rng, 200, 1200);
    }
    p.length_ms = std::min(p.length_ms, o.duration.count() - 200 - t);
    plan.push_back(p);
  }
  return plan;
}

}  // namespace baton::torture
