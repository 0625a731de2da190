// client/metrics_state.h — the inside of PrometheusMetrics (baton/metrics.h),
// shared by metrics.cc (events) and metrics_render.cc (the exposition).
#ifndef BATON_CLIENT_METRICS_STATE_H_
#define BATON_CLIENT_METRICS_STATE_H_

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "baton/metrics.h"

namespace baton {
namespace metrics_internal {

using std::chrono::microseconds;
using TimePoint = Clock::time_point;

constexpr int kMaxSegments = 64;
constexpr std::size_t kMaxPrefixes = 100'000;
constexpr std::size_t kMaxBuckets = 64;
constexpr std::string_view kOther = "_other";

// Plain counters of one series (the labelled ones are split by label).
enum CounterId : std::size_t {
  kGrants,
  kNotAcquired,
  kTimeouts,
  kCancellations,
  kRenewals,
  kRenewalFailuresRetryable,
  kRenewalFailuresFinal,
  kLostStoreSaid,
  kLostDeadlinePassed,
  kReleases,
  kElectionsWon,
  kLeadershipEnded,
  kLeaderChanges,
  kCounterCount,
};

enum WaitOutcome : std::size_t {
  kWaitGranted,
  kWaitNotAcquired,
  kWaitTimedOut,
  kWaitCancelled,
  kWaitFailed,
  kWaitOutcomeCount,
};
constexpr std::array<std::string_view, kWaitOutcomeCount> kWaitOutcomeNames = {
    "granted", "not_acquired", "timed_out", "cancelled", "failed"};

enum HoldEnd : std::size_t { kHoldReleased, kHoldLost, kHoldEndCount };
constexpr std::array<std::string_view, kHoldEndCount> kHoldEndNames = {
    "released", "lost"};

// Errc values are 1..9; slot 0 is unused.
constexpr std::size_t kErrcSlots = 16;

struct Histogram {
  // Per bucket, not cumulative (render() sums them); the last slot counts
  // the observations above the largest bound (+Inf).
  std::vector<std::uint64_t> buckets;
  std::uint64_t count = 0;
  std::int64_t sum_us = 0;  // exact; seconds = sum_us / 1e6

  void observe(const std::vector<double>& bounds, microseconds d) {
    const double seconds = static_cast<double>(d.count()) / 1e6;
    std::size_t i = 0;
    while (i < bounds.size() && seconds > bounds[i]) ++i;
    ++buckets[i];
    ++count;
    sum_us += d.count();
  }
};

// Everything counted under one prefix label value.
struct Series {
  std::array<std::uint64_t, kCounterCount> counters{};
  std::array<std::uint64_t, kErrcSlots> failures{};  // by Errc
  std::array<Histogram, kWaitOutcomeCount> wait;
  std::array<Histogram, kHoldEndCount> hold;
};

// A held lease: one per (name, fencing token), with its reentrant holds.
struct Held {
  std::size_t series = 0;
  std::uint32_t holds = 0;
  TimePoint deadline{};
};

// Ordered keys with lookups by string_view (no allocation to find).
struct HeldKey {
  std::string name;
  std::uint64_t fencing = 0;
};
struct WaitKey {
  std::thread::id thread;
  std::string name;
};
struct KeyLess {
  using is_transparent = void;
  static auto view(const HeldKey& k) {
    return std::tuple<std::string_view, std::uint64_t>(k.name, k.fencing);
  }
  static auto view(const std::tuple<std::string_view, std::uint64_t>& k) {
    return k;
  }
  static auto view(const WaitKey& k) {
    return std::tuple<std::thread::id, std::string_view>(k.thread, k.name);
  }
  static auto view(const std::tuple<std::thread::id, std::string_view>& k) {
    return k;
  }
  template <typename A, typename B>
  bool operator()(const A& a, const B& b) const {
    return view(a) < view(b);
  }
};

struct Waiting {
  std::size_t series = 0;
  std::uint32_t count = 0;
};
struct Leading {
  std::size_t series = 0;
  std::uint32_t count = 0;
};

// True if `s` is valid UTF-8.
bool valid_utf8(std::string_view s);
// `s` with each invalid UTF-8 byte replaced by U+FFFD.
std::string to_utf8(std::string_view s);
// The shortest text that reads back as `v` ("0.001", "60", "1e-05").
std::string format_double(double v);

}  // namespace metrics_internal

struct PrometheusMetrics::State {
  using Series = metrics_internal::Series;
  using TimePoint = metrics_internal::TimePoint;
  using HeldMap = std::map<metrics_internal::HeldKey, metrics_internal::Held,
                           metrics_internal::KeyLess>;
  using WaitMap = std::map<metrics_internal::WaitKey, metrics_internal::Waiting,
                           metrics_internal::KeyLess>;

  explicit State(MetricsOptions o) : options(std::move(o)) {
    if (!options.clock) options.clock = Clock::steady();
    for (char c : options.prefix_separators) {
      separator[static_cast<unsigned char>(c)] = true;
    }
  }

  MetricsOptions options;
  std::array<bool, 256> separator{};

  mutable std::mutex mu;
  // Guarded by mu. Series by prefix label value (at most max_prefixes
  // named ones plus "_other"); map order is the output's order.
  std::map<std::string, std::size_t, std::less<>> index;
  std::size_t named = 0;  // entries of `index` that are real prefixes
  std::vector<Series> series;
  HeldMap held;
  std::size_t prune_at = 64;  // prune `held` when it grows past this
  WaitMap waiting;
  std::map<std::string, metrics_internal::Leading, std::less<>> leading;

  std::string_view prefix_of(std::string_view name) const;
  std::size_t series_of(std::string_view name);
  std::size_t add_series(std::string key);
  void prune(TimePoint now);
  void end_wait(std::string_view name);
  void count(const Event& e, Series& s);
  void track(const Event& e, std::size_t at);
};

}  // namespace baton

#endif  // BATON_CLIENT_METRICS_STATE_H_
