// PrometheusMetrics: the client's events counted per lock-name prefix and
// rendered in the Prometheus text exposition format 0.0.4.
#include <charconv>
#include <cmath>
#include <string>
#include <string_view>
#include <utility>

#include "baton/validate.h"
#include "client/metrics_state.h"

namespace baton {

namespace metrics_internal {

bool valid_utf8(std::string_view s) {
  for (std::size_t i = 0; i < s.size();) {
    const std::size_t len = utf8_sequence_length(s, i);
    if (len == 0) return false;
    i += len;
  }
  return true;
}

std::string to_utf8(std::string_view s) {
  std::string out;
  for (std::size_t i = 0; i < s.size();) {
    const std::size_t len = utf8_sequence_length(s, i);
    if (len == 0) {
      out += "\xEF\xBF\xBD";
      ++i;
    } else {
      out.append(s.substr(i, len));
      i += len;
    }
  }
  return out;
}

std::string format_double(double v) {
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  if (ec != std::errc()) return "NaN";
  return std::string(buf, end);
}

}  // namespace metrics_internal

using namespace metrics_internal;  // NOLINT: this file's own internals

namespace {

Status bad_option(const std::string& field, const std::string& why) {
  return Error(Errc::invalid_argument, "MetricsOptions." + field + " " + why);
}

Status validate_buckets(const std::string& field,
                        const std::vector<double>& bounds) {
  if (bounds.empty() || bounds.size() > kMaxBuckets) {
    return bad_option(field, "must have 1 .. " + std::to_string(kMaxBuckets) +
                                 " bounds, not " +
                                 std::to_string(bounds.size()));
  }
  for (std::size_t i = 0; i < bounds.size(); ++i) {
    const double b = bounds[i];
    if (!std::isfinite(b) || b <= 0) {
      return bad_option(field, "must be finite and > 0 (bound " +
                                   std::to_string(i) + " is " +
                                   format_double(b) + ")");
    }
    if (i > 0 && b <= bounds[i - 1]) {
      return bad_option(field, "must be strictly increasing (bound " +
                                   std::to_string(i) + ", " + format_double(b) +
                                   ", is not above " +
                                   format_double(bounds[i - 1]) + ")");
    }
  }
  return {};
}

}  // namespace

Status validate(const MetricsOptions& o) {
  if (o.prefix_separators.empty()) {
    return bad_option("prefix_separators",
                      "is empty (default \"/:.\"; set prefix_segments or "
                      "raw_names instead)");
  }
  if (o.prefix_separators.find('\0') != std::string::npos) {
    return bad_option("prefix_separators", "must not contain NUL");
  }
  if (o.prefix_segments < 1 || o.prefix_segments > kMaxSegments) {
    return bad_option("prefix_segments",
                      "must be 1 .. " + std::to_string(kMaxSegments) +
                          ", not " + std::to_string(o.prefix_segments));
  }
  if (o.max_prefixes < 1 || o.max_prefixes > kMaxPrefixes) {
    return bad_option("max_prefixes",
                      "must be 1 .. " + std::to_string(kMaxPrefixes) +
                          ", not " + std::to_string(o.max_prefixes));
  }
  if (Status s = validate_buckets("wait_buckets", o.wait_buckets); !s) {
    return s;
  }
  return validate_buckets("hold_buckets", o.hold_buckets);
}
std::string_view PrometheusMetrics::State::prefix_of(
    std::string_view name) const {
  if (options.raw_names) return name;
  std::size_t cut = std::string_view::npos;
  int seen = 0;
  for (std::size_t i = 0; i < name.size(); ++i) {
    if (!separator[static_cast<unsigned char>(name[i])]) continue;
    cut = i;
    if (++seen == options.prefix_segments) break;
  }
  // No separator: "" (never the whole name).
  return cut == std::string_view::npos ? std::string_view()
                                       : name.substr(0, cut);
}

std::size_t PrometheusMetrics::State::add_series(std::string key) {
  series.emplace_back();
  Series& s = series.back();
  for (Histogram& h : s.wait)
    h.buckets.assign(options.wait_buckets.size() + 1, 0);
  for (Histogram& h : s.hold)
    h.buckets.assign(options.hold_buckets.size() + 1, 0);
  index.emplace(std::move(key), series.size() - 1);
  return series.size() - 1;
}

// The series of `name`'s prefix, created on first sight while fewer than
// max_prefixes exist, else "_other". Allocates only for a new series (or a
// prefix that is not UTF-8).
std::size_t PrometheusMetrics::State::series_of(std::string_view name) {
  std::string_view prefix = prefix_of(name);
  std::string fixed;
  if (!valid_utf8(prefix)) {
    fixed = to_utf8(prefix);
    prefix = fixed;
  }
  if (auto it = index.find(prefix); it != index.end()) return it->second;
  if (named < options.max_prefixes) {
    ++named;
    return add_series(std::string(prefix));
  }
  if (auto it = index.find(kOther); it != index.end()) return it->second;
  return add_series(std::string(kOther));
}

// Forgets leases whose local safe deadline has passed: they are no longer
// held, whether or not a release or loss was seen.
void PrometheusMetrics::State::prune(TimePoint now) {
  for (auto it = held.begin(); it != held.end();) {
    it = it->second.deadline <= now ? held.erase(it) : std::next(it);
  }
  prune_at = std::max<std::size_t>(64, 2 * held.size());
}

void PrometheusMetrics::State::end_wait(std::string_view name) {
  auto it = waiting.find(std::make_tuple(std::this_thread::get_id(), name));
  if (it == waiting.end()) return;  // it did not wait
  if (--it->second.count == 0) waiting.erase(it);
}

// The counters and histograms of one event.
void PrometheusMetrics::State::count(const Event& e, Series& s) {
  switch (e.kind) {
    case EventKind::wait_started:
      break;
    case EventKind::granted:
      ++s.counters[kGrants];
      s.wait[kWaitGranted].observe(options.wait_buckets, e.waited);
      break;
    case EventKind::not_acquired:
      ++s.counters[kNotAcquired];
      s.wait[kWaitNotAcquired].observe(options.wait_buckets, e.waited);
      break;
    case EventKind::timed_out:
      ++s.counters[kTimeouts];
      s.wait[kWaitTimedOut].observe(options.wait_buckets, e.waited);
      break;
    case EventKind::cancelled:
      ++s.counters[kCancellations];
      s.wait[kWaitCancelled].observe(options.wait_buckets, e.waited);
      break;
    case EventKind::failed: {
      const auto code = static_cast<std::size_t>(
          e.error != nullptr ? e.error->code() : Errc::internal);
      ++s.failures[code < kErrcSlots ? code : 0];
      s.wait[kWaitFailed].observe(options.wait_buckets, e.waited);
      break;
    }
    case EventKind::renewed:
      ++s.counters[kRenewals];
      break;
    case EventKind::renewal_failed:
      ++s.counters[e.retryable ? kRenewalFailuresRetryable
                               : kRenewalFailuresFinal];
      break;
    case EventKind::lost:
      ++s.counters[e.lost_reason == LostReason::deadline_passed
                       ? kLostDeadlinePassed
                       : kLostStoreSaid];
      s.hold[kHoldLost].observe(options.hold_buckets, e.held);
      break;
    case EventKind::released:
      ++s.counters[kReleases];
      s.hold[kHoldReleased].observe(options.hold_buckets, e.held);
      break;
    case EventKind::became_leader:
      ++s.counters[kElectionsWon];
      break;
    case EventKind::stopped_leading:
      ++s.counters[kLeadershipEnded];
      break;
    case EventKind::new_leader:
      ++s.counters[kLeaderChanges];
      break;
  }
}

// The gauges' tables: held leases, waits in progress, elections led.
void PrometheusMetrics::State::track(const Event& e, std::size_t at) {
  switch (e.kind) {
    case EventKind::wait_started: {
      auto key = std::make_tuple(std::this_thread::get_id(), e.lock);
      auto it = waiting.find(key);
      if (it == waiting.end()) {
        it = waiting
                 .emplace(WaitKey{std::get<0>(key), std::string(e.lock)},
                          Waiting{at, 0})
                 .first;
      }
      ++it->second.count;
      break;
    }
    case EventKind::granted:
      end_wait(e.lock);
      if (e.lease != nullptr) {
        if (held.size() >= prune_at) prune(options.clock->now());
        auto key = std::make_tuple(std::string_view(e.lease->name),
                                   e.lease->fencing_token);
        auto it = held.find(key);
        if (it == held.end()) {
          it = held.emplace(HeldKey{e.lease->name, e.lease->fencing_token},
                            Held{at, 0, {}})
                   .first;
        }
        ++it->second.holds;
        it->second.deadline = e.lease->local_deadline;
      }
      break;
    case EventKind::not_acquired:
    case EventKind::timed_out:
    case EventKind::cancelled:
    case EventKind::failed:
      end_wait(e.lock);
      break;
    case EventKind::renewed:
      if (e.lease != nullptr) {
        auto it = held.find(std::make_tuple(std::string_view(e.lease->name),
                                            e.lease->fencing_token));
        if (it != held.end()) it->second.deadline = e.lease->local_deadline;
      }
      break;
    case EventKind::lost:
    case EventKind::released:
      if (e.lease != nullptr) {
        auto it = held.find(std::make_tuple(std::string_view(e.lease->name),
                                            e.lease->fencing_token));
        if (it != held.end() &&
            (e.kind == EventKind::lost || --it->second.holds == 0)) {
          held.erase(it);
        }
      }
      break;
    case EventKind::became_leader: {
      auto it = leading.find(e.lock);
      if (it == leading.end()) {
        it = leading.emplace(std::string(e.lock), Leading{at, 0}).first;
      }
      ++it->second.count;
      break;
    }
    case EventKind::stopped_leading: {
      auto it = leading.find(e.lock);
      if (it != leading.end() && --it->second.count == 0) leading.erase(it);
      break;
    }
    case EventKind::renewal_failed:
    case EventKind::new_leader:
      break;
  }
}

PrometheusMetrics::PrometheusMetrics()
    : state_(std::make_unique<State>(MetricsOptions{})) {}

PrometheusMetrics::PrometheusMetrics(MetricsOptions options)
    : state_(std::make_unique<State>(std::move(options))) {}

PrometheusMetrics::~PrometheusMetrics() = default;

Result<std::shared_ptr<PrometheusMetrics>> PrometheusMetrics::create(
    MetricsOptions options) {
  if (Status s = validate(options); !s) return s.error();
  return std::shared_ptr<PrometheusMetrics>(
      new PrometheusMetrics(std::move(options)));
}

void PrometheusMetrics::on_event(const Event& event) {
  State& st = *state_;
  std::lock_guard<std::mutex> lk(st.mu);
  const std::size_t at = st.series_of(event.lock);
  st.count(event, st.series[at]);
  st.track(event, at);
}
}  // namespace baton
