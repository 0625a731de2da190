// bench/loop.cc — the closed-loop workloads: uncontended, contended,
// handoff, fair and mixed (see loadgen.h). Every wait is cut to the run's
// deadline, so the run stops itself.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <latch>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bench/session.h"
#include "bench/workloads.h"

namespace baton::bench {

namespace {

using Clock = std::chrono::steady_clock;

std::int64_t ns_of(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             t.time_since_epoch())
      .count();
}

// Per-thread counters, merged after the run.
struct ThreadStats {
  std::vector<std::uint64_t> acquire_ns;
  std::vector<std::uint64_t> handoff_ns;
  std::uint64_t pairs = 0;
  std::uint64_t errors = 0;
  std::uint64_t busy = 0;
  std::uint64_t worst_wait_ns = 0;
  std::string first_error;
  void error(const std::string& what) {
    if (errors++ == 0) first_error = what;
  }
  void waited(std::int64_t ns) {
    if (ns > 0) {
      worst_wait_ns = std::max(worst_wait_ns, static_cast<std::uint64_t>(ns));
    }
  }
};

// xorshift64*: a cheap per-client RNG for the mixed workload.
struct Rng {
  std::uint64_t x;
  std::uint64_t next() {
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    return x * 2685821657736338717ULL;
  }
};

enum class Op { try_own, wait_shared, try_shared };

// One run of a closed-loop workload: n clients, each on a thread of its
// own, until the run's deadline.
class LoopRun {
 public:
  explicit LoopRun(const LoadOptions& o)
      : o_(o),
        n_(o.clients),
        k_(o.workload == Workload::contended || o.workload == Workload::mixed
               ? o.locks
               : 1),
        stats_(static_cast<std::size_t>(n_)),
        last_release_(static_cast<std::size_t>(k_)),
        ready_(n_ + 1) {
    for (auto& a : last_release_) a.store(0);
  }

  Result<LoadResult> run() {
    if (Status st = connect(); !st.ok()) return st.error();
    std::vector<std::thread> threads;
    threads.reserve(static_cast<std::size_t>(n_));
    for (int i = 0; i < n_; ++i) threads.emplace_back([this, i] { worker(i); });
    ready_.arrive_and_wait();
    start_ = Clock::now();
    deadline_ = start_ + o_.duration;
    go_.store(true, std::memory_order_release);
    report_progress();
    for (auto& t : threads) t.join();
    return summarize_run(Clock::now());
  }

 private:
  std::string own_lock(int client) const {
    return o_.prefix + "/u/" + std::to_string(client);
  }
  std::string shared_lock(std::int64_t i) const {
    return o_.prefix + "/c/" + std::to_string(i);
  }
  Session& session(int id) { return *sessions_[static_cast<std::size_t>(id)]; }

  // Connects every client first (and fails early if the store is down),
  // then one round trip per client so that connections exist.
  Status connect() {
    for (int i = 0; i < n_; ++i) {
      auto s = open_session(o_);
      if (!s) return s.error();
      sessions_.push_back(std::move(*s));
    }
    if (o_.workload != Workload::uncontended &&
        o_.workload != Workload::mixed) {
      return {};
    }
    for (int i = 0; i < n_; ++i) {
      auto s = session(i).try_acquire(own_lock(i));
      if (!s) return s.error();
      if (auto r = session(i).release(); !r) return r.error();
    }
    return {};
  }

  // Which operation, and on which lock.
  std::pair<Op, std::size_t> pick(int id, Rng& rng) const {
    switch (o_.workload) {
      case Workload::uncontended:
        return {Op::try_own, 0};
      case Workload::contended:
        return {Op::wait_shared, static_cast<std::size_t>(id % k_)};
      case Workload::mixed: {
        const std::uint64_t r = rng.next() % 100;
        const Op op = r < 60   ? Op::try_own
                      : r < 85 ? Op::wait_shared
                               : Op::try_shared;
        return {op, static_cast<std::size_t>(rng.next() %
                                             static_cast<std::uint64_t>(k_))};
      }
      default:  // handoff, fair: one lock
        return {Op::wait_shared, 0};
    }
  }

  void fail(ThreadStats& st, const Error& e) {
    st.error(e.to_string());
    live_errors_.fetch_add(1, std::memory_order_relaxed);
  }

  // handoff: release only once someone is parked behind us, so the
  // measured interval is release -> push to a waiting client.
  void wait_for_a_waiter(Session& s, ThreadStats& st, const std::string& name) {
    while (Clock::now() < deadline_) {
      auto w = s.waiters(name);
      if (!w) {
        fail(st, w.error());
        return;
      }
      if (*w > 0) return;
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }

  enum class Step { next, stop };

  // One acquire + hold + release.
  Step iteration(int id, Rng& rng) {
    Session& s = session(id);
    ThreadStats& st = stats_[static_cast<std::size_t>(id)];
    const auto [op, lock] = pick(id, rng);
    const std::string name =
        op == Op::try_own ? own_lock(id) : shared_lock(std::int64_t(lock));
    const auto t0 = Clock::now();
    Status got;
    if (op == Op::wait_shared) {
      const milliseconds wait = left_until(deadline_);
      if (wait.count() <= 0) return Step::stop;  // a 0 ms wait is a try
      got = s.acquire(name, wait);
    } else {
      got = s.try_acquire(name);
    }
    const auto t1 = Clock::now();
    // Counted even when the wait ends unanswered with the run: a client
    // that never got the lock shows a worst wait of the whole run.
    st.waited(ns_of(t1) - ns_of(t0));
    if (!got) {
      const Errc code = got.error().code();
      if (op == Op::try_shared && code == Errc::not_acquired) {
        ++st.busy;
        return Step::next;
      }
      // A wait that ends with the run (its wait is cut to the deadline).
      if ((code == Errc::timeout || code == Errc::not_acquired) &&
          t1 + milliseconds(50) >= deadline_) {
        return Step::stop;
      }
      fail(st, got.error());
      return Step::next;
    }
    st.acquire_ns.push_back(static_cast<std::uint64_t>(
        std::max<std::int64_t>(0, ns_of(t1) - ns_of(t0))));
    if (op == Op::wait_shared) {
      // A handoff: this request was queued before the previous holder
      // released (so it waited for that release).
      const std::int64_t rel =
          last_release_[lock].load(std::memory_order_acquire);
      if (rel > ns_of(t0) && ns_of(t1) >= rel) {
        st.handoff_ns.push_back(static_cast<std::uint64_t>(ns_of(t1) - rel));
      }
    }
    if (o_.workload == Workload::handoff) wait_for_a_waiter(s, st, name);
    if (o_.hold.count() > 0) std::this_thread::sleep_for(o_.hold);
    if (o_.workload == Workload::mixed && op == Op::wait_shared) {
      if (auto e = s.extend(); !e) fail(st, e.error());
    }
    if (op != Op::try_own) {
      last_release_[lock].store(ns_of(Clock::now()), std::memory_order_release);
    }
    if (auto r = s.release(); !r) {
      fail(st, r.error());
      return Step::next;
    }
    ++st.pairs;
    live_pairs_.fetch_add(1, std::memory_order_relaxed);
    return Step::next;
  }

  void worker(int id) {
    Rng rng{0x9E3779B97F4A7C15ULL * static_cast<std::uint64_t>(id + 1)};
    stats_[static_cast<std::size_t>(id)].acquire_ns.reserve(1 << 16);
    ready_.arrive_and_wait();
    while (!go_.load(std::memory_order_acquire)) std::this_thread::yield();
    while (Clock::now() < deadline_) {
      if (iteration(id, rng) == Step::stop) break;
    }
  }

  void report_progress() {
    if (!o_.progress) return;
    auto next = start_ + std::chrono::seconds(1);
    while (next < deadline_) {
      std::this_thread::sleep_until(next);
      o_.progress(std::chrono::duration<double>(Clock::now() - start_).count(),
                  live_pairs_.load(std::memory_order_relaxed),
                  live_errors_.load(std::memory_order_relaxed));
      next += std::chrono::seconds(1);
    }
  }

  LoadResult summarize_run(Clock::time_point end) {
    LoadResult r;
    r.clients = n_;
    r.locks = k_;
    r.seconds = std::chrono::duration<double>(end - start_).count();
    std::vector<std::uint64_t> acq, hand, per_client;
    std::uint64_t worst = 0;
    for (auto& st : stats_) {
      r.pairs += st.pairs;
      r.busy += st.busy;
      if (st.errors > 0 && r.errors == 0) r.first_error = st.first_error;
      r.errors += st.errors;
      per_client.push_back(st.pairs);
      worst = std::max(worst, st.worst_wait_ns);
      acq.insert(acq.end(), st.acquire_ns.begin(), st.acquire_ns.end());
      hand.insert(hand.end(), st.handoff_ns.begin(), st.handoff_ns.end());
    }
    r.pairs_per_sec =
        r.seconds > 0 ? static_cast<double>(r.pairs) / r.seconds : 0;
    r.acquire = summarize(&acq);
    r.handoff = summarize(&hand);
    r.jain = jain_index(per_client);
    r.min_client_pairs =
        *std::min_element(per_client.begin(), per_client.end());
    r.max_client_pairs =
        *std::max_element(per_client.begin(), per_client.end());
    r.worst_wait_ms = static_cast<double>(worst) / 1e6;
    return r;
  }

  const LoadOptions& o_;
  const int n_;
  const std::int64_t k_;
  std::vector<std::unique_ptr<Session>> sessions_;
  std::vector<ThreadStats> stats_;
  // Per lock: steady-clock ns of the last release sent (for handoffs).
  std::vector<std::atomic<std::int64_t>> last_release_;
  std::atomic<std::uint64_t> live_pairs_{0}, live_errors_{0};
  std::latch ready_;
  Clock::time_point start_, deadline_;
  std::atomic<bool> go_{false};
};

}  // namespace

Result<LoadResult> run_loop(const LoadOptions& o) { return LoopRun(o).run(); }

}  // namespace baton::bench
