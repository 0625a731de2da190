// baton/metrics.h — Prometheus metrics of a client's locks, from its events.
//
//   auto metrics = baton::PrometheusMetrics::create({.max_prefixes = 50});
//   if (!metrics) return metrics.error();  // invalid_argument naming a field
//   baton::ClientOptions o;
//   o.observer = *metrics;                 // (baton/observer.h)
//   auto client = baton::Client::open(url, o);
//   ...
//   serve((*metrics)->render());           // text exposition format 0.0.4
//   (*metrics)->write_file("/var/lib/node_exporter/textfile/job.prom");
//
// Series are labelled by a lock name's PREFIX, not by the name: with names
// like "jobs/nightly/2026-11-25" a label per name would make one series per
// run. The prefix is the name up to its `prefix_segments`-th separator (any
// byte of `prefix_separators`), without that separator: "jobs/nightly/x"
// has prefix "jobs" (1 segment) or "jobs/nightly" (2). A name with fewer
// separators than that is cut at its last one ("jobs/x" -> "jobs" with 2
// segments), and a name without any has the prefix "": a prefix never
// holds a name's last segment, so no whole lock name reaches the output
// unless `raw_names` asks for it. At most `max_prefixes` distinct prefixes
// get series of their own; later ones are counted under prefix="_other".
//
// The metrics (every series has the label `prefix`):
//   baton_client_wait_seconds{outcome}   histogram: an acquire's wait, by
//       outcome granted | not_acquired | timed_out | cancelled | failed
//   baton_client_hold_seconds{end}       histogram: grant to end, by end
//       released | lost
//   baton_client_grants_total, _not_acquired_total, _timeouts_total,
//   _cancellations_total, _failures_total{code}, _renewals_total,
//   _renewal_failures_total{retryable}, _leases_lost_total{reason},
//   _releases_total, _elections_won_total, _leadership_ended_total,
//   _leader_changes_total                counters
//   baton_client_leases_held, _waiting_requests, _leader   gauges
//
// leases_held counts the leases granted and neither released nor lost,
// each (name, fencing token) once however many reentrant holds it has; a
// lease whose local safe deadline has passed is no longer counted (and
// forgotten), so a lease dropped without release does not stay in the
// gauge. waiting_requests counts the blocking acquires between
// wait_started and their end, matched by thread and name (the events of
// one acquire come from its caller's thread). leader counts the
// elections this client leads.
//
// Thread safety: on_event, render and write_file may be called from any
// thread at once. on_event takes one mutex for a few map lookups and
// increments; it allocates only when it meets a new prefix, a new lease
// (the held-lease table) or a new wait.
#ifndef BATON_METRICS_H_
#define BATON_METRICS_H_

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "baton/clock.h"
#include "baton/error.h"
#include "baton/observer.h"

namespace baton {

struct MetricsOptions {
  // The bytes that end a segment of a lock name. Not empty.
  std::string prefix_separators = "/:.";
  // Segments in a prefix (1 .. 64).
  int prefix_segments = 1;
  // Distinct prefix label values (1 .. 100000); later ones count under
  // prefix="_other". Also bounds raw_names.
  std::size_t max_prefixes = 100;
  // Label by the whole lock name instead of its prefix (still capped by
  // max_prefixes). Lock names then appear in the output.
  bool raw_names = false;
  // Upper bounds of baton_client_wait_seconds' buckets, in seconds:
  // finite, > 0, strictly increasing, at most 64 ("+Inf" is added).
  std::vector<double> wait_buckets = {0.001, 0.0025, 0.005, 0.01, 0.025,
                                      0.05,  0.1,    0.25,  0.5,  1,
                                      2.5,   5,      10,    30,   60};
  // The same for baton_client_hold_seconds (locks are held longer).
  std::vector<double> hold_buckets = {0.01, 0.1, 1,    10,   30,    60,
                                      300,  600, 1800, 3600, 21600, 86400};
  // The clock leases' local deadlines are read against; null =
  // Clock::steady(). Use the client's ClientOptions::clock if it has one.
  std::shared_ptr<const Clock> clock;
};

// invalid_argument naming the field ("MetricsOptions.max_prefixes ...") if
// an option is out of range.
Status validate(const MetricsOptions& options);

class PrometheusMetrics : public Observer {
 public:
  // With the default options (which cannot fail).
  PrometheusMetrics();
  // With `options`, checked by validate().
  static Result<std::shared_ptr<PrometheusMetrics>> create(
      MetricsOptions options = {});
  ~PrometheusMetrics() override;
  PrometheusMetrics(const PrometheusMetrics&) = delete;
  PrometheusMetrics& operator=(const PrometheusMetrics&) = delete;

  void on_event(const Event& event) override;

  // The metrics in the Prometheus text exposition format 0.0.4. Forgets
  // held leases whose local deadline has passed.
  std::string render() const;

  // render() written to `path` atomically: to "<path>.tmp.<pid>" in the
  // same directory, fsync, rename over `path` (the node_exporter textfile
  // collector's pattern: a reader sees the old file or the new, never a
  // part). Errors name the path and the system's reason: invalid_argument
  // for a path that cannot be written (no such directory, permission),
  // unavailable for a failing disk (ENOSPC, EIO).
  Status write_file(const std::string& path) const;

  struct State;

 private:
  explicit PrometheusMetrics(MetricsOptions options);

  std::unique_ptr<State> state_;
};

}  // namespace baton

#endif  // BATON_METRICS_H_
