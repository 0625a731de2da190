#include "bench/loadgen.h"

#include <hiredis/hiredis.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <latch>
#include <memory>
#include <optional>
#include <sstream>
#include <thread>

#include "baton/client.h"
#include "bench/raw.h"

namespace baton::bench {

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

std::uint64_t ns_between(Clock::time_point a, Clock::time_point b) {
  auto d = std::chrono::duration_cast<std::chrono::nanoseconds>(b - a).count();
  return d < 0 ? 0 : static_cast<std::uint64_t>(d);
}

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             Clock::now().time_since_epoch())
      .count();
}

// Per-thread counters, merged after the run.
struct ThreadStats {
  std::vector<std::uint64_t> acquire_ns;
  std::vector<std::uint64_t> handoff_ns;
  std::uint64_t pairs = 0;
  std::uint64_t errors = 0;
  std::string first_error;
  void error(const std::string& what) {
    if (errors++ == 0) first_error = what;
  }
};

// One simulated client: one connection (pool) of its own.
class Session {
 public:
  virtual ~Session() = default;
  virtual Status try_acquire(const std::string& name) = 0;
  // Errc::timeout when `wait` passes without a grant.
  virtual Status acquire(const std::string& name, milliseconds wait) = 0;
  virtual Status release() = 0;
  virtual Result<std::size_t> waiters(const std::string& name) = 0;
};

class ClientSession final : public Session {
 public:
  ClientSession(Client client, milliseconds ttl) : client_(std::move(client)) {
    opts_.ttl = ttl;
  }
  Status try_acquire(const std::string& name) override {
    auto l = client_.try_acquire(name, opts_);
    if (!l) return l.error();
    lease_ = std::move(*l);
    return {};
  }
  Status acquire(const std::string& name, milliseconds wait) override {
    auto l = client_.acquire(name, wait, opts_);
    if (!l) return l.error();
    lease_ = std::move(*l);
    return {};
  }
  Status release() override {
    if (!lease_) return Error(Errc::internal, "release without a lease");
    auto r = client_.release(*lease_);
    lease_.reset();
    if (!r) return r.error();
    if (!*r) return Error(Errc::lock_lost, "release: lease was not held");
    return {};
  }
  Result<std::size_t> waiters(const std::string& name) override {
    auto info = client_.describe(name);
    if (!info) return info.error();
    return info->waiters.size();
  }

 private:
  Client client_;
  AcquireOptions opts_;
  std::optional<Lease> lease_;
};

// The baseline: SET NX PX, then Lua compare-and-delete, over hiredis.
constexpr const char* kCompareAndDelete =
    "if redis.call('get', KEYS[1]) == ARGV[1] then "
    "return redis.call('del', KEYS[1]) else return 0 end";

class RedisSession final : public Session {
 public:
  RedisSession(std::unique_ptr<RawConn> conn, milliseconds ttl, bool evalsha,
               std::string sha)
      : conn_(std::move(conn)),
        ttl_(std::to_string(ttl.count())),
        evalsha_(evalsha),
        sha_(std::move(sha)) {}
  Status try_acquire(const std::string& name) override {
    key_ = name;
    token_ = OwnerToken::random().to_string();
    auto r = conn_->call({"SET", key_, token_, "NX", "PX", ttl_});
    if (!r) return r.error();
    if (r->type == REDIS_REPLY_STATUS && r->str == "OK") return {};
    if (r->type == REDIS_REPLY_NIL) {
      return Error(Errc::not_acquired, "SET NX: key exists");
    }
    return Error(Errc::internal, "SET NX: unexpected reply " + r->str);
  }
  Status acquire(const std::string&, milliseconds) override {
    return Error(Errc::invalid_argument,
                 "raw-redis has no blocking acquire (only uncontended)");
  }
  Status release() override {
    auto r = evalsha_
                 ? conn_->call({"EVALSHA", sha_, "1", key_, token_})
                 : conn_->call({"EVAL", kCompareAndDelete, "1", key_, token_});
    if (!r) return r.error();
    if (r->type == REDIS_REPLY_INTEGER && r->integer == 1) return {};
    return Error(Errc::lock_lost,
                 "compare-and-delete: " + (r->type == REDIS_REPLY_INTEGER
                                               ? std::to_string(r->integer)
                                               : r->str));
  }
  Result<std::size_t> waiters(const std::string&) override {
    return Error(Errc::invalid_argument, "raw-redis has no queue");
  }

 private:
  std::unique_ptr<RawConn> conn_;
  std::string ttl_;
  bool evalsha_;
  std::string sha_;
  std::string key_, token_;
};

// batond over the same raw hiredis harness: separates the server's cost
// from baton::Client's.
class RawBatonSession final : public Session {
 public:
  RawBatonSession(std::unique_ptr<RawConn> conn, milliseconds ttl)
      : conn_(std::move(conn)), ttl_(std::to_string(ttl.count())) {}
  Status try_acquire(const std::string& name) override {
    key_ = name;
    token_ = OwnerToken::random().to_string();
    auto r = conn_->call({"LOCK.ACQUIRE", key_, token_, ttl_});
    if (!r) return r.error();
    if (r->type == REDIS_REPLY_ARRAY && !r->elements.empty() &&
        r->elements[0].str == "granted") {
      return {};
    }
    return Error(
        Errc::not_acquired,
        "LOCK.ACQUIRE: " + (r->elements.empty() ? r->str : r->elements[0].str));
  }
  Status acquire(const std::string&, milliseconds) override {
    return Error(Errc::invalid_argument,
                 "raw-baton has no blocking acquire (only uncontended)");
  }
  Status release() override {
    auto r = conn_->call({"LOCK.RELEASE", key_, token_});
    if (!r) return r.error();
    if (r->type == REDIS_REPLY_ARRAY && r->elements.size() >= 2 &&
        r->elements[1].integer == 1) {
      return {};
    }
    return Error(Errc::lock_lost, "LOCK.RELEASE: not held");
  }
  Result<std::size_t> waiters(const std::string&) override {
    return Error(Errc::invalid_argument, "raw-baton: no describe");
  }

 private:
  std::unique_ptr<RawConn> conn_;
  std::string ttl_;
  std::string key_, token_;
};

bool is_raw_redis(std::string_view url) {
  return url.starts_with("raw-redis://");
}
bool is_raw(std::string_view url) {
  return is_raw_redis(url) || url.starts_with("raw-baton://");
}

Result<std::unique_ptr<Session>> open_session(const LoadOptions& o) {
  if (is_raw_redis(o.store)) {
    auto ep = parse_endpoint(o.store);
    if (!ep) return ep.error();
    bool evalsha = false;
    if (!ep->query.empty()) {
      if (ep->query == "script=evalsha") {
        evalsha = true;
      } else if (ep->query != "script=eval") {
        return Error(Errc::invalid_argument,
                     "raw-redis: unknown option " + ep->query);
      }
    }
    auto conn = RawConn::connect(*ep, milliseconds(5000));
    if (!conn) return conn.error();
    std::string sha;
    if (evalsha) {
      auto r = (*conn)->call({"SCRIPT", "LOAD", kCompareAndDelete});
      if (!r) return r.error();
      if (r->type != REDIS_REPLY_STRING) {
        return Error(Errc::internal, "SCRIPT LOAD: " + r->str);
      }
      sha = r->str;
    }
    return std::unique_ptr<Session>(std::make_unique<RedisSession>(
        std::move(*conn), o.ttl, evalsha, std::move(sha)));
  }
  if (o.store.starts_with("raw-baton://")) {
    auto ep = parse_endpoint(o.store);
    if (!ep) return ep.error();
    auto conn = RawConn::connect(*ep, milliseconds(5000));
    if (!conn) return conn.error();
    return std::unique_ptr<Session>(
        std::make_unique<RawBatonSession>(std::move(*conn), o.ttl));
  }
  ClientOptions copts;
  copts.max_retries = 0;  // count failures instead of hiding them
  auto c = Client::open(o.store, copts);
  if (!c) return c.error();
  return std::unique_ptr<Session>(
      std::make_unique<ClientSession>(std::move(*c), o.ttl));
}

std::string default_prefix() { return "bench/" + std::to_string(::getpid()); }

milliseconds left_until(Clock::time_point deadline) {
  auto l = std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
  return l.count() < 0 ? milliseconds(0) : l;
}

// The closed-loop workloads: uncontended, contended, handoff.
Result<LoadResult> run_loop(const LoadOptions& o) {
  const std::string prefix = o.prefix.empty() ? default_prefix() : o.prefix;
  const int n = o.clients;
  const std::int64_t k = o.workload == Workload::contended ? o.locks : 1;

  // Connect every client first (and fail early if the store is down).
  std::vector<std::unique_ptr<Session>> sessions;
  for (int i = 0; i < n; ++i) {
    auto s = open_session(o);
    if (!s) return s.error();
    sessions.push_back(std::move(*s));
  }
  auto lock_name = [&](int client) -> std::string {
    switch (o.workload) {
      case Workload::uncontended:
        return prefix + "/u/" + std::to_string(client);
      case Workload::contended:
        return prefix + "/c/" + std::to_string(client % k);
      default:
        return prefix + "/h/0";
    }
  };
  // Warm-up: one round trip per client so connections exist.
  for (int i = 0; i < n; ++i) {
    if (o.workload == Workload::uncontended) {
      auto s = sessions[i]->try_acquire(lock_name(i));
      if (!s) return s.error();
      if (auto r = sessions[i]->release(); !r) return r.error();
    }
  }

  std::vector<ThreadStats> stats(static_cast<std::size_t>(n));
  // Per lock: steady-clock ns of the last release sent (for handoffs).
  std::vector<std::atomic<std::int64_t>> last_release(
      static_cast<std::size_t>(k));
  for (auto& a : last_release) a.store(0);
  std::latch ready(n + 1);
  Clock::time_point start, deadline;
  std::atomic<bool> go{false};

  auto worker = [&](int id) {
    Session& s = *sessions[static_cast<std::size_t>(id)];
    ThreadStats& st = stats[static_cast<std::size_t>(id)];
    const std::string name = lock_name(id);
    const std::size_t lock = o.workload == Workload::contended
                                 ? static_cast<std::size_t>(id % k)
                                 : 0;
    st.acquire_ns.reserve(1 << 16);
    ready.arrive_and_wait();
    while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
    while (Clock::now() < deadline) {
      auto t0 = Clock::now();
      Status got;
      if (o.workload == Workload::uncontended) {
        got = s.try_acquire(name);
      } else {
        const milliseconds wait = left_until(deadline);
        if (wait.count() <= 0) break;  // a 0 ms wait would be a try
        got = s.acquire(name, wait);
      }
      auto t1 = Clock::now();
      if (!got) {
        const Errc code = got.error().code();
        // A wait that ends with the run (its wait is cut to the deadline).
        if ((code == Errc::timeout || code == Errc::not_acquired) &&
            t1 + milliseconds(50) >= deadline) {
          break;
        }
        st.error(got.error().to_string());
        continue;
      }
      st.acquire_ns.push_back(ns_between(t0, t1));
      if (o.workload != Workload::uncontended) {
        // A handoff: this request was queued before the previous holder
        // released (so it waited for that release).
        std::int64_t rel = last_release[lock].load(std::memory_order_acquire);
        std::int64_t t0n = std::chrono::duration_cast<std::chrono::nanoseconds>(
                               t0.time_since_epoch())
                               .count();
        std::int64_t t1n = std::chrono::duration_cast<std::chrono::nanoseconds>(
                               t1.time_since_epoch())
                               .count();
        if (rel > t0n && t1n >= rel) {
          st.handoff_ns.push_back(static_cast<std::uint64_t>(t1n - rel));
        }
      }
      if (o.workload == Workload::handoff) {
        // Release only once someone is parked behind us, so the measured
        // interval is release -> push to a waiting client.
        bool parked = false;
        while (Clock::now() < deadline) {
          auto w = s.waiters(name);
          if (!w) {
            st.error(w.error().to_string());
            break;
          }
          if (*w > 0) {
            parked = true;
            break;
          }
          std::this_thread::sleep_for(std::chrono::microseconds(20));
        }
        (void)parked;
      }
      if (o.workload != Workload::uncontended) {
        last_release[lock].store(now_ns(), std::memory_order_release);
      }
      if (auto r = s.release(); !r) {
        st.error(r.error().to_string());
        continue;
      }
      ++st.pairs;
    }
  };

  std::vector<std::thread> threads;
  threads.reserve(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) threads.emplace_back(worker, i);
  ready.arrive_and_wait();
  start = Clock::now();
  deadline = start + o.duration;
  go.store(true, std::memory_order_release);
  for (auto& t : threads) t.join();
  auto end = Clock::now();

  LoadResult r;
  r.clients = n;
  r.locks = k;
  r.seconds = std::chrono::duration<double>(end - start).count();
  std::vector<std::uint64_t> acq, hand;
  for (auto& st : stats) {
    r.pairs += st.pairs;
    if (st.errors > 0 && r.errors == 0) r.first_error = st.first_error;
    r.errors += st.errors;
    acq.insert(acq.end(), st.acquire_ns.begin(), st.acquire_ns.end());
    hand.insert(hand.end(), st.handoff_ns.begin(), st.handoff_ns.end());
  }
  r.pairs_per_sec =
      r.seconds > 0 ? static_cast<double>(r.pairs) / r.seconds : 0;
  r.acquire = summarize(&acq);
  r.handoff = summarize(&hand);
  return r;
}

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

std::string fmt(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1f", v);
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
  for (Workload w : {Workload::uncontended, Workload::contended,
                     Workload::handoff, Workload::hold, Workload::waiters}) {
    if (text == workload_name(w)) return w;
  }
  return Error(Errc::invalid_argument,
               "workload must be uncontended, contended, handoff, hold or "
               "waiters, not \"" +
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

Result<LoadResult> run_load(const LoadOptions& o) {
  if (o.clients < 1) {
    return Error(Errc::invalid_argument, "--clients must be at least 1");
  }
  if (o.locks < 1) {
    return Error(Errc::invalid_argument, "--locks must be at least 1");
  }
  if (o.duration.count() < 1) {
    return Error(Errc::invalid_argument, "--duration must be positive");
  }
  if (o.workload == Workload::handoff && o.clients < 2) {
    return Error(Errc::invalid_argument, "handoff needs --clients >= 2");
  }
  if (is_raw(o.store) &&
      (o.workload == Workload::contended || o.workload == Workload::handoff ||
       o.workload == Workload::waiters)) {
    return Error(Errc::invalid_argument,
                 std::string("raw-redis:// and raw-baton:// do not support "
                             "workload ") +
                     workload_name(o.workload));
  }
  Result<LoadResult> r = Error(Errc::internal, "unreachable");
  switch (o.workload) {
    case Workload::hold:
      r = run_hold(o);
      break;
    case Workload::waiters:
      r = run_waiters(o);
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
    << json_escape(r.first_error) << "\"";
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
