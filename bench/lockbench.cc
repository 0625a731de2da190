// baton_lockbench — the load generator of src/bench/loadgen.h without the
// rest of the CLI (`baton bench` takes the same flags; docs/cli.md). Used by
// bench/run_batond.sh.
//
//   baton_lockbench --store baton://127.0.0.1:7420 --clients 50
//       --duration 10s --workload uncontended [--json]
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <thread>

#include "bench/loadgen.h"
#include "core/duration.h"

namespace {

constexpr const char* kUsage =
    "usage: baton_lockbench [--store URL] [--workload W] [--clients N]\n"
    "                       [--locks K] [--duration D] [--ttl D]\n"
    "                       [--prefix P] [--server-pid PID] [--no-label]\n"
    "                       [--json]\n"
    "  --store URL     baton store URL (baton://h:p, memory:, ...) or\n"
    "                  raw-redis://h:p[?script=eval|evalsha],\n"
    "                  raw-baton://h:p (batond, hiredis, no baton::Client),\n"
    "                  or raw-zk://h:p[?check=children|api=async|grant=write]\n"
    "                  (the ZooKeeper floor)\n"
    "                  (default baton://127.0.0.1:7420)\n"
    "  --workload W    uncontended (default) | contended | handoff | fair |\n"
    "                  mixed | microbatch | segments | hold | waiters\n"
    "  --clients N     clients (threads, one connection each); hold: "
    "connections;\n"
    "                  waiters: number of waiters (default 1; handoff 2)\n"
    "  --locks K       contended: locks shared by the clients; hold: leases\n"
    "                  to hold (default 1)\n"
    "  --duration D    hard bound of the run, e.g. 10s (default 10s)\n"
    "  --ttl D         lease TTL (default 30s)\n"
    "  --prefix P      lock-name prefix (default bench/<pid>)\n"
    "  --server-pid N  hold: read this process's VmRSS before and after\n"
    "  --no-label      hold: acquire without LABEL (default host:pid:prog)\n"
    "  --json          one JSON object on stdout\n";

int usage_error(const std::string& msg) {
  std::cerr << "baton_lockbench: " << msg << "\n" << kUsage;
  return 2;
}

bool parse_int(const char* s, long long* out) {
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0') return false;
  *out = v;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  baton::bench::LoadOptions o;
  bool json = false;
  bool clients_set = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) return nullptr;
      return argv[++i];
    };
    if (a == "--help" || a == "-h") {
      std::cout << kUsage;
      return 0;
    } else if (a == "--json") {
      json = true;
    } else if (a == "--no-label") {
      o.no_label = true;
    } else if (a == "--store" || a == "--workload" || a == "--clients" ||
               a == "--locks" || a == "--duration" || a == "--ttl" ||
               a == "--prefix" || a == "--server-pid") {
      const char* v = value();
      if (v == nullptr) return usage_error(a + " needs a value");
      long long n = 0;
      if (a == "--store") {
        o.store = v;
      } else if (a == "--prefix") {
        o.prefix = v;
      } else if (a == "--workload") {
        auto w = baton::bench::parse_workload(v);
        if (!w) return usage_error(w.error().message());
        o.workload = *w;
      } else if (a == "--duration" || a == "--ttl") {
        auto d = baton::core::parse_duration(v);
        if (!d) return usage_error(d.error().message());
        (a == "--duration" ? o.duration : o.ttl) = *d;
      } else {
        if (!parse_int(v, &n) || n < 0 || n > 100'000'000) {
          return usage_error(a + " needs a non-negative integer");
        }
        if (a == "--clients") {
          o.clients = static_cast<int>(n);
          clients_set = true;
        } else if (a == "--locks") {
          o.locks = n;
        } else {
          o.server_pid = static_cast<int>(n);
        }
      }
    } else {
      return usage_error("unknown argument \"" + a + "\"");
    }
  }
  if (!clients_set && o.workload == baton::bench::Workload::handoff) {
    o.clients = 2;
  }
  // Safety net: the run stops itself at --duration; if something hangs
  // anyway (a store that never answers), give up well after that.
  std::thread([limit = o.duration + std::chrono::seconds(60)] {
    std::this_thread::sleep_for(limit);
    std::fprintf(stderr, "baton_lockbench: watchdog: run did not finish\n");
    std::_Exit(3);
  }).detach();

  auto r = baton::bench::run_load(o);
  if (!r) {
    std::cerr << "baton_lockbench: " << r.error().to_string() << "\n";
    return 1;
  }
  std::cout << (json ? baton::bench::to_json(*r) + "\n"
                     : baton::bench::to_text(*r))
            << std::flush;
  return r->completed ? 0 : 1;
}
