#include "stores/baton/baton_store.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <thread>

#include "proto/commands.h"
#include "proto/resp.h"
#include "stores/call_deadline.h"
#include "stores/tls/tls_client.h"

namespace baton::store {

using tls::TlsChannel;
using tls::TlsContext;
using tls::TlsOptions;

namespace {

using Clock = std::chrono::steady_clock;
using proto::Reply;

Error unavailable(const std::string& what) {
  return Error(Errc::unavailable, what);
}

// One RESP connection to batond (plain, or TLS when tls is set).
class Conn {
 public:
  ~Conn() {
    if (fd_ >= 0) ::close(fd_);
  }
  static Result<std::unique_ptr<Conn>> connect(
      const std::string& host, std::uint16_t port, Clock::time_point deadline,
      const std::shared_ptr<TlsContext>& tls) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    std::string ps = std::to_string(port);
    if (int rc = ::getaddrinfo(host.c_str(), ps.c_str(), &hints, &res);
        rc != 0) {
      return unavailable("batond " + host + ":" + ps + ": " + gai_strerror(rc));
    }
    std::string last = "no address";
    for (addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
      int fd = ::socket(ai->ai_family,
                        ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
      if (fd < 0) continue;
      int rc = ::connect(fd, ai->ai_addr, ai->ai_addrlen);
      if (rc != 0 && errno == EINPROGRESS) {
        pollfd p{fd, POLLOUT, 0};
        int ms = ms_left(deadline);
        rc = ::poll(&p, 1, ms) == 1 ? 0 : -1;
        int err = 0;
        socklen_t len = sizeof err;
        if (rc == 0) ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
        if (rc != 0) err = ETIMEDOUT;
        if (err != 0) {
          errno = err;
          rc = -1;
        }
      }
      if (rc == 0) {
        int one = 1;
        ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        ::freeaddrinfo(res);
        auto c = std::make_unique<Conn>();
        c->fd_ = fd;
        if (tls) {
          // Stays non-blocking: OpenSSL driven by poll (tls_client.h).
          tls::TlsPeer peer;
          peer.host = host;
          peer.where = "batond at " + host + ":" + std::to_string(port);
          peer.plain_port_hint =
              " (the server did not answer with TLS: is this batond's "
              "plain-text port?)";
          auto t = TlsChannel::handshake(tls, fd, std::move(peer), deadline);
          if (!t) return t.error();
          c->tls_ = std::move(*t);
          return c;
        }
        // Blocking from here on, bounded by SO_RCVTIMEO/SO_SNDTIMEO: a call
        // is then one send and one recv (no poll before each).
        ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
        return c;
      }
      last = std::strerror(errno);
      ::close(fd);
    }
    ::freeaddrinfo(res);
    return unavailable("cannot connect to batond at " + host + ":" + ps + ": " +
                       last);
  }

  Result<Reply> call(const std::vector<std::string>& args,
                     Clock::time_point deadline) {
    out_.clear();
    proto::RespWriter w(out_);
    w.array(args.size());
    for (const auto& a : args) w.bulk(a);
    std::string_view rest(out_);
    if (tls_) {
      if (Status s = tls_->write_all(rest, deadline); !s.ok()) {
        return io_error(s.error().message());
      }
      rest = {};
    }
    while (!rest.empty()) {
      if (!set_timeout(deadline)) return io_error("send timed out");
      ssize_t n = ::send(fd_, rest.data(), rest.size(), MSG_NOSIGNAL);
      if (n > 0) {
        rest.remove_prefix(static_cast<std::size_t>(n));
        continue;
      }
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        continue;  // timed out (re-checked above) or interrupted
      return io_error(std::string("send: ") + std::strerror(errno));
    }
    for (;;) {
      Reply r;
      auto got = parser_.next(&r);
      if (!got) return malformed(got.error());
      if (*got) {
        last_used_ = Clock::now();
        return r;
      }
      char buf[16384];
      ssize_t n = 0;
      if (tls_) {
        auto got_tls = tls_->read_some(buf, sizeof buf, deadline);
        if (!got_tls) return io_error(got_tls.error().message());
        n = static_cast<ssize_t>(*got_tls);
      } else {
        if (!set_timeout(deadline)) {
          return io_error("no reply from batond within the timeout");
        }
        n = ::recv(fd_, buf, sizeof buf, 0);
      }
      if (n == 0) return io_error("batond closed the connection");
      if (n > 0 && first_reply_ && !tls_ &&
          (static_cast<unsigned char>(buf[0]) == 0x15 ||
           static_cast<unsigned char>(buf[0]) == 0x16)) {
        return io_error(
            "batond answered with TLS: this is its TLS port (tls_listen); "
            "connect with batons://");
      }
      if (n > 0) first_reply_ = false;
      if (n < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) continue;
        return io_error(std::string("recv: ") + std::strerror(errno));
      }
      if (Status s = parser_.feed(buf, static_cast<std::size_t>(n)); !s.ok()) {
        return malformed(s.error());
      }
    }
  }

  // False if the peer closed or sent something while idle. A connection
  // that answered within the last few milliseconds is taken as healthy
  // without asking the kernel (one poll saved per call under load).
  bool healthy() const {
    if (broken_) return false;
    if (tls_ && tls_->has_pending()) return false;
    if (Clock::now() - last_used_ < std::chrono::milliseconds(10)) return true;
    pollfd p{fd_, POLLIN, 0};
    return ::poll(&p, 1, 0) == 0;
  }
  bool broken() const { return broken_; }

 private:
  static int ms_left(Clock::time_point deadline) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - Clock::now());
    if (left.count() <= 0) return 0;
    return left.count() > 2'000'000'000 ? 2'000'000'000
                                        : static_cast<int>(left.count()) + 1;
  }
  Error io_error(std::string what) {
    broken_ = true;
    return unavailable(std::move(what));
  }
  Error malformed(const Error& e) {
    broken_ = true;
    return unavailable("batond sent a bad reply: " + e.message());
  }
  // Sets SO_RCVTIMEO/SO_SNDTIMEO to the time left before `deadline`; false
  // if none is left. Skips the syscalls when the timeout already set is at
  // most the time left and not much shorter (it never overshoots).
  bool set_timeout(Clock::time_point deadline) {
    auto left = std::chrono::duration_cast<std::chrono::microseconds>(
                    deadline - Clock::now())
                    .count();
    if (left <= 0) return false;
    if (timeout_us_ > 0 && timeout_us_ <= left && timeout_us_ * 5 >= left * 4) {
      return true;
    }
    // 90% of what is left, so the next calls (with about the same time
    // left) find it acceptable; a recv that times out early loops here.
    std::int64_t us = std::max<std::int64_t>(1, left / 10 * 9);
    timeval tv{static_cast<time_t>(us / 1'000'000),
               static_cast<suseconds_t>(us % 1'000'000)};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    timeout_us_ = us;
    return true;
  }

  int fd_ = -1;
  std::unique_ptr<TlsChannel> tls_;  // batons:// (uses fd_, not owning)
  bool first_reply_ = true;          // nothing received yet
  bool broken_ = false;
  std::int64_t timeout_us_ = 0;  // SO_RCVTIMEO/SO_SNDTIMEO now set
  Clock::time_point last_used_{};
  std::string out_;  // request being sent (capacity reused)
  proto::ReplyParser parser_;
};

// An older batond's refusal of the BRIEF option (an unknown option).
bool refuses_brief(const proto::Reply& r) {
  return r.type == proto::Reply::Type::error &&
         r.str.find("option \"BRIEF\"") != std::string::npos;
}

class BatonStore final : public Store {
 public:
  BatonStore(core::Url url, std::string password,
             std::chrono::milliseconds timeout, std::size_t pool,
             std::shared_ptr<TlsContext> tls)
      : url_(std::move(url)),
        password_(std::move(password)),
        timeout_(timeout),
        pool_max_(pool),
        tls_(std::move(tls)) {}

  Result<Grant> acquire(const AcquireSpec& s, milliseconds wait) override {
    std::vector<std::string> a = {"LOCK.ACQUIRE", s.name, s.token.to_string(),
                                  std::to_string(s.ttl.count())};
    if (wait.count() > 0) {
      a.push_back("WAIT");
      a.push_back(std::to_string(wait.count()));
    }
    if (s.capacity != 1) {
      a.push_back("CAPACITY");
      a.push_back(std::to_string(s.capacity));
    }
    if (!s.label.empty()) {
      a.push_back("LABEL");
      a.push_back(s.label);
    }
    if (!s.reentrancy_key.empty()) {
      a.push_back("REENTRANT");
      a.push_back(s.reentrancy_key);
    }
    if (s.shared) a.push_back("SHARED");
    // BRIEF: a grant of the lease asked for comes back as its four unknown
    // fields (docs/protocol.md). A batond older than BRIEF refuses the
    // option by name and changes nothing: ask again without it, and no
    // more on this store.
    const bool brief = brief_.load(std::memory_order_relaxed);
    if (brief) a.push_back("BRIEF");
    auto r = call(a, wait);
    if (!r) return r.error();
    if (brief && refuses_brief(*r)) {
      brief_.store(false, std::memory_order_relaxed);
      a.pop_back();
      r = call(a, wait);
      if (!r) return r.error();
    }
    core::Grant asked;
    asked.name = s.name;
    asked.token = s.token;
    asked.ttl = s.ttl;
    asked.capacity = s.capacity;
    asked.shared = s.shared;
    return proto::read_grant(*r, asked);
  }

  Result<Grant> extend(std::string_view name, const OwnerToken& token,
                       milliseconds ttl) override {
    auto r = call({"LOCK.EXTEND", std::string(name), token.to_string(),
                   std::to_string(ttl.count())});
    if (!r) return r.error();
    return proto::read_grant(*r);
  }

  Result<ReleaseResult> release(std::string_view name,
                                const OwnerToken& token) override {
    auto r = call({"LOCK.RELEASE", std::string(name), token.to_string()});
    if (!r) return r.error();
    return proto::read_release(*r);
  }

  Result<LockInfo> describe(std::string_view name) override {
    auto r = call({"LOCK.DESCRIBE", std::string(name)});
    if (!r) return r.error();
    return proto::read_lock_info(*r);
  }

  Result<std::vector<LockInfo>> list(std::string_view prefix,
                                     std::size_t limit) override {
    auto r = call({"LOCK.LIST", std::string(prefix), std::to_string(limit)});
    if (!r) return r.error();
    return proto::read_lock_infos(*r);
  }

  Result<std::vector<Grant>> acquire_multi(const MultiSpec& s,
                                           milliseconds wait) override {
    std::vector<std::string> a = {
        s.all_or_nothing ? "LOCK.ACQUIRE_ALL" : "LOCK.ACQUIRE_SOME",
        s.reservation.to_string(),
        std::to_string(s.ttl.count()),
        std::to_string(wait.count()),
        std::to_string(s.capacity),
        s.label};
    a.insert(a.end(), s.names.begin(), s.names.end());
    auto r = call(a, wait);
    if (!r) return r.error();
    return proto::read_grants(*r);
  }

  Result<std::int64_t> counter_get(std::string_view name) override {
    return int_call({"COUNTER.GET", std::string(name)});
  }
  Result<std::int64_t> counter_add(std::string_view name,
                                   std::int64_t delta) override {
    return int_call({"COUNTER.ADD", std::string(name), std::to_string(delta)});
  }
  Result<std::int64_t> counter_take(std::string_view name,
                                    std::int64_t n) override {
    return int_call({"COUNTER.TAKE", std::string(name), std::to_string(n)});
  }

  bool supports_shared() const override { return true; }
  std::string safe_url() const override { return url_.safe(); }

 private:
  Result<std::int64_t> int_call(const std::vector<std::string>& a) {
    auto r = call(a);
    if (!r) return r.error();
    return proto::read_integer(*r);
  }

  Result<Reply> call(const std::vector<std::string>& args,
                     milliseconds wait = milliseconds(0)) {
    const auto own = Clock::now() + timeout_ + wait;
    const auto deadline = store::cap_to_call_deadline(own);
    auto c = take(deadline);
    if (!c) return past_call_deadline(c.error(), deadline, own);
    auto r = (*c)->call(args, deadline);
    if (!r) return past_call_deadline(r.error(), deadline, own);
    if ((*c)->broken()) return r;
    give_back(std::move(*c));
    return r;
  }

  // An I/O failure because the caller's call deadline passed (rule 7) is a
  // timeout, not an unavailable store; the connection is already dropped.
  static Error past_call_deadline(Error e, Clock::time_point deadline,
                                  Clock::time_point own) {
    if (deadline < own && Clock::now() >= deadline &&
        e.code() == Errc::unavailable) {
      return Error(Errc::timeout, e.message());
    }
    return e;
  }

  Result<std::unique_ptr<Conn>> take(Clock::time_point deadline) {
    {
      std::lock_guard<std::mutex> g(mu_);
      while (!idle_.empty()) {
        auto c = std::move(idle_.back());
        idle_.pop_back();
        if (c->healthy()) return c;
      }
    }
    // Back off after recent connect failures (never beyond the deadline).
    Clock::time_point not_before;
    {
      std::lock_guard<std::mutex> g(mu_);
      not_before = next_connect_;
    }
    if (not_before > Clock::now()) {
      std::this_thread::sleep_until(std::min(not_before, deadline));
    }
    const auto& hp = url_.hosts.front();
    auto c = Conn::connect(hp.host, hp.port,
                           std::min(deadline, Clock::now() + timeout_), tls_);
    if (!c) {
      std::lock_guard<std::mutex> g(mu_);
      backoff_ = backoff_.count() == 0
                     ? milliseconds(50)
                     : std::min(backoff_ * 2, milliseconds(1000));
      next_connect_ = Clock::now() + backoff_;
      return c.error();
    }
    {
      std::lock_guard<std::mutex> g(mu_);
      backoff_ = milliseconds(0);
    }
    if (!password_.empty()) {
      // baton://user:pass@host: AUTH user pass (batond's users).
      auto r = url_.user.empty()
                   ? (*c)->call({"AUTH", password_}, deadline)
                   : (*c)->call({"AUTH", url_.user, password_}, deadline);
      if (!r) return r.error();
      if (proto::is_failure(*r)) {
        Error e = proto::error_from_reply(*r);
        if (e.code() == Errc::unavailable) return e;  // e.g. the wrong port
        return Error(Errc::permission_denied,
                     "batond refused the password for " + url_.safe() + ": " +
                         e.message());
      }
    }
    return c;
  }

  void give_back(std::unique_ptr<Conn> c) {
    std::lock_guard<std::mutex> g(mu_);
    if (idle_.size() < pool_max_) idle_.push_back(std::move(c));
  }

  const core::Url url_;
  const std::string password_;
  const std::chrono::milliseconds timeout_;
  const std::size_t pool_max_;
  std::atomic<bool> brief_{true};  // the server takes LOCK.ACQUIRE … BRIEF
  const std::shared_ptr<TlsContext> tls_;  // batons:// only
  std::mutex mu_;
  std::vector<std::unique_ptr<Conn>> idle_;
  milliseconds backoff_{0};
  Clock::time_point next_connect_{};
};

}  // namespace

Result<std::unique_ptr<Store>> open_baton_store(const core::Url& url) {
  if (url.hosts.size() != 1) {
    return Error(
        Errc::invalid_argument,
        "store URL " + url.safe() + " must name exactly one host:port");
  }
  std::string password = url.password;
  std::chrono::milliseconds timeout{5000};
  std::size_t pool = 32;  // idle connections kept for reuse
  const bool use_tls = url.scheme == "batons";
  TlsOptions tls_options;
  for (const auto& [k, v] : url.query) {
    if (k == "password") {
      password = v;
    } else if (use_tls && (k == "ca" || k == "cert" || k == "key")) {
      if (v.empty()) {
        return Error(Errc::invalid_argument,
                     "store URL " + url.safe() + ": " + k + " is empty");
      }
      (k == "ca"     ? tls_options.ca
       : k == "cert" ? tls_options.cert
                     : tls_options.key) = v;
    } else if (k == "timeout_ms" || k == "pool") {
      std::int64_t n = 0;
      try {
        n = std::stoll(v);
      } catch (...) {
        n = -1;
      }
      if (n <= 0) {
        return Error(Errc::invalid_argument, "store URL " + url.safe() + ": " +
                                                 k +
                                                 " must be a positive integer");
      }
      if (k == "pool") {
        pool = static_cast<std::size_t>(n);
      } else {
        timeout = std::chrono::milliseconds(n);
      }
    } else {
      const bool tls_key = k == "ca" || k == "cert" || k == "key";
      return Error(Errc::invalid_argument,
                   "store URL " + url.safe() + ": unknown option \"" + k +
                       "\"" + (tls_key ? " (TLS options need batons://)" : ""));
    }
  }
  std::shared_ptr<TlsContext> tls;
  if (use_tls) {
    auto t = TlsContext::create(tls_options);
    if (!t) {
      return Error(Errc::invalid_argument,
                   "store URL " + url.safe() + ": " + t.error().message());
    }
    tls = std::move(*t);
  }
  return std::unique_ptr<Store>(
      std::make_unique<BatonStore>(url, password, timeout, pool, tls));
}

}  // namespace baton::store
