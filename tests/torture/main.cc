// tests/torture/main.cc — baton_torture: the torture test's one command
// (docs/reliability.md).
//
//   baton_torture --store-kind
//   batond|postgres|redis|rediss|redlock|zookeeper|zookeeper3|mysql|etcd|
//   etcds|sqlite
//                 [--seed S]
//                 [--duration 15s] [--workers 8] [--ttl 1s]
//                 [--minutes N] [--runs M] [--json] [--keep]
//                 [--no-clock-faults] [--no-proxy-faults] [--no-disk-faults]
//                 [--no-partitions] [--no-restart-guard] [--redlock-masters N]
//                 [--no-fencing --pause-longer-than-ttl [--expect-violations]]
//                 [--split-masters --expect-store-overlaps]
//   baton_torture --judge-store DIR [--ttl 1s]   (checker 10 on a kept run)
//
// Every run prints its seed; --seed S replays S's fault schedule (run i of
// a long run uses S + i). Exit 0: every run finished with no violation (with
// --expect-violations: at least 90% of the runs reported one; with
// --expect-store-overlaps: at least 90% of the runs reported a store overlap,
// checker 10's finding).
#include <signal.h>
#include <sys/random.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <iterator>
#include <sstream>

#include "core/duration.h"
#include "run.h"

namespace bt = baton::torture;

namespace {

// SIGINT / SIGTERM: finish the current run (its servers and workers are
// stopped and judged as usual), start no new one.
volatile sig_atomic_t g_stop = 0;
void on_stop_signal(int) { g_stop = 1; }

int usage(const std::string& why) {
  std::cerr
      << "baton_torture: " << why
      << "\nusage: baton_torture (--store-kind batond|postgres|redis|"
         "rediss|"
         "redlock|zookeeper|zookeeper3|mysql|etcd|etcds|sqlite | --store URL) "
         "[--seed S] "
         "[--duration 15s] [--workers 8] [--ttl 1s]"
         " [--minutes N] [--runs M] [--json] [--keep] "
         "[--no-clock-faults] [--no-proxy-faults] [--no-disk-faults] "
         "[--no-partitions] [--no-restart-guard] [--redlock-masters N] "
         "[--no-fencing] [--pause-longer-than-ttl] "
         "[--late-notice] [--shared-writes] [--expect-violations] "
         "[--split-masters] [--expect-store-overlaps] "
         "[--faults kind,kind,...] | --judge-store DIR...\n"
         "fault kinds: pause_holder kill_holder kill_store pause_store "
         "pause_leader kill_leader server_clock_step "
         "partition_leader partition_bridge partition_flap "
         "restart_empty restart_empty_majority "
         "proxy_cut proxy_blackhole proxy_delay isolate_holder "
         "clock_step fiu_fsync fiu_write disk_full\n";
  return 2;
}

bool parse_ms(const std::string& s, std::chrono::milliseconds* out) {
  auto d = baton::core::parse_duration(s);
  if (!d.ok()) return false;
  *out = *d;
  return true;
}

std::string json_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    if (static_cast<unsigned char>(c) < 0x20) continue;
    o += c;
  }
  return o;
}

void print_text(const bt::RunResult& r, int index, int total) {
  std::cout << "run " << index << "/" << total << " store=" << r.store_kind
            << " seed=" << r.seed;
  if (!r.error.empty()) {
    std::cout << " ERROR " << r.error << "\n";
    return;
  }
  auto count = [&](const char* k) {
    auto it = r.counts.find(k);
    return it == r.counts.end() ? 0 : it->second;
  };
  std::cout << " faults:";
  for (auto& [k, n] : r.faults) std::cout << " " << k << "=" << n;
  std::cout << " | ops=" << count("ops") << " grants=" << count("grants")
            << " writes_accepted=" << count("writes_accepted")
            << " worst_recovery=" << r.worst_recovery_ms << "ms"
            << " violations=" << r.violations
            << (r.violations == 0 ? " PASS" : " FAIL") << "\n";
  for (auto& s : r.skip_reasons) std::cout << "  note: " << s << "\n";
  for (auto& v : r.details) {
    std::cout << "  violation [" << v.checker << "] " << v.what << "\n";
  }
  if (const auto n = count("store_overlaps"); n > 0) {
    std::cout << "  store overlaps (checker 10, fencing's case): " << n << "\n";
  }
  for (auto& v : r.findings) {
    std::cout << "  finding [" << v.checker << "] " << v.what << "\n";
  }
  if (!r.dir.empty()) std::cout << "  logs kept in " << r.dir << "\n";
  std::cout.flush();
}

void print_json(const bt::RunResult& r) {
  std::cout << "{\"store\":\"" << r.store_kind << "\",\"seed\":" << r.seed
            << ",\"error\":\"" << json_escape(r.error) << "\",\"dir\":\""
            << json_escape(r.dir) << "\",\"faults\":{";
  bool first = true;
  for (auto& [k, n] : r.faults) {
    std::cout << (first ? "" : ",") << "\"" << k << "\":" << n;
    first = false;
  }
  std::cout << "},\"counts\":{";
  first = true;
  for (auto& [k, n] : r.counts) {
    std::cout << (first ? "" : ",") << "\"" << k << "\":" << n;
    first = false;
  }
  std::cout << "},\"violations\":" << r.violations
            << ",\"worst_recovery_ms\":" << r.worst_recovery_ms
            << ",\"notes\":[";
  first = true;
  for (auto& n : r.skip_reasons) {
    std::cout << (first ? "" : ",") << "\"" << json_escape(n) << "\"";
    first = false;
  }
  for (const auto* list : {&r.details, &r.findings}) {
    std::cout << (list == &r.details ? "],\"details\":[" : "],\"findings\":[");
    first = true;
    for (auto& v : *list) {
      std::cout << (first ? "" : ",") << "{\"checker\":\"" << v.checker
                << "\",\"what\":\"" << json_escape(v.what) << "\"}";
      first = false;
    }
  }
  std::cout << "]}\n";
  std::cout.flush();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "--worker") == 0) {
    return bt::worker_main(argc, argv);
  }
  bt::Options o;
  bool expect_violations = false;
  bool expect_overlaps = false;
  bool no_partitions = false;
  std::vector<std::string> judge_dirs;  // --judge-store (repeatable)
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](std::string* out) {
      if (i + 1 >= argc) return false;
      *out = argv[++i];
      return true;
    };
    std::string v;
    try {
      if (a == "--store-kind" && value(&v)) {
        o.store_kind = v;
      } else if (a == "--store" && value(&v)) {
        o.store_url = v;
        const auto colon = v.find(':');
        o.store_kind = colon == std::string::npos ? v : v.substr(0, colon);
      } else if (a == "--seed" && value(&v)) {
        o.seed = std::stoull(v);
      } else if (a == "--duration" && value(&v)) {
        if (!parse_ms(v, &o.duration)) return usage("bad --duration " + v);
      } else if (a == "--ttl" && value(&v)) {
        if (!parse_ms(v, &o.ttl)) return usage("bad --ttl " + v);
      } else if (a == "--workers" && value(&v)) {
        o.workers = std::stoi(v);
      } else if (a == "--minutes" && value(&v)) {
        o.minutes = std::stoi(v);
      } else if (a == "--runs" && value(&v)) {
        o.runs = std::stoi(v);
      } else if (a == "--json") {
        o.json = true;
      } else if (a == "--keep") {
        o.keep = true;
      } else if (a == "--no-fencing") {
        o.fencing = false;
      } else if (a == "--pause-longer-than-ttl") {
        o.pause_longer = true;
      } else if (a == "--no-clock-faults") {
        o.clock_faults = false;
      } else if (a == "--no-proxy-faults") {
        o.proxy_faults = false;
      } else if (a == "--no-disk-faults") {
        o.disk_faults = false;
      } else if (a == "--faults" && value(&v)) {
        std::stringstream ss(v);
        for (std::string k; std::getline(ss, k, ',');) {
          if (!k.empty()) o.only_faults.push_back(k);
        }
      } else if (a == "--late-notice") {
        o.late_notice = true;
      } else if (a == "--shared-writes") {
        o.shared_writes = true;
      } else if (a == "--expect-violations") {
        expect_violations = true;
      } else if (a == "--no-partitions") {
        no_partitions = true;
      } else if (a == "--redlock-masters" && value(&v)) {
        o.redlock_masters = std::stoi(v);
      } else if (a == "--no-restart-guard") {
        o.restart_guard = false;
      } else if (a == "--split-masters") {
        o.split_masters = true;
      } else if (a == "--expect-store-overlaps") {
        expect_overlaps = true;
      } else if (a == "--judge-store" && value(&v)) {
        judge_dirs.push_back(v);
      } else {
        return usage("unknown or incomplete argument '" + a + "'");
      }
    } catch (const std::exception&) {
      return usage("bad number after " + a);
    }
  }
  if (!judge_dirs.empty()) {
    int rc = 0;
    for (const auto& d : judge_dirs)
      rc = std::max(rc, bt::judge_store_dir(o, d));
    return rc;
  }
  if (o.workers < 1 || o.workers > 64) return usage("--workers must be 1..64");
  if (o.duration < std::chrono::seconds(3)) {
    return usage("--duration must be at least 3s");
  }
  if (o.runs < 1) return usage("--runs must be >= 1");
  o.keep_on_violation = !expect_violations && !expect_overlaps;
  // Partitions between members (etcd, zookeeper3): their network namespaces
  // need root and nftables (testing/stores/netns.h); without them the run says
  // so and goes on without those faults.
  if ((o.store_kind == "etcd" || o.store_kind == "zookeeper3") &&
      o.store_url.empty() && !no_partitions) {
    if (::geteuid() == 0 && ::access("/usr/sbin/nft", X_OK) == 0 &&
        ::access("/usr/sbin/ip", X_OK) == 0) {
      o.member_namespaces = true;
    } else {
      std::cout << "note: no partitions between members (they need "
                   "root, /usr/sbin/ip and /usr/sbin/nft)\n";
    }
  }
  if (o.redlock_masters < 3 || o.redlock_masters > 9) {
    return usage("--redlock-masters must be 3..9");
  }
  if (o.split_masters && o.store_kind != "redlock") {
    return usage("--split-masters is for --store-kind redlock");
  }
  if (o.store_kind == "memory") {
    return usage(
        "memory: is in-process; the workers are processes and "
        "would not share it. Use batond for a quick local run.");
  }
  if (o.store_url.empty()) {
    static const char* const kKinds[] = {
        "batond",     "postgres", "redis", "rediss", "redlock", "zookeeper",
        "zookeeper3", "mysql",    "etcd",  "etcds",  "sqlite"};
    if (std::find(std::begin(kKinds), std::end(kKinds), o.store_kind) ==
        std::end(kKinds)) {
      return usage("unknown --store-kind '" + o.store_kind + "'");
    }
  }
  char self[4096];
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return usage("cannot find /proc/self/exe");
  o.self.assign(self, static_cast<std::size_t>(n));
  if (o.seed == 0) {
    if (::getrandom(&o.seed, sizeof o.seed, 0) != sizeof o.seed) o.seed = 1;
    o.seed &= 0xffffffffffffULL;
  }
  const std::int64_t stop_at =
      o.minutes > 0 ? bt::real_us() + o.minutes * 60'000'000LL : 0;
  int done = 0, with_violations = 0, with_overlaps = 0, errors = 0;
  std::int64_t total_violations = 0, worst_recovery = 0;
  std::map<std::string, std::int64_t> fault_totals;
  // A peer that died (a worker killed -9, a server restarted) must not end
  // the orchestrator: writes report EPIPE instead.
  ::signal(SIGPIPE, SIG_IGN);
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
  for (int i = 0; i < o.runs; ++i) {
    if (stop_at != 0 && bt::real_us() >= stop_at) break;
    if (g_stop != 0) break;
    const std::uint64_t seed = o.seed + static_cast<std::uint64_t>(i);
    if (!o.json) {
      std::cout << "run " << i + 1 << "/" << o.runs << " store=" << o.store_kind
                << " seed=" << seed << " starting\n";
      std::cout.flush();
    }
    bt::RunResult r = bt::run_once(o, seed);
    o.json ? print_json(r) : print_text(r, i + 1, o.runs);
    ++done;
    if (!r.error.empty()) {
      ++errors;
      continue;
    }
    total_violations += r.violations;
    with_violations += r.violations > 0 ? 1 : 0;
    with_overlaps += r.counts["store_overlaps"] > 0 ? 1 : 0;
    worst_recovery = std::max(worst_recovery, r.worst_recovery_ms);
    for (auto& [k, c] : r.faults) fault_totals[k] += c;
  }
  std::ostringstream s;
  s << "summary store=" << o.store_kind << " first_seed=" << o.seed
    << " runs=" << done << " errors=" << errors
    << " runs_with_violations=" << with_violations
    << " violations=" << total_violations
    << " worst_recovery=" << worst_recovery << "ms faults:";
  for (auto& [k, c] : fault_totals) s << " " << k << "=" << c;
  const int judged = done - errors;
  if (expect_overlaps) {
    const bool ok = judged > 0 && with_overlaps * 10 >= judged * 9;
    s << " | negative control of checker 10: " << with_overlaps << "/" << judged
      << " runs saw a store overlap "
      << (ok ? "(>= 90%: PASS)" : "(< 90%: FAIL)");
    std::cout << s.str() << "\n";
    return ok && errors == 0 ? 0 : 1;
  }
  if (expect_violations) {
    const bool ok = judged > 0 && with_violations * 10 >= judged * 9;
    s << " | negative control: " << with_violations << "/" << judged
      << " runs saw a violation " << (ok ? "(>= 90%: PASS)" : "(< 90%: FAIL)");
    std::cout << s.str() << "\n";
    return ok && errors == 0 ? 0 : 1;
  }
  s << (total_violations == 0 && errors == 0 ? " PASS" : " FAIL");
  std::cout << s.str() << "\n";
  return total_violations == 0 && errors == 0 && done > 0 ? 0 : 1;
}
