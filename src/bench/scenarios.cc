// bench/scenarios.cc — two application scenarios as measured workloads
// (docs/benchmarks.md, "Scenarios").
//
// microbatch: micro-batch pipelines over 100 namespaces, time-scaled so one
//   second of the scenario is kSecond (100 ms). "recent" runs start every
//   second with 2 shards (shard j needs the namespaces i with i % 2 == j);
//   a "late" run starts every 10 seconds with 1 shard needing all 100.
//   Every shard takes what it is granted, processes those namespaces
//   (a sleep per namespace), releases them and asks again for the rest,
//   so that no shard holds some locks while waiting for others. The first
//   half of --duration uses baton's FIFO acquire_some (one reservation per
//   shard); the second half naive polling (try_acquire each missing lock,
//   sleep kPoll, retry), on the same store and with fresh lock names.
// segments: 50 threads x 100 guarded modifications: lock, read-modify-write
//   a counter row (in this process's memory, with a yield between the read
//   and the write so a broken lock would show as lost updates), unlock.
//   First with one center lock, then with 100 segment locks chosen by
//   crc32(row name) % 100: the center-lock and 100-segment designs of a
//   MySQL lock table.
//
// Both stop themselves: every wait is cut to the phase's deadline.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "baton/client.h"
#include "bench/workloads.h"

namespace baton::bench {

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::microseconds;
using std::chrono::milliseconds;

constexpr int kNamespaces = 100;
constexpr milliseconds kSecond{100};  // one scenario second
constexpr milliseconds kPoll{10};     // polling retry interval (0.1 scenario s)
constexpr int kMaxShardsInFlight = 20;  // per type; more starts are skipped

struct ProcessType {
  const char* name;
  milliseconds period;
  int shards;
  microseconds work_per_namespace;
};
constexpr ProcessType kRecent{"recent", kSecond, 2, microseconds(1800)};
constexpr ProcessType kLate{"late", 10 * kSecond, 1, microseconds(500)};

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

// Seconds to the millisecond: on memory: a segments phase can finish in
// under 50 ms, which "%.1f" printed as 0.0.
std::string fmt_secs(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3f", v);
  return buf;
}

struct ShardRun {
  int type = 0;        // 0 recent, 1 late
  double wait_ms = 0;  // start -> every namespace processed (or run end)
  bool done = false;
};

struct Tally {
  std::mutex mu;
  std::vector<ShardRun> runs;
  std::atomic<std::uint64_t> processed{0}, requests{0}, errors{0};
  std::string first_error;
  void error(const Error& e) {
    std::lock_guard<std::mutex> g(mu);
    if (errors++ == 0) first_error = e.to_string();
  }
};

// One shard of one run: take, process, release, ask again until every namespace
// is done.
void run_shard(const Client& client, bool fifo, std::vector<std::string> todo,
               microseconds work, Clock::time_point deadline, int type,
               Tally* tally) {
  const auto start = Clock::now();
  AcquireOptions opts;
  opts.ttl = std::chrono::seconds(5);
  const OwnerToken reservation = OwnerToken::random();
  while (!todo.empty() && Clock::now() < deadline) {
    std::vector<Lease> granted;
    if (fifo) {
      const milliseconds wait = left_until(deadline);
      if (wait.count() <= 0) break;
      tally->requests += todo.size();
      auto got = client.acquire_some(todo, reservation, wait, opts);
      if (!got) {
        if (got.error().code() != Errc::timeout) tally->error(got.error());
        std::this_thread::sleep_for(milliseconds(1));
        continue;
      }
      granted = std::move(*got);
    } else {
      for (const std::string& name : todo) {
        ++tally->requests;
        auto l = client.try_acquire(name, opts);
        if (l) {
          granted.push_back(std::move(*l));
        } else if (l.error().code() != Errc::not_acquired) {
          tally->error(l.error());
        }
      }
      if (granted.empty()) {
        std::this_thread::sleep_for(kPoll);
        continue;
      }
    }
    for (std::size_t i = 0; i < granted.size(); ++i) {
      std::this_thread::sleep_for(work);
    }
    for (const Lease& l : granted) {
      if (auto r = client.release(l); !r) tally->error(r.error());
      todo.erase(std::remove(todo.begin(), todo.end(), l.name), todo.end());
      ++tally->processed;
    }
  }
  ShardRun run;
  run.type = type;
  run.wait_ms = ms_between(start, std::min(Clock::now(), deadline));
  run.done = todo.empty();
  std::lock_guard<std::mutex> g(tally->mu);
  tally->runs.push_back(run);
}

// One phase of microbatch (FIFO or polling) for `length`; its JSON object.
std::string microbatch_phase(const Client& client, const std::string& prefix,
                             bool fifo, milliseconds length, std::string* text,
                             LoadResult* total) {
  Tally tally;
  std::atomic<int> in_flight[2] = {0, 0};
  std::uint64_t skipped[2] = {0, 0}, started[2] = {0, 0};
  std::vector<std::thread> threads;
  const auto start = Clock::now();
  const auto deadline = start + length;
  auto names_of = [&](const ProcessType& t, int shard) {
    std::vector<std::string> names;
    for (int i = 0; i < kNamespaces; ++i) {
      if (i % t.shards == shard) {
        names.push_back(prefix + "/ns/" + std::to_string(i));
      }
    }
    return names;
  };
  // Both schedules on this thread: the next start of each type, in order.
  Clock::time_point next[2] = {start, start + kSecond / 2};
  const ProcessType* types[2] = {&kRecent, &kLate};
  while (true) {
    const int t = next[0] <= next[1] ? 0 : 1;
    if (next[t] >= deadline) break;
    std::this_thread::sleep_until(next[t]);
    next[t] += types[t]->period;
    if (in_flight[t].load() + types[t]->shards > kMaxShardsInFlight) {
      ++skipped[t];
      continue;
    }
    ++started[t];
    for (int s = 0; s < types[t]->shards; ++s) {
      in_flight[t] += 1;
      threads.emplace_back([&, t, s] {
        run_shard(client, fifo, names_of(*types[t], s),
                  types[t]->work_per_namespace, deadline, t, &tally);
        in_flight[t] -= 1;
      });
    }
  }
  for (auto& th : threads) th.join();
  const double secs = ms_between(start, Clock::now()) / 1000.0;

  std::ostringstream js, tx;
  js << "{\"seconds\":" << fmt(secs)
     << ",\"namespaces_processed\":" << tally.processed.load()
     << ",\"namespaces_per_sec\":"
     << fmt(static_cast<double>(tally.processed.load()) / secs)
     << ",\"lock_requests\":" << tally.requests.load()
     << ",\"errors\":" << tally.errors.load();
  tx << (fifo ? "FIFO acquire_some" : "polling try_acquire") << ": "
     << fmt(static_cast<double>(tally.processed.load()) / secs)
     << " namespaces/s, " << tally.requests.load() << " lock requests, "
     << tally.errors.load() << " errors\n";
  for (int t = 0; t < 2; ++t) {
    std::vector<double> waits;
    std::uint64_t done = 0, unfinished = 0;
    for (const ShardRun& r : tally.runs) {
      if (r.type != t) continue;
      waits.push_back(r.wait_ms);
      r.done ? ++done : ++unfinished;
    }
    std::sort(waits.begin(), waits.end());
    const double p50 = waits.empty() ? 0 : waits[(waits.size() - 1) / 2];
    const double worst = waits.empty() ? 0 : waits.back();
    js << ",\"" << types[t]->name << "\":{\"runs_started\":" << started[t]
       << ",\"runs_skipped\":" << skipped[t] << ",\"shards_done\":" << done
       << ",\"shards_unfinished\":" << unfinished
       << ",\"wait_p50_ms\":" << fmt(p50) << ",\"worst_wait_ms\":" << fmt(worst)
       << "}";
    tx << "  " << types[t]->name << ": " << started[t] << " runs ("
       << skipped[t] << " skipped), shards done " << done << ", unfinished "
       << unfinished << ", wait p50 " << fmt(p50) << " ms, worst " << fmt(worst)
       << " ms\n";
  }
  js << "}";
  *text += tx.str();
  total->pairs += tally.processed.load();
  total->errors += tally.errors.load();
  if (total->first_error.empty()) total->first_error = tally.first_error;
  return js.str();
}

std::uint32_t crc32(std::string_view s) {
  std::uint32_t c = 0xFFFFFFFFu;
  for (unsigned char b : s) {
    c ^= b;
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
  }
  return ~c;
}

constexpr int kThreads = 50;
constexpr int kModsPerThread = 100;
constexpr int kRows = 1000;

// One segments phase: 50 x 100 guarded read-modify-writes.
std::string segments_phase(const std::vector<Client>& clients,
                           const std::string& prefix, bool segments,
                           Clock::time_point deadline, std::string* text,
                           LoadResult* total) {
  std::vector<std::atomic<std::int64_t>> rows(kRows);
  for (auto& r : rows) r.store(0);
  std::atomic<std::uint64_t> done{0}, errors{0};
  std::mutex mu;
  std::string first_error;
  std::vector<std::uint64_t> acquire_ns;
  const auto start = Clock::now();
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const Client& client =
          clients[static_cast<std::size_t>(t) % clients.size()];
      AcquireOptions opts;
      opts.ttl = std::chrono::seconds(30);
      std::vector<std::uint64_t> mine;
      for (int i = 0; i < kModsPerThread && Clock::now() < deadline; ++i) {
        const int row = (t * kModsPerThread + i) % kRows;
        const std::string row_name = "row-" + std::to_string(row);
        char seg[16];
        std::snprintf(seg, sizeof seg, "_%02u", crc32(row_name) % 100u);
        const std::string lock =
            prefix + "/center_lock" + (segments ? seg : "");
        const auto t0 = Clock::now();
        const milliseconds wait = left_until(deadline);
        if (wait.count() <= 0) break;
        auto lease = client.acquire(lock, wait, opts);
        // A wait cut by the phase's deadline: the phase is incomplete
        // (reported), not an error.
        if (!lease && lease.error().code() == Errc::timeout &&
            Clock::now() + milliseconds(50) >= deadline) {
          break;
        }
        if (!lease) {
          std::lock_guard<std::mutex> g(mu);
          if (errors++ == 0) first_error = lease.error().to_string();
          continue;
        }
        mine.push_back(static_cast<std::uint64_t>(
            std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() -
                                                                 t0)
                .count()));
        const std::int64_t v = rows[row].load(std::memory_order_relaxed);
        std::this_thread::yield();
        rows[row].store(v + 1, std::memory_order_relaxed);
        if (auto r = client.release(*lease); !r || !*r) {
          std::lock_guard<std::mutex> g(mu);
          if (errors++ == 0) {
            first_error = r ? "release: not held" : r.error().to_string();
          }
          continue;
        }
        ++done;
      }
      std::lock_guard<std::mutex> g(mu);
      acquire_ns.insert(acquire_ns.end(), mine.begin(), mine.end());
    });
  }
  for (auto& th : threads) th.join();
  const double secs = ms_between(start, Clock::now()) / 1000.0;
  std::int64_t sum = 0;
  for (auto& r : rows) sum += r.load();
  const std::int64_t lost = static_cast<std::int64_t>(done.load()) - sum;
  Latency lat = summarize(&acquire_ns);
  const bool complete = done.load() == kThreads * kModsPerThread;
  std::ostringstream js;
  js << "{\"seconds\":" << fmt_secs(secs)
     << ",\"modifications\":" << done.load()
     << ",\"complete\":" << (complete ? "true" : "false")
     << ",\"lost_updates\":" << lost << ",\"errors\":" << errors.load()
     << ",\"acquire_p50_us\":" << fmt(lat.p50_us)
     << ",\"acquire_p99_us\":" << fmt(lat.p99_us) << "}";
  *text += std::string(segments ? "100 segment locks" : "one center lock") +
           ": " + std::to_string(done.load()) + " modifications in " +
           fmt_secs(secs) + " s, lost updates " + std::to_string(lost) +
           ", acquire p50 " + fmt(lat.p50_us) + " us, p99 " + fmt(lat.p99_us) +
           " us" + (complete ? "" : "  INCOMPLETE") + "\n";
  total->pairs += done.load();
  total->errors += errors.load() + (lost != 0 ? 1 : 0);
  if (total->first_error.empty()) total->first_error = first_error;
  if (lost != 0 && total->first_error.empty()) {
    total->first_error = "lost updates: mutual exclusion broken";
  }
  if (!complete) total->completed = false;
  return js.str();
}

}  // namespace

Result<LoadResult> run_microbatch(const LoadOptions& o) {
  ClientOptions copts;
  copts.max_retries = 0;
  copts.observer = o.observer;
  auto client = Client::open(o.store, copts);
  if (!client) return client.error();
  LoadResult r;
  r.clients = 0;
  r.locks = kNamespaces;
  const auto start = Clock::now();
  const milliseconds half = o.duration / 2;
  std::string text =
      "microbatch (1 scenario second = 100 ms; recent every 1 s x 2 "
      "shards, late every 10 s x 1 shard, 100 namespaces)\n";
  const std::string fifo =
      microbatch_phase(*client, o.prefix + "/fifo", true, half, &text, &r);
  const std::string poll =
      microbatch_phase(*client, o.prefix + "/poll", false, half, &text, &r);
  r.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  r.pairs_per_sec =
      r.seconds > 0 ? static_cast<double>(r.pairs) / r.seconds : 0;
  r.scenario_json = "{\"fifo\":" + fifo + ",\"polling\":" + poll + "}";
  r.scenario_text = text;
  return r;
}

Result<LoadResult> run_segments(const LoadOptions& o) {
  // One Client per thread (own connections), as 50 processes would have.
  std::vector<Client> clients;
  ClientOptions copts;
  copts.max_retries = 0;
  copts.observer = o.observer;
  for (int i = 0; i < kThreads; ++i) {
    auto c = Client::open(o.store, copts);
    if (!c) return c.error();
    clients.push_back(std::move(*c));
  }
  LoadResult r;
  r.clients = kThreads;
  r.locks = 100;
  const auto start = Clock::now();
  std::string text = "segments (50 threads x 100 guarded modifications)\n";
  const std::string center = segments_phase(
      clients, o.prefix + "/center", false, start + o.duration, &text, &r);
  const std::string segments =
      segments_phase(clients, o.prefix + "/segments", true,
                     Clock::now() + o.duration, &text, &r);
  r.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  r.pairs_per_sec =
      r.seconds > 0 ? static_cast<double>(r.pairs) / r.seconds : 0;
  r.scenario_json = "{\"center\":" + center + ",\"segments\":" + segments + "}";
  r.scenario_text = text;
  return r;
}

}  // namespace baton::bench
