// stores/postgres/listener.cc — LISTEN/NOTIFY dispatch to waiting calls.
#include "stores/postgres/listener.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <string_view>

namespace baton::store::pg {

Listener::Listener(Pool& pool, std::string channel)
    : pool_(pool), channel_(std::move(channel)) {
  kick_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  lead_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  thread_ = std::thread([this] { run(); });
}

Listener::~Listener() {
  stop_ = true;
  signal(kick_fd_);
  signal(lead_fd_);
  thread_.join();
  for (int fd : {kick_fd_, lead_fd_}) {
    if (fd >= 0) ::close(fd);
  }
}

void Listener::signal(int fd) {
  if (fd < 0) return;
  const std::uint64_t one = 1;
  (void)!::write(fd, &one, sizeof one);
}

void Listener::drain(int fd) {
  std::uint64_t n = 0;
  if (fd >= 0) (void)!::read(fd, &n, sizeof n);
}

bool Listener::wait_ready(TimePoint deadline) {
  std::unique_lock<std::mutex> lk(mu_);
  return wait_until_steady(ready_cv_, lk, deadline, [&] { return ready_; });
}

Listener::Slot::Slot(Listener& l, const OwnerToken& token)
    : l_(l), token_(token) {
  std::lock_guard<std::mutex> lk(l_.mu_);
  l_.slots_.emplace(token_, this);
}

Listener::Slot::~Slot() {
  std::lock_guard<std::mutex> lk(l_.mu_);
  auto [b, e] = l_.slots_.equal_range(token_);
  for (auto it = b; it != e; ++it) {
    if (it->second == this) {
      l_.slots_.erase(it);
      break;
    }
  }
}

bool Listener::Slot::wait(TimePoint end) {
  std::unique_lock<std::mutex> lk(l_.mu_);
  if (!woken_ && l_.leader_ == nullptr && l_.conn_ && !l_.broken_ &&
      !l_.stop_ && l_.kick_fd_ >= 0 && l_.lead_fd_ >= 0) {
    // Lead: read the connection on this thread while waiting.
    l_.leader_ = this;
    std::shared_ptr<PgConn> conn = l_.conn_;
    lk.unlock();
    signal(l_.kick_fd_);  // run() stops reading while a slot leads
    const bool ok = l_.lead(*conn, *this, end);
    lk.lock();
    l_.leader_ = nullptr;
    if (!ok) l_.broken_ = true;
    lk.unlock();
    signal(l_.kick_fd_);  // run() reads again (or reconnects)
    lk.lock();
  } else {
    wait_until_steady(cv_, lk, end, [&] { return woken_; });
  }
  const bool woken = woken_;
  woken_ = false;
  return woken;
}

void Listener::Slot::wake() {
  std::lock_guard<std::mutex> lk(l_.mu_);
  woken_ = true;
  if (l_.leader_ == this) {
    signal(l_.lead_fd_);
  } else {
    cv_.notify_all();
  }
}

std::optional<Listener::Slot::Granted> Listener::Slot::take_grant() {
  std::lock_guard<std::mutex> lk(l_.mu_);
  std::optional<Granted> g = std::move(granted_);
  granted_.reset();
  return g;
}

namespace {

// "fencing:ttl_ms:expires_us:name" after the token (see _pump).
std::optional<Listener::Slot::Granted> parse_grant(std::string_view p) {
  Listener::Slot::Granted g;
  std::int64_t* fields[] = {&g.fencing, &g.ttl_ms, &g.expires_us};
  for (std::int64_t* f : fields) {
    const std::size_t colon = p.find(':');
    if (colon == std::string_view::npos) return std::nullopt;
    auto [end, ec] = std::from_chars(p.data(), p.data() + colon, *f);
    if (ec != std::errc() || end != p.data() + colon) return std::nullopt;
    p.remove_prefix(colon + 1);
  }
  g.name = std::string(p);
  if (g.fencing <= 0 || g.ttl_ms <= 0 || g.name.empty()) return std::nullopt;
  return g;
}

}  // namespace

void Listener::dispatch(const char* payload, const Slot* reader) {
  const std::string_view p(payload == nullptr ? "" : payload);
  auto token = OwnerToken::parse(p.substr(0, 32));
  if (!token.ok()) return;
  std::optional<Slot::Granted> granted;
  if (p.size() > 33 && p[32] == ':') granted = parse_grant(p.substr(33));
  std::lock_guard<std::mutex> lk(mu_);
  auto [b, e] = slots_.equal_range(*token);
  for (auto it = b; it != e; ++it) {
    Slot* s = it->second;
    s->woken_ = true;
    if (granted) s->granted_ = granted;
    if (s == leader_) {
      if (s != reader) signal(lead_fd_);
    } else {
      s->cv_.notify_all();
    }
  }
}

void Listener::wake_all() {
  for (auto& [token, slot] : slots_) {
    slot->woken_ = true;
    slot->cv_.notify_all();
  }
  if (leader_ != nullptr) signal(lead_fd_);
}

bool Listener::read(PgConn& conn, const Slot* reader) {
  std::lock_guard<std::mutex> rl(read_mu_);
  if (PQconsumeInput(conn.raw()) == 0 ||
      PQstatus(conn.raw()) == CONNECTION_BAD) {
    return false;
  }
  while (PGnotify* note = PQnotifies(conn.raw())) {
    dispatch(note->extra, reader);
    PQfreemem(note);
  }
  return true;
}

bool Listener::lead(PgConn& conn, Slot& s, TimePoint end) {
  for (;;) {
    {
      std::lock_guard<std::mutex> lk(mu_);
      if (s.woken_ || stop_) return true;
    }
    const auto left =
        std::chrono::ceil<milliseconds>(end - Clock::now()).count();
    if (left <= 0) return true;
    // On TLS, decrypted bytes may wait inside OpenSSL where poll(2) cannot
    // see them: read them (non-blocking) before waiting.
    if (PQsslInUse(conn.raw()) != 0) {
      if (!read(conn, &s)) return false;
      std::lock_guard<std::mutex> lk(mu_);
      if (s.woken_) return true;
    }
    pollfd fds[2] = {{PQsocket(conn.raw()), POLLIN, 0}, {lead_fd_, POLLIN, 0}};
    const int n =
        ::poll(fds, 2, static_cast<int>(std::min<long long>(left, 1000)));
    if (n <= 0) continue;
    if (fds[1].revents != 0) drain(lead_fd_);
    if (fds[0].revents != 0 && !read(conn, &s)) return false;
  }
}

void Listener::run() {
  milliseconds backoff{50};
  while (!stop_) {
    std::shared_ptr<PgConn> conn;
    bool led = false;
    {
      std::lock_guard<std::mutex> lk(mu_);
      if (broken_ && leader_ == nullptr) {
        broken_ = false;
        conn_.reset();
        wake_all();  // anything sent meanwhile was missed
      }
      conn = conn_;
      led = leader_ != nullptr;
    }
    if (!conn) {
      auto c = pool_.open_dedicated({Clock::now() + milliseconds{5000}});
      if (c.ok()) {
        auto st = (*c)->exec("LISTEN " + channel_,
                             {Clock::now() + milliseconds{5000}});
        if (st.ok()) {
          backoff = milliseconds{50};
          {
            std::lock_guard<std::mutex> lk(mu_);
            conn_ = std::shared_ptr<PgConn>(std::move(*c));
            ready_ = true;
            wake_all();  // anything sent while we were away was missed
          }
          ready_cv_.notify_all();
          continue;
        }
      }
      pollfd p{kick_fd_, POLLIN, 0};
      (void)::poll(&p, 1, static_cast<int>(backoff.count()));
      drain(kick_fd_);
      backoff = std::min(backoff * 2, milliseconds{2000});
      continue;
    }
    // A waiting call reads the connection: wait until it stops.
    if (led) {
      pollfd p{kick_fd_, POLLIN, 0};
      (void)::poll(&p, 1, 1000);
      drain(kick_fd_);
      continue;
    }
    bool ok = true;
    if (PQsslInUse(conn->raw()) != 0) ok = read(*conn, nullptr);
    if (ok) {
      pollfd fds[2] = {{PQsocket(conn->raw()), POLLIN, 0},
                       {kick_fd_, POLLIN, 0}};
      const int n = ::poll(fds, 2, 1000);
      if (stop_) break;
      if (n > 0 && fds[1].revents != 0) drain(kick_fd_);
      if (n > 0 && fds[0].revents != 0) ok = read(*conn, nullptr);
    }
    if (!ok) {
      std::lock_guard<std::mutex> lk(mu_);
      broken_ = true;  // dropped above once no slot leads
    }
  }
}

}  // namespace baton::store::pg
