#include "bench/raw.h"

#include <hiredis/hiredis.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <thread>

#include "stores/redis/conn.h"

namespace baton::bench {

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

timeval to_timeval(milliseconds d) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(d.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((d.count() % 1000) * 1000);
  return tv;
}

RawReply convert(const redisReply* r) {
  RawReply out;
  out.type = r->type;
  switch (r->type) {
    case REDIS_REPLY_STRING:
    case REDIS_REPLY_STATUS:
    case REDIS_REPLY_ERROR:
      out.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_INTEGER:
      out.integer = r->integer;
      break;
    case REDIS_REPLY_ARRAY:
      out.elements.reserve(r->elements);
      for (std::size_t i = 0; i < r->elements; ++i) {
        out.elements.push_back(convert(r->element[i]));
      }
      break;
    default:
      break;
  }
  return out;
}

bool is_grant(const RawReply& r) {
  return r.type == REDIS_REPLY_ARRAY && !r.elements.empty() &&
         r.elements[0].type == REDIS_REPLY_STRING &&
         r.elements[0].str == "granted";
}

std::string describe_reply(const RawReply& r) {
  if (r.type == REDIS_REPLY_ARRAY && !r.elements.empty()) {
    return "[" + describe_reply(r.elements[0]) + ", ...]";
  }
  if (r.type == REDIS_REPLY_INTEGER) return std::to_string(r.integer);
  if (r.type == REDIS_REPLY_NIL) return "(nil)";
  return r.str;
}

std::string token_for(std::uint64_t hi, std::uint64_t lo) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%016llx%016llx",
                static_cast<unsigned long long>(hi),
                static_cast<unsigned long long>(lo));
  return buf;
}

std::string default_label() {
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0) std::strcpy(host, "host");
  return std::string(host) + ":" + std::to_string(::getpid()) +
         ":baton_lockbench";
}

// Field `key` of INFO text, or -1.
long long info_field(const std::string& info, const std::string& key) {
  std::string k = "\n" + key + ":";
  auto at = info.find(k);
  if (at == std::string::npos) return -1;
  return std::strtoll(info.c_str() + at + k.size(), nullptr, 10);
}

void raise_fd_limit(std::size_t want) {
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) != 0) return;
  if (rl.rlim_cur >= want) return;
  rl.rlim_cur = std::min<rlim_t>(rl.rlim_max, want);
  (void)::setrlimit(RLIMIT_NOFILE, &rl);
}

std::string prefix_of(const LoadOptions& o) {
  return o.prefix.empty() ? "bench/" + std::to_string(::getpid()) : o.prefix;
}

}  // namespace

Result<Endpoint> parse_endpoint(std::string_view url) {
  Endpoint ep;
  auto bad = [&] {
    return Error(Errc::invalid_argument,
                 "expected scheme://host:port in \"" + std::string(url) + "\"");
  };
  auto s = url.find("://");
  if (s == std::string_view::npos) return bad();
  std::string_view rest = url.substr(s + 3);
  if (auto q = rest.find('?'); q != std::string_view::npos) {
    ep.query = std::string(rest.substr(q + 1));
    rest = rest.substr(0, q);
  }
  if (!rest.empty() && rest.back() == '/') rest.remove_suffix(1);
  auto colon = rest.rfind(':');
  if (colon == std::string_view::npos || colon == 0) return bad();
  ep.host = std::string(rest.substr(0, colon));
  std::string port(rest.substr(colon + 1));
  char* end = nullptr;
  long p = std::strtol(port.c_str(), &end, 10);
  if (port.empty() || *end != '\0' || p <= 0 || p > 65535) return bad();
  ep.port = static_cast<int>(p);
  return ep;
}

Result<std::unique_ptr<RawConn>> RawConn::connect(const Endpoint& ep,
                                                  milliseconds timeout) {
  redisContext* c =
      redisConnectWithTimeout(ep.host.c_str(), ep.port, to_timeval(timeout));
  if (c == nullptr) return Error(Errc::unavailable, "out of memory");
  if (c->err) {
    std::string e = c->errstr;
    redisFree(c);
    return Error(Errc::unavailable, "connect " + ep.host + ":" +
                                        std::to_string(ep.port) + ": " + e);
  }
  if (redisSetTimeout(c, to_timeval(timeout)) != REDIS_OK) {
    redisFree(c);
    return Error(Errc::unavailable, "cannot set the socket timeout");
  }
  return std::unique_ptr<RawConn>(new RawConn(c));
}

RawConn::~RawConn() {
  if (abortive_ && c_->fd >= 0) {
    linger l{1, 0};
    ::setsockopt(c_->fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
  }
  redisFree(c_);
}

int RawConn::fd() const { return c_->fd; }

Error RawConn::failure(const char* what) const {
  return Error(Errc::unavailable,
               std::string(what) + ": " + (c_->err ? c_->errstr : "failed"));
}

Status RawConn::append(const std::vector<std::string>& args) {
  store::redis::Argv a(args);
  if (redisAppendCommandArgv(c_, a.count(), a.argv.data(), a.lens.data()) !=
      REDIS_OK) {
    return failure("append");
  }
  return {};
}

Status RawConn::flush() {
  int done = 0;
  while (!done) {
    if (redisBufferWrite(c_, &done) != REDIS_OK) return failure("write");
  }
  return {};
}

Result<RawReply> RawConn::read() {
  void* r = nullptr;
  if (redisGetReply(c_, &r) != REDIS_OK || r == nullptr) {
    return failure("read");
  }
  RawReply out = convert(static_cast<redisReply*>(r));
  freeReplyObject(r);
  return out;
}

Result<RawReply> RawConn::call(const std::vector<std::string>& args) {
  if (auto s = append(args); !s) return s.error();
  return read();
}

Status RawConn::read_some() {
  if (redisBufferRead(c_) != REDIS_OK) return failure("read");
  return {};
}

Result<std::optional<RawReply>> RawConn::take_buffered() {
  void* r = nullptr;
  if (redisGetReplyFromReader(c_, &r) != REDIS_OK) return failure("parse");
  if (r == nullptr) return std::optional<RawReply>();
  RawReply out = convert(static_cast<redisReply*>(r));
  freeReplyObject(r);
  return std::optional<RawReply>(std::move(out));
}

// ---------------------------------------------------------------- hold

Result<LoadResult> run_hold(const LoadOptions& o) {
  auto ep = parse_endpoint(o.store);
  if (!ep) return ep.error();
  const bool redis = o.store.starts_with("raw-redis://");
  if (!redis && !o.store.starts_with("baton://")) {
    return Error(Errc::invalid_argument,
                 "hold needs a baton:// or raw-redis:// store");
  }
  const std::string prefix = prefix_of(o);
  const std::string ttl = std::to_string(o.ttl.count());
  const std::string label = o.no_label ? std::string() : default_label();
  const int nconn = o.clients;
  constexpr std::int64_t kBatch = 1000;

  std::vector<std::unique_ptr<RawConn>> conns;
  for (int i = 0; i < nconn; ++i) {
    auto c = RawConn::connect(*ep, milliseconds(10'000));
    if (!c) return c.error();
    conns.push_back(std::move(*c));
  }
  LoadResult res;
  res.clients = nconn;
  res.locks = o.locks;
  if (o.server_pid > 0) res.rss_before_kb = read_rss_kb(o.server_pid);

  const auto start = Clock::now();
  const auto deadline = start + o.duration;
  std::atomic<std::uint64_t> grants{0}, errors{0};
  std::atomic<bool> incomplete{false};
  std::string first_error;
  std::atomic_flag error_set = ATOMIC_FLAG_INIT;
  auto worker = [&](int t) {
    RawConn& c = *conns[static_cast<std::size_t>(t)];
    auto note = [&](const std::string& e) {
      if (errors.fetch_add(1) == 0 && !error_set.test_and_set()) {
        first_error = e;
      }
    };
    // Locks t, t + nconn, t + 2 nconn, ...
    std::int64_t next = t;
    while (next < o.locks) {
      if (Clock::now() >= deadline) {
        incomplete = true;
        return;
      }
      std::int64_t sent = 0;
      for (; sent < kBatch && next < o.locks; ++sent, next += nconn) {
        std::string name = prefix + "/m/" + std::to_string(next);
        std::string tok =
            token_for(0xba7000000000ull + static_cast<std::uint64_t>(t),
                      static_cast<std::uint64_t>(next));
        Status s;
        if (redis) {
          s = c.append({"SET", name, tok, "NX", "PX", ttl});
        } else if (label.empty()) {
          s = c.append({"LOCK.ACQUIRE", name, tok, ttl});
        } else {
          s = c.append({"LOCK.ACQUIRE", name, tok, ttl, "LABEL", label});
        }
        if (!s) {
          note(s.error().to_string());
          return;
        }
      }
      for (std::int64_t i = 0; i < sent; ++i) {
        auto r = c.read();
        if (!r) {
          note(r.error().to_string());
          return;
        }
        bool ok = redis ? (r->type == REDIS_REPLY_STATUS && r->str == "OK")
                        : is_grant(*r);
        if (ok) {
          grants.fetch_add(1, std::memory_order_relaxed);
        } else {
          note("unexpected reply: " + describe_reply(*r));
        }
      }
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < nconn; ++t) threads.emplace_back(worker, t);
  for (auto& th : threads) th.join();
  const auto end = Clock::now();
  // Let the server settle (batch commit, allocator) before reading RSS.
  std::this_thread::sleep_for(milliseconds(500));
  if (o.server_pid > 0) res.rss_after_kb = read_rss_kb(o.server_pid);

  res.seconds = std::chrono::duration<double>(end - start).count();
  res.pairs = grants.load();
  res.pairs_per_sec = res.seconds > 0 ? res.pairs / res.seconds : 0;
  res.errors = errors.load();
  res.first_error = first_error;
  res.completed =
      !incomplete && res.pairs == static_cast<std::uint64_t>(o.locks);
  if (res.pairs > 0 && res.rss_before_kb >= 0 && res.rss_after_kb >= 0) {
    res.bytes_per_lock =
        static_cast<double>(res.rss_after_kb - res.rss_before_kb) * 1024.0 /
        static_cast<double>(res.pairs);
  }
  return res;
}

// ------------------------------------------------------------- waiters

Result<LoadResult> run_waiters(const LoadOptions& o) {
  auto ep = parse_endpoint(o.store);
  if (!ep) return ep.error();
  if (!o.store.starts_with("baton://")) {
    return Error(Errc::invalid_argument, "waiters needs a baton:// store");
  }
  const int w = o.clients;
  raise_fd_limit(static_cast<std::size_t>(w) + 64);
  const auto start = Clock::now();
  const auto deadline = start + o.duration;
  auto ms_left = [&] {
    auto l = std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
    return l.count() < 1 ? 1LL : static_cast<long long>(l.count());
  };
  const std::string name = prefix_of(o) + "/w/0";
  const std::string ttl = std::to_string(o.ttl.count());
  const milliseconds io_timeout(10'000);

  LoadResult res;
  res.clients = w;
  res.locks = 1;
  auto holder = RawConn::connect(*ep, io_timeout);
  if (!holder) return holder.error();
  auto monitor = RawConn::connect(*ep, io_timeout);
  if (!monitor) return monitor.error();
  const std::string htok = token_for(0xba71, 0);
  {
    auto r = (*holder)->call({"LOCK.ACQUIRE", name, htok, ttl});
    if (!r) return r.error();
    if (!is_grant(*r)) {
      return Error(Errc::internal, "holder not granted: " + describe_reply(*r));
    }
  }

  // Connect the waiters.
  const auto tc0 = Clock::now();
  std::vector<std::unique_ptr<RawConn>> conns;
  conns.reserve(static_cast<std::size_t>(w));
  for (int i = 0; i < w; ++i) {
    if (Clock::now() >= deadline) {
      return Error(Errc::timeout, "deadline reached while connecting " +
                                      std::to_string(i) + " waiters");
    }
    auto c = RawConn::connect(*ep, io_timeout);
    if (!c) {
      return Error(Errc::unavailable,
                   "waiter " + std::to_string(i) + ": " + c.error().message());
    }
    (*c)->set_abortive_close();
    conns.push_back(std::move(*c));
  }
  (*holder)->set_abortive_close();
  (*monitor)->set_abortive_close();
  const auto tc1 = Clock::now();
  res.connect_ms = std::chrono::duration<double, std::milli>(tc1 - tc0).count();

  int ep_fd = ::epoll_create1(EPOLL_CLOEXEC);
  if (ep_fd < 0) return Error(Errc::internal, "epoll_create1 failed");
  struct EpollCloser {
    int fd;
    ~EpollCloser() { ::close(fd); }
  } closer{ep_fd};
  for (int i = 0; i < w; ++i) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u32 = static_cast<std::uint32_t>(i);
    if (::epoll_ctl(ep_fd, EPOLL_CTL_ADD,
                    conns[static_cast<std::size_t>(i)]->fd(), &ev) != 0) {
      return Error(Errc::internal, "epoll_ctl failed");
    }
  }

  // Enqueue: every waiter parks a blocking acquire; done when INFO shows
  // them all queued.
  const auto te0 = Clock::now();
  const std::string wait_ms = std::to_string(ms_left());
  for (int i = 0; i < w; ++i) {
    auto& c = *conns[static_cast<std::size_t>(i)];
    Status s = c.append({"LOCK.ACQUIRE", name,
                         token_for(0xba72, static_cast<std::uint64_t>(i)), ttl,
                         "WAIT", wait_ms, "LABEL", "w" + std::to_string(i)});
    if (s) s = c.flush();
    if (!s) return s.error();
  }
  long long queued = 0;
  for (;;) {
    auto r = (*monitor)->call({"INFO"});
    if (!r) return r.error();
    queued = info_field("\n" + r->str, "waiters");
    if (queued >= w) break;
    if (Clock::now() >= deadline) {
      res.completed = false;
      res.first_error = "deadline reached with " + std::to_string(queued) +
                        " of " + std::to_string(w) + " waiters queued";
      res.errors = 1;
      return res;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(500));
  }
  const auto te1 = Clock::now();
  res.enqueue_ms = std::chrono::duration<double, std::milli>(te1 - te0).count();

  // Drain: release the holder; each waiter releases as soon as granted.
  enum class St : unsigned char { waiting, releasing, done };
  std::vector<St> state(static_cast<std::size_t>(w), St::waiting);
  std::vector<std::uint64_t> hand;
  hand.reserve(static_cast<std::size_t>(w));
  int granted = 0, finished = 0;
  const auto td0 = Clock::now();
  auto last_release = td0;
  auto last_grant = td0;
  {
    auto r = (*holder)->call({"LOCK.RELEASE", name, htok});
    if (!r) return r.error();
  }
  std::vector<epoll_event> events(256);
  auto note = [&](const std::string& e) {
    if (res.errors++ == 0) res.first_error = e;
  };
  while (finished < w && Clock::now() < deadline) {
    int timeout = static_cast<int>(std::min<long long>(ms_left(), 1000));
    int n = ::epoll_wait(ep_fd, events.data(), static_cast<int>(events.size()),
                         timeout);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Error(Errc::internal, "epoll_wait failed");
    }
    for (int e = 0; e < n; ++e) {
      const std::uint32_t i = events[static_cast<std::size_t>(e)].data.u32;
      auto& c = *conns[i];
      if (auto s = c.read_some(); !s) {
        if (state[i] != St::done) {
          note("waiter " + std::to_string(i) + ": " + s.error().message());
          state[i] = St::done;
          ++finished;
        }
        ::epoll_ctl(ep_fd, EPOLL_CTL_DEL, c.fd(), nullptr);
        continue;
      }
      for (;;) {
        auto r = c.take_buffered();
        if (!r) {
          note(r.error().to_string());
          break;
        }
        if (!*r) break;
        if (state[i] == St::waiting) {
          const auto now = Clock::now();
          if (!is_grant(**r)) {
            note("waiter " + std::to_string(i) + ": " + describe_reply(**r));
            state[i] = St::done;
            ++finished;
            continue;
          }
          hand.push_back(static_cast<std::uint64_t>(
              std::chrono::duration_cast<std::chrono::nanoseconds>(now -
                                                                   last_release)
                  .count()));
          ++granted;
          last_grant = now;
          state[i] = St::releasing;
          last_release = Clock::now();
          Status s =
              c.append({"LOCK.RELEASE", name,
                        token_for(0xba72, static_cast<std::uint64_t>(i))});
          if (s) s = c.flush();
          if (!s) note(s.error().to_string());
        } else if (state[i] == St::releasing) {
          state[i] = St::done;
          ++finished;
          if ((*r)->type != REDIS_REPLY_ARRAY || (*r)->elements.size() < 2 ||
              (*r)->elements[1].integer != 1) {
            note("release: " + describe_reply(**r));
          }
        }
      }
    }
  }
  res.drain_ms =
      std::chrono::duration<double, std::milli>(last_grant - td0).count();
  res.seconds = std::chrono::duration<double>(last_grant - td0).count();
  res.pairs = static_cast<std::uint64_t>(granted);
  res.pairs_per_sec = res.seconds > 0 ? granted / res.seconds : 0;
  res.handoff = summarize(&hand);
  res.completed = granted == w;
  if (!res.completed && res.first_error.empty()) {
    res.first_error = "deadline reached after " + std::to_string(granted) +
                      " of " + std::to_string(w) + " grants";
  }
  return res;
}

}  // namespace baton::bench
