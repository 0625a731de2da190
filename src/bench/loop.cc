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

milliseconds left_until(Clock::time_point deadline) {
  auto l = std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
  return l.count() < 0 ? milliseconds(0) : l;
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

}  // namespace

Result<LoadResult> run_loop(const LoadOptions& o) {
  const std::string prefix = o.prefix;
  const int n = o.clients;
  const bool shared_locks =
      o.workload == Workload::contended || o.workload == Workload::mixed;
  const std::int64_t k = shared_locks ? o.locks : 1;

  // Connect every client first (and fail early if the store is down).
  std::vector<std::unique_ptr<Session>> sessions;
  for (int i = 0; i < n; ++i) {
    auto s = open_session(o);
    if (!s) return s.error();
    sessions.push_back(std::move(*s));
  }
  auto own_lock = [&](int client) {
    return prefix + "/u/" + std::to_string(client);
  };
  auto shared_lock = [&](std::int64_t i) {
    return prefix + "/c/" + std::to_string(i);
  };
  // Warm-up: one round trip per client so connections exist.
  if (o.workload == Workload::uncontended || o.workload == Workload::mixed) {
    for (int i = 0; i < n; ++i) {
      auto s = sessions[static_cast<std::size_t>(i)]->try_acquire(own_lock(i));
      if (!s) return s.error();
      if (auto r = sessions[static_cast<std::size_t>(i)]->release(); !r) {
        return r.error();
      }
    }
  }

  std::vector<ThreadStats> stats(static_cast<std::size_t>(n));
  // Per lock: steady-clock ns of the last release sent (for handoffs).
  std::vector<std::atomic<std::int64_t>> last_release(
      static_cast<std::size_t>(k));
  for (auto& a : last_release) a.store(0);
  std::atomic<std::uint64_t> live_pairs{0}, live_errors{0};
  std::latch ready(n + 1);
  Clock::time_point start, deadline;
  std::atomic<bool> go{false};

  auto worker = [&](int id) {
    Session& s = *sessions[static_cast<std::size_t>(id)];
    ThreadStats& st = stats[static_cast<std::size_t>(id)];
    Rng rng{0x9E3779B97F4A7C15ULL * static_cast<std::uint64_t>(id + 1)};
    st.acquire_ns.reserve(1 << 16);
    auto fail = [&](const Error& e) {
      st.error(e.to_string());
      live_errors.fetch_add(1, std::memory_order_relaxed);
    };
    ready.arrive_and_wait();
    while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
    while (Clock::now() < deadline) {
      // Which operation, and on which lock.
      Op op = Op::wait_shared;
      std::size_t lock = 0;
      switch (o.workload) {
        case Workload::uncontended:
          op = Op::try_own;
          break;
        case Workload::contended:
          lock = static_cast<std::size_t>(id % k);
          break;
        case Workload::mixed: {
          const std::uint64_t r = rng.next() % 100;
          op = r < 60 ? Op::try_own : r < 85 ? Op::wait_shared : Op::try_shared;
          lock = static_cast<std::size_t>(rng.next() %
                                          static_cast<std::uint64_t>(k));
          break;
        }
        default:  // handoff, fair: one lock
          break;
      }
      const std::string name =
          op == Op::try_own ? own_lock(id) : shared_lock(std::int64_t(lock));
      auto t0 = Clock::now();
      Status got;
      if (op == Op::wait_shared) {
        const milliseconds wait = left_until(deadline);
        if (wait.count() <= 0) break;  // a 0 ms wait would be a try
        got = s.acquire(name, wait);
      } else {
        got = s.try_acquire(name);
      }
      auto t1 = Clock::now();
      // Counted even when the wait ends unanswered with the run: a client
      // that never got the lock shows a worst wait of the whole run.
      st.waited(ns_of(t1) - ns_of(t0));
      if (!got) {
        const Errc code = got.error().code();
        if (op == Op::try_shared && code == Errc::not_acquired) {
          ++st.busy;
          continue;
        }
        // A wait that ends with the run (its wait is cut to the deadline).
        if ((code == Errc::timeout || code == Errc::not_acquired) &&
            t1 + milliseconds(50) >= deadline) {
          break;
        }
        fail(got.error());
        continue;
      }
      st.acquire_ns.push_back(static_cast<std::uint64_t>(
          std::max<std::int64_t>(0, ns_of(t1) - ns_of(t0))));
      if (op == Op::wait_shared) {
        // A handoff: this request was queued before the previous holder
        // released (so it waited for that release).
        std::int64_t rel = last_release[lock].load(std::memory_order_acquire);
        if (rel > ns_of(t0) && ns_of(t1) >= rel) {
          st.handoff_ns.push_back(static_cast<std::uint64_t>(ns_of(t1) - rel));
        }
      }
      if (o.workload == Workload::handoff) {
        // Release only once someone is parked behind us, so the measured
        // interval is release -> push to a waiting client.
        while (Clock::now() < deadline) {
          auto w = s.waiters(name);
          if (!w) {
            fail(w.error());
            break;
          }
          if (*w > 0) break;
          std::this_thread::sleep_for(std::chrono::microseconds(20));
        }
      }
      if (o.hold.count() > 0) std::this_thread::sleep_for(o.hold);
      if (o.workload == Workload::mixed && op == Op::wait_shared) {
        if (auto e = s.extend(); !e) fail(e.error());
      }
      if (op != Op::try_own) {
        last_release[lock].store(ns_of(Clock::now()),
                                 std::memory_order_release);
      }
      if (auto r = s.release(); !r) {
        fail(r.error());
        continue;
      }
      ++st.pairs;
      live_pairs.fetch_add(1, std::memory_order_relaxed);
    }
  };

  std::vector<std::thread> threads;
  threads.reserve(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) threads.emplace_back(worker, i);
  ready.arrive_and_wait();
  start = Clock::now();
  deadline = start + o.duration;
  go.store(true, std::memory_order_release);
  if (o.progress) {
    auto next = start + std::chrono::seconds(1);
    while (next < deadline) {
      std::this_thread::sleep_until(next);
      o.progress(std::chrono::duration<double>(Clock::now() - start).count(),
                 live_pairs.load(std::memory_order_relaxed),
                 live_errors.load(std::memory_order_relaxed));
      next += std::chrono::seconds(1);
    }
  }
  for (auto& t : threads) t.join();
  auto end = Clock::now();

  LoadResult r;
  r.clients = n;
  r.locks = k;
  r.seconds = std::chrono::duration<double>(end - start).count();
  std::vector<std::uint64_t> acq, hand, per_client;
  std::uint64_t worst = 0;
  for (auto& st : stats) {
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
  r.min_client_pairs = *std::min_element(per_client.begin(), per_client.end());
  r.max_client_pairs = *std::max_element(per_client.begin(), per_client.end());
  r.worst_wait_ms = static_cast<double>(worst) / 1e6;
  return r;
}

}  // namespace baton::bench
