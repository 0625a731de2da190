// tests/torture/nemesis.cc — see nemesis.h: the faults of a schedule
// (plan.cc), applied and healed at their times.
#include "nemesis.h"

#include <signal.h>

#include <algorithm>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <thread>

namespace baton::torture {
namespace {

// "0-1,0-2" (StoreCluster::member_cuts) as ordered pairs.
std::set<std::pair<int, int>> parse_member_cuts(const std::string& cuts) {
  std::set<std::pair<int, int>> out;
  std::size_t at = 0;
  while (at < cuts.size()) {
    std::size_t end = cuts.find(',', at);
    if (end == std::string::npos) end = cuts.size();
    const std::string link = cuts.substr(at, end - at);
    const std::size_t dash = link.find('-');
    if (dash != std::string::npos) {
      const int a = std::stoi(link.substr(0, dash));
      const int b = std::stoi(link.substr(dash + 1));
      out.insert({std::min(a, b), std::max(a, b)});
    }
    at = end + 1;
  }
  return out;
}

}  // namespace

std::vector<Fault> run_nemesis(const Options& o,
                               const std::vector<Planned>& plan,
                               testing::StoreCluster& store, WorkerPool& pool,
                               std::int64_t start_us) {
  std::vector<Fault> faults;
  struct Heal {
    std::int64_t at_us;
    std::size_t fault;
    std::function<void()> act;
  };
  std::vector<Heal> heals;
  std::set<int> stopped_slots, clock_slots, isolated_slots;
  std::set<int> stepped_servers;           // a server clock step is on
  std::set<int> paused_servers;            // pause_leader: SIGSTOPped
  std::map<int, std::int64_t> resumed_us;  // slot -> its last SIGCONT
  // A server that is down, or under a disk fault, takes no other server
  // fault until it is healed (one restart at a time per server).
  std::set<int> busy_servers;

  auto sleep_until = [](std::int64_t us) {
    const std::int64_t now = real_us();
    if (us > now)
      std::this_thread::sleep_for(std::chrono::microseconds(us - now));
  };
  auto run_heals = [&](std::int64_t until_us) {
    // Sorted again after each heal: one may schedule another
    // (restart_empty).
    auto by_time = [](const Heal& a, const Heal& b) {
      return a.at_us < b.at_us;
    };
    std::sort(heals.begin(), heals.end(), by_time);
    while (!heals.empty() && heals.front().at_us <= until_us) {
      Heal h = std::move(heals.front());
      heals.erase(heals.begin());
      sleep_until(h.at_us);
      h.act();
      faults[h.fault].end_us = real_us();
      std::sort(heals.begin(), heals.end(), by_time);
    }
  };
  auto record = [&](const std::string& kind, int worker,
                    const std::string& detail) {
    faults.push_back({kind, worker, real_us(), real_us(), detail});
    return faults.size() - 1;
  };
  auto restart_server = [&](int i) {
    std::string err;
    if (!store.restart(i, &err)) {
      faults.push_back({"restart_failed", -1, real_us(), real_us(), err});
    }
  };
  // A member with a cut link, or cut off from a majority of the running
  // members, may not become ready (a restart waits until it serves, which
  // needs a leader it can hear: after a bridge cut the leader may be the
  // one member it cannot reach, and the third member, which hears that
  // leader, votes for no other). Its restart waits until the heals free
  // it. Restarting it in place would block the heal queue behind a
  // readiness wait that only a later heal in that queue can end.
  // Nor while another member is paused: its SIGCONT, due in the same
  // queue, would wait behind the restart's election.
  auto reaches_quorum = [&](int i) {
    const int n = store.servers();
    if (n < 3) return true;
    if (std::any_of(paused_servers.begin(), paused_servers.end(),
                    [i](int j) { return j != i; })) {
      return false;
    }
    const std::set<std::pair<int, int>> cut =
        parse_member_cuts(store.member_cuts());
    int reach = 1;
    for (int j = 0; j < n; ++j) {
      if (j == i) continue;
      if (cut.count({std::min(i, j), std::max(i, j)}) > 0) return false;
      if (busy_servers.count(j) == 0) ++reach;
    }
    return reach > n / 2;
  };
  // Restarts member i once it is free to (looked at every 100 ms),
  // then runs `after`; the fault ends then.
  std::function<void(int, std::size_t, std::function<void()>)> restart_member =
      [&](int i, std::size_t f, std::function<void()> after) {
        if (!reaches_quorum(i)) {
          heals.push_back({real_us() + 100'000, f,
                           [&, i, f, after] { restart_member(i, f, after); }});
          return;
        }
        restart_server(i);
        after();
      };

  for (const Planned& p : plan) {
    const std::int64_t at = start_us + p.at_ms * 1000;
    run_heals(at);
    sleep_until(at);
    const std::int64_t heal_at = real_us() + p.length_ms * 1000;
    if (p.kind == "pause_holder" || p.kind == "kill_holder" ||
        p.kind == "clock_step") {
      std::vector<std::pair<int, int>> cands;
      // Nobody eligible holds a lock right now: look again, 30 × 30 ms.
      for (int tries = 0; tries < 30 && cands.empty(); ++tries) {
        if (tries > 0) std::this_thread::sleep_for(milliseconds(30));
        if (p.kind == "clock_step") {
          for (int s = 0; s < pool.slots(); ++s) {
            if (pool.clock_faked(s)) cands.push_back({s, -1});
          }
        } else {
          cands = pool.holders();
          std::erase_if(cands,
                        [&](auto& c) { return pool.clock_faked(c.first); });
        }
        // Negative control: a holder that writes to a mutex (locks 0 and
        // 1) without looking at its lease first, so its first write after
        // the pause is stale: not a keeper's (it checks its deadline), not a
        // shared one (it reads), and not one resumed in the last 300 ms (a
        // pause right at its resume only lengthens the last one, and its
        // stale write never comes).
        if (o.pause_longer) {
          const std::int64_t now = real_us();
          std::erase_if(cands, [&](auto& c) {
            const auto r = resumed_us.find(c.first);
            return c.second % 16 > 1 ||
                   (c.second & (kHoldKept | kHoldShared)) != 0 ||
                   (r != resumed_us.end() && now - r->second < 300'000);
          });
        }
        std::erase_if(cands, [&](auto& c) {
          return stopped_slots.count(c.first) > 0 ||
                 (p.kind == "clock_step" && clock_slots.count(c.first) > 0);
        });
      }
      if (cands.empty()) {
        record("skip:" + p.kind, -1, "no eligible worker");
        continue;
      }
      const auto [slot, lock] = cands[p.pick % cands.size()];
      const pid_t pid = pool.pid(slot);
      const int inc = pool.incarnation(slot);
      if (p.kind == "kill_holder") {
        record(p.kind, inc, "lock " + std::to_string(lock % 16));
        ::kill(pid, SIGKILL);
      } else if (p.kind == "pause_holder") {
        const auto f = record(p.kind, inc,
                              std::to_string(p.length_ms) + " ms, lock " +
                                  std::to_string(lock % 16));
        ::kill(pid, SIGSTOP);
        stopped_slots.insert(slot);
        heals.push_back({heal_at, f, [&, pid, slot] {
                           ::kill(pid, SIGCONT);
                           stopped_slots.erase(slot);
                           resumed_us[slot] = real_us();
                         }});
      } else {
        const std::string off =
            (p.amount > 0 ? "+" : "") + std::to_string(p.amount);
        const auto f = record(p.kind, inc, off + " s");
        pool.set_clock(slot, off);
        clock_slots.insert(slot);
        heals.push_back({heal_at, f, [&, slot] {
                           pool.set_clock(slot, "+0");
                           clock_slots.erase(slot);
                         }});
      }
    } else if (p.kind == "isolate_holder") {
      // One holder's every path to the store goes silent; the others still
      // reach it. A holder that keeps its lease with a keeper is preferred
      // (the lost notice is what checker 8 judges).
      std::vector<std::pair<int, int>> cands;
      for (int tries = 0; tries < 30 && cands.empty(); ++tries) {
        if (tries > 0) std::this_thread::sleep_for(milliseconds(30));
        cands = pool.holders();
        std::erase_if(cands, [&](auto& c) {
          return isolated_slots.count(c.first) > 0 ||
                 stopped_slots.count(c.first) > 0;
        });
        std::vector<std::pair<int, int>> keepers = cands;
        std::erase_if(keepers,
                      [](auto& c) { return (c.second & kHoldKept) == 0; });
        // The negative control of checker 8 cuts off mutex holders only
        // (a semaphore's next grant need not wait for a lease to end).
        if (o.late_notice) {
          std::erase_if(keepers, [](auto& c) { return c.second % 16 >= 2; });
          cands = keepers;
        }
        if (!keepers.empty()) cands = keepers;
      }
      if (cands.empty()) {
        record("skip:" + p.kind, -1, "no eligible worker");
        continue;
      }
      const auto [slot, lock] = cands[p.pick % cands.size()];
      // worker -1: a network fault, not excused by checkers 3 and 7.
      const auto f = record(p.kind, -1,
                            "worker " + std::to_string(pool.incarnation(slot)) +
                                " slot " + std::to_string(slot) + ", lock " +
                                std::to_string(lock % 16) +
                                ((lock & kHoldKept) != 0 ? " (keeper)" : "") +
                                ", " + std::to_string(p.length_ms) + " ms");
      store.isolate_slot(slot, true);
      isolated_slots.insert(slot);
      heals.push_back({heal_at, f, [&, slot] {
                         store.isolate_slot(slot, false);
                         isolated_slots.erase(slot);
                       }});
    } else if (p.kind == "pause_store") {
      if (!busy_servers.empty()) {
        record("skip:" + p.kind, -1, "a server is down or under a fault");
        continue;
      }
      std::string why;
      if (!store.freeze(true, &why)) {
        record("skip:" + p.kind, -1, why);
        continue;
      }
      const auto f = record(p.kind, -1, std::to_string(p.length_ms) + " ms");
      for (int i = 0; i < store.servers(); ++i) busy_servers.insert(i);
      // From the moment the servers stopped: finding their processes reads
      // /proc, which took over a second on a loaded machine.
      heals.push_back({real_us() + p.length_ms * 1000, f, [&] {
                         store.freeze(false, nullptr);
                         busy_servers.clear();
                       }});
    } else if (p.kind == "kill_store") {
      const int i = static_cast<int>(p.amount);
      if (busy_servers.count(i) > 0) {
        record("skip:" + p.kind, -1, "server down or under a disk fault");
        continue;
      }
      const auto f = record(p.kind, -1, "server " + std::to_string(i));
      store.kill9(i);
      busy_servers.insert(i);
      heals.push_back({heal_at, f, [&, i, f] {
                         restart_member(i, f,
                                        [&, i] { busy_servers.erase(i); });
                       }});
    } else if (p.kind == "restart_empty" ||
               p.kind == "restart_empty_majority") {
      // One master, or a majority at once (the second crash the Redlock
      // debate asks about: a majority then forgets every lease it held).
      const int n = std::max(1, store.servers());
      const int first = static_cast<int>(p.amount);
      const int count = p.kind == "restart_empty" ? 1 : n / 2 + 1;
      std::vector<int> set;
      for (int k = 0; k < count; ++k) set.push_back((first + k) % n);
      if (std::any_of(set.begin(), set.end(),
                      [&](int i) { return busy_servers.count(i) > 0; })) {
        record("skip:" + p.kind, -1, "server down or under a disk fault");
        continue;
      }
      // With restart_guard the fault lasts until the guard has passed
      // after the restart, and a second more: till then the masters do not
      // vote, and a lock that needs their votes is unavailable. (A master's
      // guard runs from its first client connection after the restart,
      // which comes a little later.)
      const std::int64_t guard_us =
          o.restart_guard ? 3 * o.ttl.count() * 1000 + 1'000'000 : 0;
      std::string which;
      for (int i : set) which += (which.empty() ? "" : ",") + std::to_string(i);
      const auto f = record(
          p.kind, -1,
          "servers " + which +
              (guard_us > 0 ? ", restart_guard " +
                                  std::to_string(3 * o.ttl.count()) + " ms"
                            : std::string(", no restart_guard")));
      for (int i : set) {
        store.kill9(i);
        busy_servers.insert(i);
      }
      heals.push_back({heal_at, f, [&, set, f, guard_us] {
                         for (int i : set) {
                           std::string why;
                           if (!store.wipe(i, &why)) {
                             faults.push_back({"restart_failed", -1, real_us(),
                                               real_us(), why});
                           }
                           restart_server(i);
                         }
                         // Ended (and the servers free for other faults)
                         // once the guard has passed.
                         heals.push_back({real_us() + guard_us, f, [&, set] {
                                            for (int i : set) {
                                              busy_servers.erase(i);
                                            }
                                          }});
                       }});
    } else if (p.kind == "partition_leader" || p.kind == "partition_bridge" ||
               p.kind == "partition_flap") {
      const int n = store.servers();
      if (!store.member_cuts().empty() || n < 3) {
        record("skip:" + p.kind, -1, "members already partitioned");
        continue;
      }
      // The links to cut: the leader's to every other member, or one link
      // i-j (the others see both ends).
      std::vector<std::pair<int, int>> links;
      std::string what;
      if (p.kind == "partition_leader") {
        const int leader = store.leader();
        if (leader < 0) {
          record("skip:" + p.kind, -1, "no leader found");
          continue;
        }
        for (int j = 0; j < n; ++j) {
          if (j != leader) links.push_back({leader, j});
        }
        what = "leader " + std::to_string(leader) + " cut from the others";
      } else {
        const int i = static_cast<int>(p.pick % static_cast<std::uint64_t>(n));
        links.push_back({i, (i + 1) % n});
        what = "link " + std::to_string(i) + "-" + std::to_string((i + 1) % n);
      }
      auto set_links = [&store, links](bool on) {
        bool ok = true;
        std::string why;
        for (const auto& [a, b] : links) {
          ok = store.cut_members(a, b, on, &why) && ok;
        }
        return ok;
      };
      if (!set_links(true)) {
        set_links(false);
        record("skip:" + p.kind, -1, "the member network refused the cut");
        continue;
      }
      if (p.kind == "partition_flap") {
        // Healed and cut again every 100-300 ms until it ends (healed).
        const auto f = record(p.kind, -1, what + ", flapping");
        std::mt19937_64 flips(p.pick);
        bool cut = true;
        for (std::int64_t t = real_us() + between(flips, 100, 300) * 1000;
             t < heal_at; t += between(flips, 100, 300) * 1000) {
          cut = !cut;
          heals.push_back({t, f, [set_links, cut] { set_links(cut); }});
        }
        heals.push_back({heal_at, f, [set_links] { set_links(false); }});
      } else {
        const auto f = record(p.kind, -1, what);
        heals.push_back({heal_at, f, [set_links] { set_links(false); }});
      }
    } else if (p.kind == "server_clock_step") {
      // Redlock: a majority of the masters, each stepped by the same
      // amount (the critique's scenario: a majority's keys expire early,
      // or late). Elsewhere the leader's clock where there is one
      // (ZooKeeper's mtimes are the leader's), else the one server's.
      std::vector<int> set;
      const int leader = store.leader();
      if (o.store_kind == "redlock") {
        const int n = std::max(1, store.servers());
        const int first = static_cast<int>(p.pick % static_cast<unsigned>(n));
        for (int k = 0; k < n / 2 + 1; ++k) set.push_back((first + k) % n);
      } else {
        set.push_back(leader >= 0 ? leader : 0);
      }
      if (std::any_of(set.begin(), set.end(),
                      [&](int i) { return stepped_servers.count(i) > 0; })) {
        record("skip:" + p.kind, -1, "a server's clock is stepped already");
        continue;
      }
      const auto by = std::chrono::seconds(p.amount);
      std::string why, which;
      bool ok = true;
      for (int i : set) {
        ok = store.step_server_clock(i, by, &why) && ok;
        which += (which.empty() ? "" : ",") + std::to_string(i);
      }
      if (!ok) {
        for (int i : set) store.step_server_clock(i, {}, nullptr);
        record("skip:" + p.kind, -1, why);
        continue;
      }
      const auto f = record(
          p.kind, -1,
          (set.size() > 1 ? "servers " : "server ") + which +
              (leader >= 0 && o.store_kind != "redlock" ? " (leader) " : " ") +
              (p.amount > 0 ? "+" : "") + std::to_string(p.amount) + " s, " +
              std::to_string(p.length_ms) + " ms");
      stepped_servers.insert(set.begin(), set.end());
      heals.push_back({heal_at, f, [&, set] {
                         for (int i : set) {
                           store.step_server_clock(i, {}, nullptr);
                           stepped_servers.erase(i);
                         }
                       }});
    } else if (p.kind == "pause_leader" || p.kind == "kill_leader") {
      if (!busy_servers.empty()) {
        record("skip:" + p.kind, -1, "a server is down or under a fault");
        continue;
      }
      const int i = store.leader();
      if (i < 0) {
        record("skip:" + p.kind, -1, "no leader found");
        continue;
      }
      const std::string which = "server " + std::to_string(i) + " (leader)";
      if (p.kind == "kill_leader") {
        const auto f = record(p.kind, -1, which);
        store.kill9(i);
        busy_servers.insert(i);
        heals.push_back({heal_at, f, [&, i, f] {
                           restart_member(i, f,
                                          [&, i] { busy_servers.erase(i); });
                         }});
        continue;
      }
      std::string why;
      if (!store.pause_server(i, true, &why)) {
        record("skip:" + p.kind, -1, why);
        continue;
      }
      const auto f = record(p.kind, -1,
                            which + ", " + std::to_string(p.length_ms) + " ms");
      busy_servers.insert(i);
      paused_servers.insert(i);
      heals.push_back({heal_at, f, [&, i] {
                         store.pause_server(i, false, nullptr);
                         paused_servers.erase(i);
                         busy_servers.erase(i);
                       }});
    } else if (p.kind == "proxy_cut") {
      record(p.kind, -1, "server " + std::to_string(p.amount));
      store.proxy_cut(static_cast<int>(p.amount));
    } else if (p.kind == "proxy_blackhole") {
      const int i = static_cast<int>(p.amount);
      const auto f = record(p.kind, -1, "server " + std::to_string(i));
      store.proxy_blackhole(i, true);
      heals.push_back(
          {heal_at, f, [&, i] { store.proxy_blackhole(i, false); }});
    } else if (p.kind == "proxy_delay") {
      const auto f = record(p.kind, -1, std::to_string(p.amount) + " ms");
      for (int i = 0; i < store.servers(); ++i) {
        store.proxy_delay(i, milliseconds(p.amount));
      }
      heals.push_back({heal_at, f, [&] {
                         for (int i = 0; i < store.servers(); ++i) {
                           store.proxy_delay(i, milliseconds(0));
                         }
                       }});
    } else if (p.kind == "fiu_fsync" || p.kind == "fiu_write" ||
               p.kind == "disk_full") {
      if (busy_servers.count(0) > 0) {
        record("skip:" + p.kind, -1, "server down or under a disk fault");
        continue;
      }
      std::string why;
      const std::string point =
          p.kind == "fiu_fsync" ? "posix/io/sync/*" : "posix/io/rw/write*";
      const bool ok = p.kind == "disk_full" ? store.disk_fill(&why)
                                            : store.fiu_enable(point, &why);
      if (!ok) {
        record("skip:" + p.kind, -1, why);
        continue;
      }
      const auto f =
          record(p.kind, -1, p.kind == "disk_full" ? "tmpfs" : point);
      busy_servers.insert(0);
      // batond refuses changes after a failed write/fsync until restarted
      // (docs/server.md): the operator's restart is part of the fault.
      heals.push_back({heal_at, f, [&, kind = p.kind, point] {
                         if (kind == "disk_full") {
                           store.disk_free();
                         } else {
                           store.fiu_disable(point);
                         }
                         store.kill9(0);
                         restart_server(0);
                         busy_servers.erase(0);
                       }});
    }
  }
  run_heals(INT64_MAX);
  return faults;
}

}  // namespace baton::torture
