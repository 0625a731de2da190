// stores/postgres/listener.cc — LISTEN/NOTIFY dispatch to waiting calls.
#include "stores/postgres/listener.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <string_view>

#include "stores/call_deadline.h"

namespace baton::store::pg {

Listener::Listener(Pool& pool, std::string channel)
    : pool_(pool), channel_(std::move(channel)) {
  if (::pipe(wake_pipe_) == 0) {
    ::fcntl(wake_pipe_[0], F_SETFL, O_NONBLOCK);
    ::fcntl(wake_pipe_[1], F_SETFL, O_NONBLOCK);
  }
  thread_ = std::thread([this] { run(); });
}

Listener::~Listener() {
  stop_ = true;
  if (wake_pipe_[1] >= 0) {
    const char c = 'x';
    (void)!::write(wake_pipe_[1], &c, 1);
  }
  thread_.join();
  for (int fd : wake_pipe_) {
    if (fd >= 0) ::close(fd);
  }
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

bool Listener::Slot::wait(TimePoint until) {
  std::unique_lock<std::mutex> lk(l_.mu_);
  // Never past the call deadline of the acquire waiting here (rule 7).
  wait_until_steady(cv_, lk, cap_to_call_deadline(until),
                    [&] { return woken_; });
  const bool woken = woken_;
  woken_ = false;
  return woken;
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

void Listener::dispatch(const char* payload) {
  const std::string_view p(payload == nullptr ? "" : payload);
  auto token = OwnerToken::parse(p.substr(0, 32));
  if (!token.ok()) return;
  std::optional<Slot::Granted> granted;
  if (p.size() > 33 && p[32] == ':') granted = parse_grant(p.substr(33));
  std::lock_guard<std::mutex> lk(mu_);
  auto [b, e] = slots_.equal_range(*token);
  for (auto it = b; it != e; ++it) {
    it->second->woken_ = true;
    if (granted) it->second->granted_ = granted;
    it->second->cv_.notify_all();
  }
}

void Listener::wake_all() {
  std::lock_guard<std::mutex> lk(mu_);
  for (auto& [token, slot] : slots_) {
    slot->woken_ = true;
    slot->cv_.notify_all();
  }
}

void Listener::run() {
  std::unique_ptr<PgConn> conn;
  milliseconds backoff{50};
  while (!stop_) {
    if (!conn) {
      auto c = pool_.open_dedicated(Clock::now() + milliseconds{5000});
      if (c.ok()) {
        auto st =
            (*c)->exec("LISTEN " + channel_, Clock::now() + milliseconds{5000});
        if (st.ok()) {
          conn = std::move(*c);
          backoff = milliseconds{50};
          {
            std::lock_guard<std::mutex> lk(mu_);
            ready_ = true;
          }
          ready_cv_.notify_all();
          wake_all();  // anything sent while we were away was missed
        }
      }
      if (!conn) {
        pollfd p{wake_pipe_[0], POLLIN, 0};
        (void)::poll(&p, 1, static_cast<int>(backoff.count()));
        backoff = std::min(backoff * 2, milliseconds{2000});
        continue;
      }
    }
    // Reads what arrived and dispatches its notifications; false (and the
    // connection dropped) when it broke.
    auto consume = [&] {
      if (PQconsumeInput(conn->raw()) == 0 ||
          PQstatus(conn->raw()) == CONNECTION_BAD) {
        conn.reset();
        wake_all();
        return false;
      }
      while (PGnotify* note = PQnotifies(conn->raw())) {
        dispatch(note->extra);
        PQfreemem(note);
      }
      return true;
    };
    // On TLS, decrypted bytes may wait inside OpenSSL where poll(2) cannot
    // see them: read them (non-blocking) before waiting.
    if (PQsslInUse(conn->raw()) != 0 && !consume()) continue;
    pollfd fds[2] = {{PQsocket(conn->raw()), POLLIN, 0},
                     {wake_pipe_[0], POLLIN, 0}};
    const int n = ::poll(fds, 2, 1000);
    if (stop_) break;
    if (n <= 0 || (fds[0].revents == 0)) continue;
    consume();
  }
}

}  // namespace baton::store::pg
