// tests/torture/run.cc — see run.h. Starts the store, the guarded resource
// and the workers, runs the nemesis, stops everything, measures recovery
// (checker 5) and judges the logs (checkers.cc).
#include "run.h"

#include <fcntl.h>
#include <semaphore.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <future>
#include <thread>

#include "baton/client.h"
#include "baton/counter.h"
#include "nemesis.h"
#include "resource.h"
#include "tests/support/server_clock.h"
#include "tests/support/stores/store_cluster.h"

namespace baton::torture {
namespace {

// The negative control of checker 10: of "redlock://h1,h2,h3", slot `s`
// is given the one master "redis://h<s % 3 + 1>" (redlock:// itself refuses
// fewer than 3): workers that disagree on where the lock lives, each
// granted by its own server.
std::string one_master(const std::string& url, int s) {
  const std::string scheme = "redlock://";
  if (url.rfind(scheme, 0) != 0) return url;
  std::vector<std::string> hosts;
  std::string rest = url.substr(scheme.size());
  const auto q = rest.find('?');
  const std::string query = q == std::string::npos ? "" : rest.substr(q);
  rest = rest.substr(0, q);
  for (std::size_t at = 0; at <= rest.size();) {
    const auto comma = rest.find(',', at);
    const auto end = comma == std::string::npos ? rest.size() : comma;
    hosts.push_back(rest.substr(at, end - at));
    at = end + 1;
  }
  return "redis://" + hosts[static_cast<std::size_t>(s) % hosts.size()] + query;
}

// Workers in slots below this run under libfaketime (clock steps only).
constexpr int kClockSlots = 2;
constexpr const char* kFaketime =
    "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1";

}  // namespace

bool server_clocks_on(const Options& o) {
  return o.clock_faults && o.store_url.empty() && !o.split_masters &&
         (o.store_kind == "zookeeper" || o.store_kind == "zookeeper3" ||
          o.store_kind == "redlock") &&
         !testing::clockshift_library().empty();
}

namespace {

// The servers the run starts, from the harness's options: one proxy slot
// per worker.
testing::StoreOptions store_options(const Options& o) {
  testing::StoreOptions so;
  so.kind = o.store_kind;
  so.external_url = o.store_url;
  so.slots = o.workers;
  so.proxies = o.proxy_faults;
  so.disk_faults = o.disk_faults;
  so.lease_ttl = o.ttl;
  so.member_namespaces = o.member_namespaces;
  so.redlock_masters = o.redlock_masters;
  // (Not with --split-masters: its workers use one master each as a plain
  // redis:// store, which has no such option.)
  if (o.store_kind == "redlock" && o.restart_guard && !o.split_masters) {
    so.restart_guard = 3 * o.ttl;
  }
  so.server_clocks = server_clocks_on(o);
  return so;
}

class Pool : public WorkerPool {
 public:
  Pool(const Options& o, std::string dir, const testing::StoreCluster& store,
       std::uint64_t seed, std::int64_t deadline_us)
      : o_(o),
        dir_(std::move(dir)),
        store_(store),
        seed_(seed),
        deadline_us_(deadline_us) {
    const std::string status = dir_ + "/status";
    const int fd = ::open(status.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600);
    if (::ftruncate(fd, 4096) == 0) {
      void* p =
          ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
      if (p != MAP_FAILED) status_ = static_cast<std::int32_t*>(p);
    }
    ::close(fd);
    faketime_ = o.clock_faults && ::access(kFaketime, R_OK) == 0;
    slots_.resize(static_cast<std::size_t>(o.workers));
    for (int s = 0; s < o.workers; ++s) {
      set_clock(s, "+0");
      spawn(s);
    }
  }
  ~Pool() override {
    if (status_ != nullptr) ::munmap(status_, 4096);
  }

  std::vector<std::pair<int, int>> holders() const override {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<std::pair<int, int>> out;
    for (int s = 0; s < slots(); ++s) {
      const int v =
          status_ ? __atomic_load_n(&status_[s], __ATOMIC_SEQ_CST) : 0;
      if (v > 0 && slots_[static_cast<std::size_t>(s)].pid > 0) {
        out.push_back({s, v - 1});
      }
    }
    return out;
  }
  int slots() const override { return static_cast<int>(slots_.size()); }
  pid_t pid(int s) const override {
    std::lock_guard<std::mutex> lock(mu_);
    return slots_[static_cast<std::size_t>(s)].pid;
  }
  int incarnation(int s) const override {
    std::lock_guard<std::mutex> lock(mu_);
    return slots_[static_cast<std::size_t>(s)].id;
  }
  bool clock_faked(int s) const override {
    return faketime_ && s < kClockSlots;
  }
  void set_clock(int s, const std::string& offset) override {
    std::ofstream(dir_ + "/clock-" + std::to_string(s)) << offset << "\n";
  }
  bool faketime() const { return faketime_; }

  // libfaketime makes a shared-memory segment and a semaphore named after
  // the process and removes them only when it exits normally; a worker that
  // _exit()s mid-hold or is killed leaves them in /dev/shm (thousands over a
  // campaign). The pool removes them once it has reaped the worker.
  void forget_faketime(int s, pid_t p) const {
    if (!clock_faked(s)) return;
    ::shm_unlink(("/faketime_shm_" + std::to_string(p)).c_str());
    ::sem_unlink(("/faketime_sem_" + std::to_string(p)).c_str());
  }

  // Reaps exited workers; respawns them while `respawn`.
  void reap(bool respawn) {
    for (int s = 0; s < slots(); ++s) {
      pid_t p = pid(s);
      if (p <= 0) continue;
      int st = 0;
      if (::waitpid(p, &st, WNOHANG) == p) {
        forget_faketime(s, p);
        {
          std::lock_guard<std::mutex> lock(mu_);
          slots_[static_cast<std::size_t>(s)].pid = -1;
          if (status_ != nullptr)
            __atomic_store_n(&status_[s], 0, __ATOMIC_SEQ_CST);
        }
        ++exits_;
        if (respawn) spawn(s);
      }
    }
  }
  // Asks every worker to stop; kill -9 what is left after `grace`.
  void stop_all(std::chrono::milliseconds grace) {
    std::ofstream(dir_ + "/stop") << "stop\n";
    for (int s = 0; s < slots(); ++s) ::kill(pid(s), SIGCONT);
    const std::int64_t until = real_us() + grace.count() * 1000;
    while (real_us() < until) {
      reap(false);
      bool any = false;
      for (int s = 0; s < slots(); ++s) any = any || pid(s) > 0;
      if (!any) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    for (int s = 0; s < slots(); ++s) {
      if (pid(s) > 0) {
        ::kill(pid(s), SIGKILL);
        ++killed_at_stop_;
      }
    }
    for (int s = 0; s < slots(); ++s) {
      if (pid(s) > 0 && ::waitpid(pid(s), nullptr, 0) == pid(s)) {
        forget_faketime(s, pid(s));
      }
    }
  }
  int next_id() const { return next_id_; }
  int killed_at_stop() const { return killed_at_stop_; }

  // A clock step belongs to a slot (its offset file), not to the worker
  // it was aimed at: a worker that exits while its slot's clock is stepped
  // is respawned into the same stepped clock. `faults` plus, for every
  // clock_step, a copy for each later incarnation of that slot spawned
  // before the step healed (seen with etcd, seed 217030: a worker
  // respawned 0.2 s into a -2 s step reported its lease 2 s early).
  std::vector<Fault> with_inherited_clock_steps(
      const std::vector<Fault>& faults) {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<Fault> out = faults;
    for (const Fault& f : faults) {
      if (f.kind != "clock_step") continue;
      int slot = -1;
      for (const Life& l : lives_) {
        if (l.id == f.worker) slot = l.slot;
      }
      for (const Life& l : lives_) {
        if (l.slot != slot || l.id <= f.worker || l.spawned_us > f.end_us) {
          continue;
        }
        Fault g = f;
        g.worker = l.id;
        g.start_us = std::max(f.start_us, l.spawned_us);
        g.detail += " (inherited: respawned into the stepped slot)";
        out.push_back(std::move(g));
      }
    }
    return out;
  }

 private:
  struct Slot {
    pid_t pid = -1;
    int id = -1;
  };
  struct Life {
    int id = -1, slot = -1;
    std::int64_t spawned_us = 0;
  };
  void spawn(int s) {
    const int id = next_id_++;
    {
      std::lock_guard<std::mutex> lock(mu_);
      lives_.push_back({id, s, real_us()});
    }
    std::vector<std::string> args = {
        o_.self,
        "--worker",
        "--url",
        o_.split_masters ? one_master(store_.url(s), s) : store_.url(s),
        "--id",
        std::to_string(id),
        "--slot",
        std::to_string(s),
        "--log",
        dir_ + "/w" + std::to_string(id) + ".log",
        "--resource",
        dir_ + "/resource.sock",
        "--status",
        dir_ + "/status",
        "--stop",
        dir_ + "/stop",
        "--seed",
        std::to_string(seed_ * 1000003ULL + static_cast<std::uint64_t>(id)),
        "--deadline-us",
        std::to_string(deadline_us_),
        "--ttl-ms",
        std::to_string(o_.ttl.count()),
        "--counters",
        o_.counters ? "1" : "0",
        "--prefix",
        name_prefix(),
        "--late-notice",
        o_.late_notice ? "1" : "0",
        "--shared-writes",
        o_.shared_writes ? "1" : "0"};
    const std::string clock = dir_ + "/clock-" + std::to_string(s);
    const pid_t p = ::fork();
    if (p == 0) {
      if (clock_faked(s)) {
        ::setenv("LD_PRELOAD", kFaketime, 1);
        ::setenv("FAKETIME_TIMESTAMP_FILE", clock.c_str(), 1);
        // Re-read the offset file at most once a second (FAKETIME_NO_CACHE
        // halves the workers' throughput); checkers.cc adds that second
        // to every clock-step window.
        ::setenv("FAKETIME_CACHE_DURATION", "1", 1);
        // Step the wall clock only, as an NTP step or an operator does:
        // CLOCK_MONOTONIC never steps on a real machine, and libfaketime's
        // faked monotonic clock is not applied to pthread_cond_clockwait,
        // so a steady-clock condition-variable wait would never time out.
        ::setenv("FAKETIME_DONT_FAKE_MONOTONIC", "1", 1);
      }
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    std::lock_guard<std::mutex> lock(mu_);
    slots_[static_cast<std::size_t>(s)] = {p, id};
  }

  const Options& o_;
  std::string dir_;
  const testing::StoreCluster& store_;
  std::uint64_t seed_;
  std::int64_t deadline_us_;
  bool faketime_ = false;
  std::int32_t* status_ = nullptr;
  mutable std::mutex mu_;
  std::vector<Slot> slots_;  // guarded by mu_
  int next_id_ = 0;
  std::vector<Life> lives_;  // every incarnation, in spawn order
  int exits_ = 0;
  int killed_at_stop_ = 0;
};

// Checker 5: every lock acquirable within TTL + renew interval + 1 s —
// and 5 s more after a server's clock was stepped (the largest step): a
// lease written while that clock ran ahead ends by it, so it outlives the
// step's undoing by the step's size.
std::vector<Recovery> measure_recovery(const Options& o, const std::string& url,
                                       const std::vector<Fault>& faults) {
  std::vector<Recovery> out;
  const bool stepped = std::any_of(faults.begin(), faults.end(), [](auto& f) {
    return f.kind == "server_clock_step";
  });
  const auto bound = o.ttl + o.ttl / 3 + std::chrono::milliseconds(1000) +
                     (stepped ? std::chrono::milliseconds(5000)
                              : std::chrono::milliseconds(0));
  auto client = Client::open(url);
  std::vector<std::future<Recovery>> futs;
  const std::int64_t t0 = real_us();
  for (const LockSpec& spec : lock_specs()) {
    futs.push_back(std::async(std::launch::async, [&, spec] {
      Recovery r{spec.name, false, 0, bound.count(), ""};
      if (!client) {
        r.error = client.error().to_string();
        return r;
      }
      AcquireOptions ao;
      ao.ttl = o.ttl;
      ao.capacity = spec.capacity;
      auto lease = client->acquire(spec.name, bound, ao);
      r.elapsed_ms = (real_us() - t0) / 1000;
      r.acquired = lease.ok() && r.elapsed_ms <= bound.count();
      if (!lease) r.error = lease.error().to_string();
      if (lease) (void)client->release(*lease);
      return r;
    }));
  }
  for (auto& f : futs) out.push_back(f.get());
  return out;
}

}  // namespace

RunResult run_once(const Options& options, std::uint64_t seed) {
  Options o = options;
  o.counters = o.store_kind != "redlock";  // redlock:// offers no counters
  // A store of our own starts empty; an external one keeps every run's
  // state, so each run uses names of its own there.
  set_name_prefix(o.store_url.empty()
                      ? std::string("torture-")
                      : "torture-" + std::to_string(seed) + "-");
  RunResult r;
  if (o.clock_faults && ::access(kFaketime, R_OK) != 0) {
    o.clock_faults = false;
    r.skip_reasons.push_back(std::string("clock_step: no ") + kFaketime +
                             " (Debian package faketime)");
  }
  r.seed = seed;
  r.store_kind = o.store_kind;
  char tmpl[] = "/tmp/baton-torture-XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) {
    r.error = "mkdtemp failed";
    return r;
  }
  r.dir = tmpl;
  std::ofstream(r.dir + "/seed") << o.store_kind << " " << seed << "\n";
  std::vector<Fault> faults;
  std::vector<Fault> judged_faults;  // + clock steps inherited by respawns
  std::vector<Write> writes;
  std::vector<Op> ops;
  std::int64_t counter = 0;
  bool counter_known = false;
  {
    std::string err;
    auto store = testing::StoreCluster::start(store_options(o), r.dir, &err);
    if (!store) {
      r.error = "store: " + err;
      return r;
    }
    GuardedResource resource(r.dir + "/resource.sock", o.fencing,
                             store->pg_conninfo());
    if (!resource.start()) {
      r.error = "guarded resource: cannot listen on " + r.dir;
      return r;
    }
    const auto plan =
        plan_faults(o, store->has_proxy(), store->servers(), seed);
    const std::int64_t start = real_us();
    const std::int64_t end = start + o.duration.count() * 1000;
    Pool pool(o, r.dir, *store, seed, end + 4'000'000);
    // The nemesis runs on this (long-lived) thread: redis-server children
    // die with the thread that forked them (PR_SET_PDEATHSIG).
    std::thread reaper([&] {
      while (real_us() < end) {
        pool.reap(true);
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    });
    faults = run_nemesis(o, plan, *store, pool, start);  // all healed
    reaper.join();
    pool.stop_all(std::chrono::milliseconds(4000));
    judged_faults = pool.with_inherited_clock_steps(faults);
    r.counts["workers_spawned"] = pool.next_id();
    r.counts["workers_killed_at_stop"] = pool.killed_at_stop();
    r.counts["faketime"] = pool.faketime() ? 1 : 0;
    // A replicated store serves again once it has a leader: the last
    // heals may have ended with an election (a member restarted at the
    // run's end), and checker 5 judges how soon the locks are free again,
    // not how long an election takes. The wait is counted.
    if (o.store_kind == "etcd" || o.store_kind == "zookeeper3") {
      const std::int64_t from = real_us();
      while (store->leader() < 0 && real_us() - from < 15'000'000) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
      r.counts["recovery_leader_wait_ms"] = (real_us() - from) / 1000;
    }
    r.recovery = measure_recovery(o, store->direct_url(), faults);
    if (!o.counters) {
      counter_known = true;
    } else if (auto c = Client::open(store->direct_url())) {
      auto v = c->counter(counter_name()).get();
      counter_known = v.ok();
      if (v) counter = *v;
      if (!v) r.skip_reasons.push_back("counter: " + v.error().to_string());
    }
    resource.stop();
    writes = resource.writes();
  }
  std::string first_internal;  // the earliest `internal` error's message
  std::int64_t first_internal_us = 0;
  for (const auto& e : std::filesystem::directory_iterator(r.dir)) {
    const std::string name = e.path().filename().string();
    if (name.size() > 5 && name[0] == 'w' && name.ends_with(".log")) {
      int bad = 0;
      auto v = read_ops(e.path().string(), &bad);
      if (bad > 0) r.counts["log_lines_unparsed"] += bad;
      ops.insert(ops.end(), v.begin(), v.end());
    }
    if (name[0] == 'w' && name.ends_with(".log.internal")) {
      std::ifstream in(e.path());
      std::int64_t at = 0;
      std::string what;
      while (in >> at && std::getline(in, what)) {
        if (first_internal.empty() || at < first_internal_us) {
          first_internal_us = at;
          first_internal = name.substr(0, name.find('.')) + ":" + what;
        }
      }
    }
  }
  // An `internal` error is a bug in baton whatever the faults: reported
  // with its first message (a finding: the run's safety is judged apart).
  for (const Op& op : ops) {
    if (op.result == "internal") ++r.counts["internal_results"];
  }
  if (r.counts["internal_results"] > 0) {
    r.findings.push_back(
        {"internal-error",
         std::to_string(r.counts["internal_results"]) +
             " calls answered `internal`; the first: " + first_internal});
  }
  for (const Fault& f : faults) {
    ++r.faults[f.kind];
    if (f.kind.rfind("skip:", 0) == 0 || f.kind == "restart_failed") {
      r.skip_reasons.push_back(f.kind + ": " + f.detail);
    }
  }
  Judged j = check_all(o, ops, writes, judged_faults, counter, counter_known);
  r.details = std::move(j.violations);
  r.findings.insert(r.findings.end(), j.findings.begin(), j.findings.end());
  for (auto& [k, v] : j.counts) r.counts[k] = v;
  for (auto& [k, v] : j.counts) {
    if (k.rfind("violations_", 0) == 0) r.violations += v;
  }
  for (const Recovery& rec : r.recovery) {
    r.worst_recovery_ms = std::max(r.worst_recovery_ms, rec.elapsed_ms);
    if (!rec.acquired) {
      ++r.violations;
      ++r.counts["violations_5-recovery"];
      r.details.push_back({"5-recovery", rec.lock + ": not acquired within " +
                                             std::to_string(rec.bound_ms) +
                                             " ms (waited " +
                                             std::to_string(rec.elapsed_ms) +
                                             " ms): " + rec.error});
    }
  }
  // Faults are recorded for the report as well.
  {
    std::ofstream f(r.dir + "/faults.log");
    for (const Fault& x : judged_faults) {
      f << x.kind << " worker=" << x.worker << " " << x.start_us << " "
        << x.end_us << " " << x.detail << "\n";
    }
  }
  // Kept for a post-mortem: a run with a violation, or with a store
  // overlap (checker 10's finding: what the store did is in the logs).
  const bool worth_keeping =
      r.violations > 0 || r.counts.count("store_overlaps") > 0;
  if (!o.keep && (!worth_keeping || !o.keep_on_violation)) {
    std::error_code ec;
    std::filesystem::remove_all(r.dir, ec);
    r.dir.clear();
  }
  return r;
}

}  // namespace baton::torture
