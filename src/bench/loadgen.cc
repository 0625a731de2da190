#include "bench/loadgen.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "bench/raw.h"
#include "bench/raw_flock.h"
#include "bench/session.h"
#include "bench/workloads.h"

namespace baton::bench {

namespace {

std::string json_escape(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  return out;
}

std::string fmt3(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3f", v);
  return buf;
}

void latency_json(std::ostringstream& o, const char* key, const Latency& l) {
  o << "\"" << key << "\":{\"count\":" << l.count
    << ",\"mean_us\":" << fmt(l.mean_us) << ",\"p50_us\":" << fmt(l.p50_us)
    << ",\"p90_us\":" << fmt(l.p90_us) << ",\"p99_us\":" << fmt(l.p99_us)
    << ",\"max_us\":" << fmt(l.max_us) << "}";
}

}  // namespace

Result<Workload> parse_workload(std::string_view text) {
  for (Workload w :
       {Workload::uncontended, Workload::contended, Workload::handoff,
        Workload::fair, Workload::mixed, Workload::microbatch,
        Workload::segments, Workload::hold, Workload::waiters}) {
    if (text == workload_name(w)) return w;
  }
  return Error(Errc::invalid_argument,
               "workload must be uncontended, contended, handoff, fair, "
               "mixed, microbatch, segments, hold or waiters, not \"" +
                   std::string(text) + "\"");
}

const char* workload_name(Workload w) {
  switch (w) {
    case Workload::uncontended:
      return "uncontended";
    case Workload::contended:
      return "contended";
    case Workload::handoff:
      return "handoff";
    case Workload::fair:
      return "fair";
    case Workload::mixed:
      return "mixed";
    case Workload::microbatch:
      return "microbatch";
    case Workload::segments:
      return "segments";
    case Workload::hold:
      return "hold";
    case Workload::waiters:
      return "waiters";
  }
  return "?";
}

Latency summarize(std::vector<std::uint64_t>* s) {
  Latency l;
  l.count = s->size();
  if (s->empty()) return l;
  std::sort(s->begin(), s->end());
  auto pct = [&](double p) {
    auto idx = static_cast<std::size_t>(
        std::ceil(p * static_cast<double>(s->size())) - 1);
    idx = std::min(idx, s->size() - 1);
    return static_cast<double>((*s)[idx]) / 1000.0;
  };
  long double sum = 0;
  for (auto v : *s) sum += v;
  l.mean_us = static_cast<double>(sum / s->size()) / 1000.0;
  l.p50_us = pct(0.50);
  l.p90_us = pct(0.90);
  l.p99_us = pct(0.99);
  l.max_us = static_cast<double>(s->back()) / 1000.0;
  return l;
}

double jain_index(const std::vector<std::uint64_t>& counts) {
  long double sum = 0, sq = 0;
  for (auto c : counts) {
    sum += static_cast<long double>(c);
    sq += static_cast<long double>(c) * static_cast<long double>(c);
  }
  if (counts.empty() || sq == 0) return 0;
  return static_cast<double>(sum * sum /
                             (static_cast<long double>(counts.size()) * sq));
}

std::int64_t read_rss_kb(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.starts_with("VmRSS:")) {
      return std::strtoll(line.c_str() + 6, nullptr, 10);
    }
  }
  return -1;
}

Result<LoadResult> run_load(const LoadOptions& options) {
  LoadOptions o = options;
  if (o.prefix.empty()) o.prefix = "bench/" + std::to_string(::getpid());
  // memory: is private to each Client; a named one is shared in-process,
  // so every simulated client sees the same locks.
  if (o.store == "memory:")
    o.store = "memory:bench-" + std::to_string(::getpid());
  if (o.store.empty()) {
    return Error(Errc::invalid_argument, "--store must name a store URL");
  }
  if (o.clients < 1) {
    return Error(Errc::invalid_argument, "--clients must be at least 1");
  }
  if (o.clients > 100000) {
    return Error(Errc::invalid_argument, "--clients must be at most 100000");
  }
  if (o.locks < 1) {
    return Error(Errc::invalid_argument, "--locks must be at least 1");
  }
  if (o.duration.count() < 1) {
    return Error(Errc::invalid_argument, "--duration must be positive");
  }
  if (o.hold.count() < 0 || o.hold >= o.duration) {
    return Error(Errc::invalid_argument,
                 "--hold must be at least 0 and shorter than --duration");
  }
  if (o.workload == Workload::handoff && o.clients < 2) {
    return Error(Errc::invalid_argument, "handoff needs --clients >= 2");
  }
  if (o.workload == Workload::fair && o.locks != 1) {
    return Error(Errc::invalid_argument,
                 "fair puts every client on one lock; leave --locks at 1");
  }
  if (is_raw(o.store) && o.workload != Workload::uncontended &&
      o.workload != Workload::hold) {
    return Error(Errc::invalid_argument,
                 std::string("raw-redis:// and raw-baton:// do not support "
                             "workload ") +
                     workload_name(o.workload) +
                     " (only uncontended and hold)");
  }
  if (o.store.starts_with("raw-etcd://") &&
      o.workload != Workload::uncontended) {
    return Error(Errc::invalid_argument,
                 std::string("raw-etcd:// does not support workload ") +
                     workload_name(o.workload) + " (only uncontended)");
  }
  if ((is_raw_zk(o.store) || is_raw_flock(o.store)) &&
      o.workload != Workload::uncontended &&
      o.workload != Workload::contended && o.workload != Workload::handoff &&
      o.workload != Workload::fair) {
    return Error(Errc::invalid_argument,
                 o.store.substr(0, o.store.find("://")) +
                     ":// does not support workload " +
                     workload_name(o.workload) +
                     " (only uncontended, contended, handoff and fair)");
  }
  Result<LoadResult> r = Error(Errc::internal, "unreachable");
  switch (o.workload) {
    case Workload::hold:
      r = run_hold(o);
      break;
    case Workload::waiters:
      r = run_waiters(o);
      break;
    case Workload::microbatch:
      r = run_microbatch(o);
      break;
    case Workload::segments:
      r = run_segments(o);
      break;
    default:
      r = run_loop(o);
      break;
  }
  if (!r) return r;
  r->workload = o.workload;
  r->store = o.store;
  if (auto at = r->store.find("password="); at != std::string::npos) {
    r->store = r->store.substr(0, at) + "password=***";
  }
  return r;
}

std::string to_json(const LoadResult& r) {
  std::ostringstream o;
  o << "{\"store\":\"" << json_escape(r.store) << "\",\"workload\":\""
    << workload_name(r.workload) << "\",\"clients\":" << r.clients
    << ",\"locks\":" << r.locks << ",\"seconds\":" << fmt(r.seconds)
    << ",\"pairs\":" << r.pairs << ",\"pairs_per_sec\":" << fmt(r.pairs_per_sec)
    << ",";
  latency_json(o, "acquire", r.acquire);
  o << ",";
  latency_json(o, "handoff", r.handoff);
  o << ",\"errors\":" << r.errors << ",\"first_error\":\""
    << json_escape(r.first_error) << "\",\"busy\":" << r.busy
    << ",\"jain\":" << fmt3(r.jain)
    << ",\"min_client_pairs\":" << r.min_client_pairs
    << ",\"max_client_pairs\":" << r.max_client_pairs
    << ",\"worst_wait_ms\":" << fmt3(r.worst_wait_ms);
  if (!r.scenario_json.empty()) o << ",\"scenario\":" << r.scenario_json;
  if (r.workload == Workload::hold) {
    o << ",\"rss_before_kb\":" << r.rss_before_kb
      << ",\"rss_after_kb\":" << r.rss_after_kb
      << ",\"bytes_per_lock\":" << fmt(r.bytes_per_lock);
  }
  if (r.workload == Workload::waiters) {
    o << ",\"connect_ms\":" << fmt(r.connect_ms)
      << ",\"enqueue_ms\":" << fmt(r.enqueue_ms)
      << ",\"drain_ms\":" << fmt(r.drain_ms);
  }
  o << ",\"completed\":" << (r.completed ? "true" : "false") << "}";
  return o.str();
}

std::string to_text(const LoadResult& r) {
  std::ostringstream o;
  auto lat = [&](const char* what, const Latency& l) {
    if (l.count == 0) return;
    o << what << " (us, n=" << l.count << "): p50 " << fmt(l.p50_us) << "  p90 "
      << fmt(l.p90_us) << "  p99 " << fmt(l.p99_us) << "  max " << fmt(l.max_us)
      << "  mean " << fmt(l.mean_us) << "\n";
  };
  o << "store " << r.store << "  workload " << workload_name(r.workload)
    << "  clients " << r.clients << "  locks " << r.locks << "\n";
  o << "pairs " << r.pairs << " in " << fmt(r.seconds)
    << " s = " << fmt(r.pairs_per_sec) << " pairs/s\n";
  lat("acquire", r.acquire);
  lat("handoff", r.handoff);
  if (r.workload != Workload::hold && r.workload != Workload::waiters &&
      r.scenario_text.empty()) {
    o << "fairness: Jain " << fmt3(r.jain) << " over " << r.clients
      << " clients (pairs per client " << r.min_client_pairs << ".."
      << r.max_client_pairs << "), worst wait " << fmt3(r.worst_wait_ms)
      << " ms\n";
  }
  if (r.busy > 0) o << "busy (try_acquire refused) " << r.busy << "\n";
  o << r.scenario_text;
  if (r.workload == Workload::hold) {
    o << "server RSS " << r.rss_before_kb << " KiB -> " << r.rss_after_kb
      << " KiB (" << fmt(r.bytes_per_lock) << " bytes per lock)\n";
  }
  if (r.workload == Workload::waiters) {
    o << "connect " << fmt(r.connect_ms) << " ms, enqueue " << fmt(r.enqueue_ms)
      << " ms, drain " << fmt(r.drain_ms) << " ms\n";
  }
  o << "errors " << r.errors;
  if (!r.first_error.empty()) o << " (first: " << r.first_error << ")";
  if (!r.completed) o << "  INCOMPLETE (deadline reached)";
  o << "\n";
  return o.str();
}

}  // namespace baton::bench
