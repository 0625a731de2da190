// PrometheusMetrics::render (the text exposition format 0.0.4) and
// write_file.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

#include "client/metrics_state.h"

namespace baton {

using namespace metrics_internal;  // NOLINT: this file's own internals

namespace {

// A label value in the exposition format: \ " and newline escaped.
void append_label_value(std::string& out, std::string_view v) {
  for (char c : v) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
}

// One plain counter family: its series come from counters[], one per
// (label value, counter) pair ({"", c} when it has no extra label).
struct CounterFamily {
  const char* name;
  const char* help;
  const char* label;  // nullptr: none
  std::array<std::pair<const char*, CounterId>, 2> values;
  std::size_t n;
};
constexpr CounterFamily kCounterFamilies[] = {
    {"baton_client_grants_total",
     "Leases granted",
     nullptr,
     {{{"", kGrants}, {}}},
     1},
    {"baton_client_not_acquired_total",
     "Acquires that found the lock held (no wait)",
     nullptr,
     {{{"", kNotAcquired}, {}}},
     1},
    {"baton_client_timeouts_total",
     "Blocking acquires whose wait ran out",
     nullptr,
     {{{"", kTimeouts}, {}}},
     1},
    {"baton_client_cancellations_total",
     "Blocking acquires stopped by their caller",
     nullptr,
     {{{"", kCancellations}, {}}},
     1},
    {"baton_client_renewals_total",
     "Leases renewed (keepers and extend)",
     nullptr,
     {{{"", kRenewals}, {}}},
     1},
    {"baton_client_renewal_failures_total",
     "Renewals that failed without losing the lease (yet)",
     "retryable",
     {{{"true", kRenewalFailuresRetryable}, {"false", kRenewalFailuresFinal}}},
     2},
    {"baton_client_leases_lost_total",
     "Leases lost: the store said so, or the local safe deadline passed",
     "reason",
     {{{"store_said", kLostStoreSaid},
       {"deadline_passed", kLostDeadlinePassed}}},
     2},
    {"baton_client_releases_total",
     "Holds given back by release",
     nullptr,
     {{{"", kReleases}, {}}},
     1},
    {"baton_client_elections_won_total",
     "Times this client became leader",
     nullptr,
     {{{"", kElectionsWon}, {}}},
     1},
    {"baton_client_leadership_ended_total",
     "Times this client stopped leading (lost or resigned)",
     nullptr,
     {{{"", kLeadershipEnded}, {}}},
     1},
    {"baton_client_leader_changes_total",
     "Leaders seen other than the last",
     nullptr,
     {{{"", kLeaderChanges}, {}}},
     1},
};

void family(std::string& out, std::string_view name, std::string_view type,
            std::string_view help) {
  out += "# HELP ";
  out += name;
  out += ' ';
  out += help;
  out += "\n# TYPE ";
  out += name;
  out += ' ';
  out += type;
  out += '\n';
}

// name{prefix="...",key="value",...} value
void sample(
    std::string& out, std::string_view name, std::string_view prefix,
    std::initializer_list<std::pair<std::string_view, std::string_view>> labels,
    std::string_view value) {
  out += name;
  out += "{prefix=\"";
  append_label_value(out, prefix);
  out += '"';
  for (const auto& [key, v] : labels) {
    if (key.empty()) continue;
    out += ',';
    out += key;
    out += "=\"";
    append_label_value(out, v);
    out += '"';
  }
  out += "} ";
  out += value;
  out += '\n';
}

void histogram(std::string& out, std::string_view name, std::string_view prefix,
               std::string_view key, std::string_view value, const Histogram& h,
               const std::vector<double>& bounds) {
  const std::string bucket = std::string(name) + "_bucket";
  std::uint64_t cumulative = 0;
  for (std::size_t i = 0; i <= bounds.size(); ++i) {
    cumulative += h.buckets[i];
    const std::string le =
        i < bounds.size() ? format_double(bounds[i]) : "+Inf";
    sample(out, bucket, prefix, {{key, value}, {"le", le}},
           std::to_string(cumulative));
  }
  sample(out, std::string(name) + "_sum", prefix, {{key, value}},
         format_double(static_cast<double>(h.sum_us) / 1e6));
  sample(out, std::string(name) + "_count", prefix, {{key, value}},
         std::to_string(h.count));
}

}  // namespace

std::string PrometheusMetrics::render() const {
  State& st = *state_;
  std::lock_guard<std::mutex> lk(st.mu);
  st.prune(st.options.clock->now());
  std::vector<std::uint64_t> held(st.series.size());
  std::vector<std::uint64_t> waiting(st.series.size());
  std::vector<std::uint64_t> leading(st.series.size());
  for (const auto& entry : st.held) ++held[entry.second.series];
  for (const auto& entry : st.waiting) {
    waiting[entry.second.series] += entry.second.count;
  }
  for (const auto& entry : st.leading) {
    leading[entry.second.series] += entry.second.count;
  }
  std::string out;
  family(out, "baton_client_wait_seconds", "histogram",
         "Time from an acquire's call to its outcome");
  for (const auto& [prefix, i] : st.index) {
    for (std::size_t o = 0; o < kWaitOutcomeCount; ++o) {
      if (st.series[i].wait[o].count == 0) continue;
      histogram(out, "baton_client_wait_seconds", prefix, "outcome",
                kWaitOutcomeNames[o], st.series[i].wait[o],
                st.options.wait_buckets);
    }
  }
  family(out, "baton_client_hold_seconds", "histogram",
         "Time from a grant to its release or loss");
  for (const auto& [prefix, i] : st.index) {
    for (std::size_t h = 0; h < kHoldEndCount; ++h) {
      if (st.series[i].hold[h].count == 0) continue;
      histogram(out, "baton_client_hold_seconds", prefix, "end",
                kHoldEndNames[h], st.series[i].hold[h],
                st.options.hold_buckets);
    }
  }
  for (const CounterFamily& f : kCounterFamilies) {
    family(out, f.name, "counter", f.help);
    for (const auto& [prefix, i] : st.index) {
      for (std::size_t v = 0; v < f.n; ++v) {
        sample(out, f.name, prefix,
               {{f.label == nullptr ? "" : f.label, f.values[v].first}},
               std::to_string(st.series[i].counters[f.values[v].second]));
      }
    }
  }
  family(out, "baton_client_failures_total", "counter",
         "Acquires that failed otherwise, by error code");
  for (const auto& [prefix, i] : st.index) {
    for (std::size_t c = 1; c < kErrcSlots; ++c) {
      if (st.series[i].failures[c] == 0) continue;
      sample(out, "baton_client_failures_total", prefix,
             {{"code", errc_name(static_cast<Errc>(c))}},
             std::to_string(st.series[i].failures[c]));
    }
  }
  const std::pair<const char*, const char*> gauges[] = {
      {"baton_client_leases_held",
       "Leases granted and not yet released, lost or past their local "
       "safe deadline"},
      {"baton_client_waiting_requests", "Blocking acquires waiting now"},
      {"baton_client_leader", "Elections this client leads now"},
  };
  const std::vector<std::uint64_t>* values[] = {&held, &waiting, &leading};
  for (std::size_t g = 0; g < 3; ++g) {
    family(out, gauges[g].first, "gauge", gauges[g].second);
    for (const auto& [prefix, i] : st.index) {
      sample(out, gauges[g].first, prefix, {}, std::to_string((*values[g])[i]));
    }
  }
  return out;
}

namespace {

// invalid_argument for a path that cannot be written, unavailable for a
// disk that fails (retrying may help).
Error file_error(const std::string& path, const std::string& what, int err) {
  const bool disk = err == ENOSPC || err == EIO || err == EDQUOT ||
                    err == EAGAIN || err == EINTR;
  return Error(
      disk ? Errc::unavailable : Errc::invalid_argument,
      "metrics file " + path + ": " + what + ": " + std::strerror(err));
}

// 0, or the errno of the write that failed.
int write_all(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    data.remove_prefix(static_cast<std::size_t>(n));
  }
  return 0;
}

}  // namespace

Status PrometheusMetrics::write_file(const std::string& path) const {
  const std::string text = render();
  // Same directory as `path`, so that the rename is atomic; the pid keeps
  // two processes writing one file from sharing a temporary file.
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  const int fd =
      ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return file_error(path, "cannot create " + tmp, errno);
  int err = 0;
  std::string what;
  if ((err = write_all(fd, text)) != 0) {
    what = "cannot write " + tmp;
  } else if (::fsync(fd) != 0) {
    err = errno, what = "cannot sync " + tmp;
  }
  if (::close(fd) != 0 && err == 0) err = errno, what = "cannot close " + tmp;
  if (err == 0 && ::rename(tmp.c_str(), path.c_str()) != 0) {
    err = errno, what = "cannot rename " + tmp + " to it";
  }
  if (err != 0) {
    ::unlink(tmp.c_str());
    return file_error(path, what, err);
  }
  // The rename itself is made durable by syncing the directory (best
  // effort: the file is complete either way).
  const std::size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "."
                          : slash == 0               ? "/"
                                                     : path.substr(0, slash);
  if (const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      dfd >= 0) {
    (void)::fsync(dfd);
    ::close(dfd);
  }
  return {};
}

}  // namespace baton
