// tests/torture/worker.cc — one worker process: loops acquire → fenced
// writes → release through the public API, logging every operation.
//
// The worker writes first and checks its lease after (a pause between "is
// my lease valid?" and "write" is exactly what fencing must catch), so a
// worker resumed after SIGSTOP writes once with its stale token.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>

#include "baton/client.h"
#include "baton/counter.h"
#include "baton/keeper.h"
#include "old_keeper.h"
#include "starvation.h"
#include "torture.h"

namespace baton::torture {

std::int64_t real_us() {
  timespec ts{};
  ::syscall(SYS_clock_gettime, CLOCK_REALTIME, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000 + ts.tv_nsec / 1000;
}

namespace {
std::string g_name_prefix = "torture-";
}  // namespace

void set_name_prefix(std::string prefix) { g_name_prefix = std::move(prefix); }
const std::string& name_prefix() { return g_name_prefix; }

std::vector<LockSpec> lock_specs() {
  return {{g_name_prefix + "m0", 1},
          {g_name_prefix + "m1", 1},
          {g_name_prefix + "s0", 3}};
}
std::string counter_name() { return g_name_prefix + "ctr"; }

namespace {

struct Args {
  std::string url, log, resource, status, stop;
  int id = 0, slot = 0;
  std::uint64_t seed = 1;
  std::int64_t deadline_us = 0;
  milliseconds ttl{1000};
  bool counters = true;
  bool late_notice = false;    // checker 8's negative control
  bool shared_writes = false;  // checker 9's: shared holders write too
};

using Steady = std::chrono::steady_clock;

// A steady_clock time point on the harness' clock, real_us(): both clocks
// read at one moment. Under libfaketime only the wall clock is faked
// (FAKETIME_DONT_FAKE_MONOTONIC) and real_us() bypasses it, so this holds
// in the clock-stepped workers as well.
std::int64_t steady_to_real(Steady::time_point t) {
  const std::int64_t r = real_us();
  const auto s = Steady::now();
  return r +
         std::chrono::duration_cast<std::chrono::microseconds>(t - s).count();
}

class Worker {
 public:
  explicit Worker(Args a) : a_(std::move(a)), rng_(a_.seed) {}

  int run() {
    log_ = std::fopen(a_.log.c_str(), "a");
    if (log_ == nullptr) return 2;
    map_status();
    ClientOptions co;
    co.label = "w" + std::to_string(a_.id);
    co.request_timeout = milliseconds(1500);
    co.max_retries = 2;
    auto client = Client::open(a_.url, co);
    // The store may be down (nemesis): try again until the deadline.
    while (!client && client.error().code() == Errc::unavailable &&
           real_us() < a_.deadline_us && !std::filesystem::exists(a_.stop)) {
      std::this_thread::sleep_for(milliseconds(100));
      client = Client::open(a_.url, co);
    }
    if (!client) {
      std::fprintf(stderr, "worker %d: %s\n", a_.id,
                   client.error().to_string().c_str());
      return 3;
    }
    client_.emplace(*client);
    while (real_us() < a_.deadline_us && !std::filesystem::exists(a_.stop)) {
      step();
    }
    // A clean exit: closing the client ends what it still holds (a
    // zookeeper:// session's close deletes its nodes). Logged first, so
    // checker 10 holds this worker's leases to no later than this.
    Op e = begin("exit", "-");
    e.complete_us = e.invoke_us;
    e.result = "ok";
    log(e);
    client_.reset();
    return 0;
  }

 private:
  int uniform(int lo, int hi) {
    return std::uniform_int_distribution<int>(lo, hi)(rng_);
  }
  bool chance(int percent) { return uniform(1, 100) <= percent; }

  // Called from the worker's thread and from on_lost (the session's notice
  // thread).
  void log(const Op& o) {
    std::lock_guard<std::mutex> g(log_mu_);
    std::fprintf(
        log_, "%d %s %s %lld %lld %s %llu %lld %lld %llu %lld %d\n", a_.id,
        o.kind.c_str(), o.lock.c_str(), static_cast<long long>(o.invoke_us),
        static_cast<long long>(o.complete_us), o.result.c_str(),
        static_cast<unsigned long long>(o.fencing),
        static_cast<long long>(o.expires_ms), static_cast<long long>(o.wait_ms),
        static_cast<unsigned long long>(o.seq), static_cast<long long>(o.aux),
        o.shared ? 1 : 0);
    std::fflush(log_);
  }
  // How long this process, or the call's own threads, could not run
  // during `o` (checker 7; starvation.h).
  std::int64_t stalled(const Op& o, const RunQueueWait& before) {
    return std::max(probe_.stalled(o.invoke_us, o.complete_us),
                    RunQueueWait::now().since(before));
  }

  Op begin(std::string kind, std::string lock) const {
    Op o;
    o.worker = a_.id;
    o.kind = std::move(kind);
    o.lock = std::move(lock);
    o.invoke_us = real_us();
    return o;
  }
  // The result word of a failed call. An `internal` error is a bug in
  // baton, and its code alone says nothing: its message goes to
  // <log>.internal (one line each, with the time) for the run's report.
  std::string res(const Error& e) {
    if (e.code() == Errc::internal) {
      std::lock_guard<std::mutex> g(internal_mu_);
      if (std::FILE* f = std::fopen((a_.log + ".internal").c_str(), "a")) {
        std::fprintf(f, "%lld %s\n", static_cast<long long>(real_us()),
                     e.to_string().c_str());
        std::fclose(f);
      }
    }
    return std::string(errc_name(e.code()));
  }

  void map_status() {
    const int fd = ::open(a_.status.c_str(), O_RDWR);
    if (fd < 0) return;
    void* p = ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ::close(fd);
    if (p != MAP_FAILED) status_ = static_cast<std::int32_t*>(p);
  }
  // The orchestrator reads it (nemesis.h: lock index + 1, + 16 when the
  // lease is kept by a keeper, + 32 when the hold is shared).
  void set_holding(int lock_index, bool keeper = false, bool shared = false) {
    if (status_ != nullptr) {
      const int v = lock_index < 0 ? 0
                                   : lock_index + 1 + (keeper ? kHoldKept : 0) +
                                         (shared ? kHoldShared : 0);
      __atomic_store_n(&status_[a_.slot], v, __ATOMIC_SEQ_CST);
    }
  }

  // One line to the guarded resource and its one-letter answer (0: I/O
  // error, the connection is dropped).
  char ask_resource(const std::string& line) {
    if (res_fd_ < 0) connect_resource();
    char reply[4] = {0};
    if (res_fd_ >= 0 &&
        ::send(res_fd_, line.data(), line.size(), MSG_NOSIGNAL) ==
            static_cast<ssize_t>(line.size()) &&
        ::read(res_fd_, reply, 2) == 2) {
      return reply[0];
    }
    ::close(res_fd_);
    res_fd_ = -1;
    return 0;
  }

  // One write to the guarded resource: "W id seq lock token" → A|R|E, in
  // progress until "E id seq lock token" a few ms later. A shared lease
  // (rule 18) reads instead: "D id seq lock token", logged as "read".
  void write(const Lease& lease, std::int64_t checked_us = 0) {
    // --shared-writes (negative control): a shared holder writes as well.
    const bool reads = lease.shared && !(a_.shared_writes && chance(50));
    Op o = begin(reads ? "read" : "write", lease.name);
    o.aux = checked_us;
    o.seq = ++seq_;
    o.fencing = lease.fencing_token;
    const std::string tail = " " + std::to_string(a_.id) + " " +
                             std::to_string(o.seq) + " " + lease.name + " " +
                             std::to_string(lease.fencing_token) + "\n";
    const char verdict = ask_resource((reads ? "D" : "W") + tail);
    o.result = verdict == 0     ? "io_error"
               : verdict == 'A' ? "accepted"
                                : "rejected";
    if (verdict == 'A' && !reads) {
      // The write takes a moment: a reader during it is checker 9's case
      // (longer in checker 9's negative control, so that reads overlap).
      std::this_thread::sleep_for(
          milliseconds(a_.shared_writes ? uniform(30, 80) : uniform(1, 4)));
      (void)ask_resource("E" + tail);
    }
    o.complete_us = real_us();
    log(o);
  }
  void connect_resource() {
    res_fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un sa{};
    sa.sun_family = AF_UNIX;
    std::strncpy(sa.sun_path, a_.resource.c_str(), sizeof sa.sun_path - 1);
    if (::connect(res_fd_, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
      ::close(res_fd_);
      res_fd_ = -1;
    }
  }

  // Extend and release with a token that is not the owner's: both must fail.
  void foreign(const Lease& lease) {
    Lease fake = lease;
    fake.token = OwnerToken::random();
    Op e = begin("foreign_extend", lease.name);
    auto ex = client_->extend(fake, a_.ttl);
    e.complete_us = real_us();
    e.result = ex ? "ok" : res(ex.error());
    log(e);
    Op r = begin("foreign_release", lease.name);
    auto rel = client_->release(fake);
    r.complete_us = real_us();
    r.result = !rel ? res(rel.error()) : (*rel ? "ok" : "not_held");
    log(r);
  }

  void add_counter() {
    Op o = begin("counter_begin", "ctr");
    o.seq = ++seq_;
    o.complete_us = o.invoke_us;
    o.result = "begin";
    log(o);
    auto v = client_->counter(counter_name()).add(1);
    o.kind = "counter";
    o.complete_us = real_us();
    o.result = v ? "ok" : res(v.error());
    o.wait_ms = v ? *v : -1;
    log(o);
  }

  void step() {
    if (chance(10)) return step_multi();
    const auto& specs = lock_specs();
    const int pick = uniform(1, 100);
    const int li = pick <= 40 ? 0 : pick <= 70 ? 1 : 2;
    const LockSpec& spec = specs[static_cast<std::size_t>(li)];
    AcquireOptions ao;
    ao.ttl = a_.ttl;
    ao.capacity = spec.capacity;
    const bool is_try = chance(20);
    // Rule 18: some holds of a mutex are shared (readers), where the store
    // offers it (else it answers `unsupported` once and no more are tried).
    // (Most of them in checker 9's negative control, so readers overlap.)
    const bool shared =
        shared_ok_ && spec.capacity == 1 && chance(a_.shared_writes ? 80 : 30);
    Op o = begin(is_try ? "try" : "acquire", spec.name);
    o.shared = shared;
    o.wait_ms = is_try ? 0 : uniform(50, 1500);
    const auto cpu_wait = RunQueueWait::now();
    auto lease =
        shared ? client_->acquire_shared(spec.name, milliseconds(o.wait_ms), ao)
        : is_try ? client_->try_acquire(spec.name, ao)
                 : client_->acquire(spec.name, milliseconds(o.wait_ms), ao);
    if (!lease && lease.error().code() == Errc::unsupported) shared_ok_ = false;
    o.complete_us = real_us();
    // How long this process could not run meanwhile (checker 7).
    o.aux = stalled(o, cpu_wait);
    if (!lease) {
      o.result = res(lease.error());
      log(o);
      std::this_thread::sleep_for(milliseconds(uniform(5, 60)));
      return;
    }
    o.result = "ok";
    o.fencing = lease->fencing_token;
    o.expires_ms = lease->store_expires_at_ms;
    log(o);
    // Keeper holds run up to 2 × TTL, so that their renewals (and rule
    // 13's notice when a renewal cannot get through) matter; the negative
    // control of checker 8 holds with a keeper every time.
    const bool keeper = a_.late_notice || chance(40);
    set_holding(li, keeper, lease->shared);
    const bool fenced = spec.capacity == 1;  // semaphores: no single writer
    const int ttl_ms = static_cast<int>(a_.ttl.count());
    // Checker 8's negative control holds 4-5 TTLs, so that a holder cut
    // off at any time of its hold is still holding when its lease runs
    // out (a shorter hold may end, and release, before the deadline).
    const auto hold_until =
        real_us() +
        1000LL * (a_.late_notice
                      ? uniform(4 * ttl_ms, 5 * ttl_ms)
                      : uniform(20, keeper ? 2 * ttl_ms : ttl_ms / 2));
    // Wrong-owner calls and the counter: inside the hold, after the keeper
    // (if any) took the lease over — a keeper must keep a lease from its
    // grant on, or no notice can come in time.
    auto extras = [&, capacity = spec.capacity] {
      if (chance(10)) foreign(*lease);
      if (a_.counters && capacity == 1 && chance(50)) add_counter();
    };
    if (keeper) {
      // The grant's safe deadline, logged at once (checker 8, rule 14).
      Watch w{lease->name, lease->fencing_token, {}, 0};
      observe(w, *lease);
      if (a_.late_notice) {
        hold_with_old_keeper(*lease, fenced, hold_until, w, extras);
      } else {
        hold_with_keeper(*lease, fenced, hold_until, w, extras);
      }
    } else {
      extras();
      hold_manually(*lease, fenced, hold_until);
    }
    set_holding(-1);
  }

  // extend(l) to the TTL, logged; true (and l renewed) on success.
  bool extend_logged(Lease& l) {
    Op e = begin("extend", l.name);
    auto ex = client_->extend(l, a_.ttl);
    e.complete_us = real_us();
    e.fencing = l.fencing_token;
    e.result = ex ? "ok" : res(ex.error());
    if (ex) e.expires_ms = ex->store_expires_at_ms;
    log(e);
    if (ex) l = *ex;
    return ex.ok();
  }
  // Logged before a release is sent: a worker killed with its release in
  // flight (kill_holder) logs no "release", but the store may have
  // applied it; checker 10 ends the lease at this invoke.
  void log_release_begin(const Lease& l, std::int64_t at) {
    Op b = begin("release_begin", l.name);
    b.invoke_us = b.complete_us = at;
    b.fencing = l.fencing_token;
    b.result = "begin";
    log(b);
  }
  void release_logged(const Lease& l) {
    Op r = begin("release", l.name);
    log_release_begin(l, r.invoke_us);
    auto rel = client_->release(l);
    r.complete_us = real_us();
    r.fencing = l.fencing_token;
    r.result = !rel ? res(rel.error()) : (*rel ? "ok" : "not_held");
    log(r);
  }

  // acquire_all of both mutexes (rule 11) under the same faults: each
  // lease is logged as a grant of its own (kind "multi", the call's times),
  // written to with its fencing token, extended and released like a single
  // one. A failed call is logged once, against the first name.
  void step_multi() {
    const auto& specs = lock_specs();
    const std::vector<std::string> names = {specs[0].name, specs[1].name};
    AcquireOptions ao;
    ao.ttl = a_.ttl;
    Op o = begin("multi", names[0]);
    // Longer waits than single acquires: both locks must come free.
    o.wait_ms = chance(20) ? 0 : uniform(500, 3000);
    const auto cpu_wait = RunQueueWait::now();
    auto leases = client_->acquire_all(names, milliseconds(o.wait_ms), ao);
    o.complete_us = real_us();
    o.aux = stalled(o, cpu_wait);
    if (!leases || leases->empty()) {
      o.result = leases ? "none" : res(leases.error());
      log(o);
      std::this_thread::sleep_for(milliseconds(uniform(5, 60)));
      return;
    }
    for (const Lease& l : *leases) {
      Op g = o;
      g.lock = l.name;
      g.result = "ok";
      g.fencing = l.fencing_token;
      g.expires_ms = l.store_expires_at_ms;
      log(g);
    }
    set_holding(0);
    std::vector<Lease> held = *leases;
    const std::int64_t hold_until =
        real_us() + 1000LL * uniform(20, static_cast<int>(a_.ttl.count()) / 2);
    for (bool first = true;; first = false) {
      if (!first) std::this_thread::sleep_for(milliseconds(uniform(20, 120)));
      for (const Lease& l : held) write(l);  // after a pause: stale writes
      if (real_us() >= hold_until) break;
      for (Lease& l : held) {
        if (l.time_left() >= a_.ttl / 2) continue;
        if (!extend_logged(l)) return set_holding(-1);  // stop using both
      }
    }
    if (chance(5)) ::_exit(0);  // exit mid-hold
    if (!chance(10)) {          // else forget them: the TTL frees them
      for (const Lease& l : held) release_logged(l);
    }
    set_holding(-1);
  }

  // What a keeper-held loop logs for checker 8: the safe deadline each time
  // it moves (grant, renewals), the notice, and the checks.
  struct Watch {
    std::string lock;
    std::uint64_t token = 0;
    Steady::time_point deadline{};
    std::int64_t deadline_real = 0;
  };
  void observe(Watch& w, const Lease& now) {
    const Steady::time_point d = now.local_deadline;
    if (d == w.deadline) return;
    Op o = begin("deadline", w.lock);
    o.complete_us = steady_to_real(d);
    o.expires_ms = now.store_expires_at_ms;
    o.result = w.deadline == Steady::time_point{} ? "grant" : "renew";
    o.fencing = w.token;
    log(o);
    w.deadline = d;
    w.deadline_real = o.complete_us;
  }
  void log_notice(const std::string& kind, const Watch& w, std::int64_t at,
                  const std::string& why) {
    Op o;
    o.worker = a_.id;
    o.kind = kind;
    o.lock = w.lock;
    o.invoke_us = o.complete_us = at;
    o.result = why.empty() ? "-" : why;
    o.fencing = w.token;
    o.aux = w.deadline_real;
    log(o);
  }
  std::function<void(const Error&)> notice_logger(const Lease& lease) {
    Watch w{lease.name, lease.fencing_token, {}, 0};
    return
        [this, w](const Error& e) { log_notice("lost", w, real_us(), res(e)); };
  }

  // A careful user (rules 13, 14): before every write it checks the notice
  // (lost()) and stops at once; it never writes past the safe deadline even
  // if the notice were late, and logs that case (deadline_passed) for the
  // checker. A SIGSTOP between the check and the write is fencing's case.
  void hold_with_keeper(const Lease& lease, bool fenced,
                        std::int64_t hold_until, Watch& w,
                        const std::function<void()>& extras) {
    KeeperOptions ko;
    ko.on_lost = notice_logger(lease);
    LeaseKeeper keeper(*client_, lease, ko);
    extras();
    // Returns the time of a check that found the lease usable, or 0.
    auto check = [&]() -> std::int64_t {
      observe(w, keeper.lease());
      const std::int64_t now = real_us();
      if (keeper.lost() || keeper.cancelled().load()) {
        log_notice("lost_seen", w, now, "");
        return 0;
      }
      // The deadline just logged (the same snapshot as the check).
      if (Steady::now() >= w.deadline) {
        log_notice("deadline_passed", w, now, "");
        return 0;
      }
      return now;
    };
    for (int i = 0; i < 10'000; ++i) {
      if (i > 0) std::this_thread::sleep_for(milliseconds(uniform(20, 120)));
      const std::int64_t ok = check();
      if (ok == 0) return;  // ~LeaseKeeper: a lost lease is not asked about
      if (fenced) write(keeper.lease(), ok);
      if (real_us() >= hold_until) break;
    }
    if (chance(5)) ::_exit(0);  // exit mid-hold
    Op r = begin("release", lease.name);
    log_release_begin(lease, r.invoke_us);
    auto rel = keeper.release();
    r.complete_us = real_us();
    r.fencing = lease.fencing_token;
    r.result = !rel ? res(rel.error()) : (*rel ? "ok" : "not_held");
    log(r);
  }

  // --late-notice: the user of the old keeper, who relied on its notice
  // alone (cancelled()). Checker 8 must flag the late writes and notices.
  void hold_with_old_keeper(const Lease& lease, bool fenced,
                            std::int64_t hold_until, Watch& w,
                            const std::function<void()>& extras) {
    {
      OldKeeper keeper(*client_, lease, a_.ttl, notice_logger(lease));
      extras();
      for (int i = 0; i < 10'000; ++i) {
        if (i > 0) std::this_thread::sleep_for(milliseconds(uniform(20, 120)));
        observe(w, keeper.lease());
        const std::int64_t now = real_us();
        if (keeper.cancelled()) {
          log_notice("lost_seen", w, now, "");
          return;
        }
        if (fenced) write(keeper.lease(), now);
        if (real_us() >= hold_until) break;
      }
    }
    release_logged(lease);
  }

  void hold_manually(Lease lease, bool fenced, std::int64_t hold_until) {
    if (fenced) write(lease);
    for (;;) {
      std::this_thread::sleep_for(milliseconds(uniform(20, 120)));
      if (fenced) write(lease);  // after a pause: a stale write
      if (real_us() >= hold_until) break;
      if (lease.time_left() < a_.ttl / 2) {
        if (!extend_logged(lease)) return;  // lost or unreachable: stop
      }
    }
    if (chance(5)) ::_exit(0);  // exit mid-hold
    if (chance(10)) return;     // forget to release: the TTL frees it
    release_logged(lease);
  }

  Args a_;
  std::mt19937_64 rng_;
  std::FILE* log_ = nullptr;
  std::mutex log_mu_;
  std::mutex internal_mu_;  // <log>.internal
  std::int32_t* status_ = nullptr;
  std::optional<Client> client_;
  int res_fd_ = -1;
  std::uint64_t seq_ = 0;
  bool shared_ok_ = true;  // the store offers acquire_shared (rule 18)
  StarvationProbe probe_;
};

}  // namespace

int worker_main(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; ++i) {
    const std::string k = argv[i];
    const std::string v = argv[i + 1];
    if (k == "--url")
      a.url = v;
    else if (k == "--log")
      a.log = v;
    else if (k == "--resource")
      a.resource = v;
    else if (k == "--status")
      a.status = v;
    else if (k == "--stop")
      a.stop = v;
    else if (k == "--id")
      a.id = std::stoi(v);
    else if (k == "--slot")
      a.slot = std::stoi(v);
    else if (k == "--seed")
      a.seed = std::stoull(v);
    else if (k == "--deadline-us")
      a.deadline_us = std::stoll(v);
    else if (k == "--ttl-ms")
      a.ttl = milliseconds(std::stoll(v));
    else if (k == "--counters")
      a.counters = v == "1";
    else if (k == "--late-notice")
      a.late_notice = v == "1";
    else if (k == "--shared-writes")
      a.shared_writes = v == "1";
    else if (k == "--prefix")
      set_name_prefix(v);
    else
      continue;
    ++i;
  }
  return Worker(std::move(a)).run();
}

std::vector<Op> read_ops(const std::string& path, int* bad_lines) {
  std::vector<Op> out;
  std::FILE* f = std::fopen(path.c_str(), "r");
  if (f == nullptr) return out;
  char line[2048], kind[64], lock[600], result[64];
  int id, shared;
  long long inv, comp, exp, wait, aux;
  unsigned long long fen, seq;
  // Line by line: a torn last line (worker killed mid-write) is counted,
  // never allowed to hide the lines after it.
  while (std::fgets(line, sizeof line, f) != nullptr) {
    aux = 0;
    shared = 0;
    if (std::sscanf(line,
                    "%d %63s %599s %lld %lld %63s %llu %lld %lld %llu %lld %d",
                    &id, kind, lock, &inv, &comp, result, &fen, &exp, &wait,
                    &seq, &aux, &shared) < 10) {
      ++*bad_lines;
      continue;
    }
    Op o;
    o.worker = id;
    o.kind = kind;
    o.lock = lock;
    o.invoke_us = inv;
    o.complete_us = comp;
    o.result = result;
    o.fencing = fen;
    o.expires_ms = exp;
    o.wait_ms = wait;
    o.seq = seq;
    o.aux = aux;
    o.shared = shared != 0;
    out.push_back(std::move(o));
  }
  std::fclose(f);
  return out;
}

}  // namespace baton::torture
