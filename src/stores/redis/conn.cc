// stores/redis/conn.cc — hiredis pool, notifier and per-lock subscriber.
#include "stores/redis/conn.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

namespace baton::store::redis {
namespace {

using Steady = std::chrono::steady_clock;

// The I/O limit of the next step: the target's timeout, capped by the
// call context's deadline (rule 7). *capped: the deadline is the nearer
// limit. 0 ms: the deadline has passed.
milliseconds io_timeout(const Target& t, const CallContext& ctx, bool* capped) {
  *capped = false;
  const milliseconds left = ctx.left();
  if (left >= t.timeout) return t.timeout;
  *capped = true;
  return left;
}

Error deadline_passed(const Target& t, const std::string& what) {
  return Error(Errc::timeout, t.where() + ": " + what +
                                  " (the caller's wait ended: call deadline)");
}

timeval to_timeval(milliseconds ms) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(ms.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((ms.count() % 1000) * 1000);
  return tv;
}

Error unavailable(const Target& t, const std::string& what) {
  return Error(Errc::unavailable, t.where() + ": " + what);
}

bool starts_with(const char* s, std::size_t len, const char* prefix) {
  const std::size_t n = std::strlen(prefix);
  return len >= n && std::memcmp(s, prefix, n) == 0;
}

// A Redis error reply as a baton error.
Error from_error_reply(const Target& t, const redisReply* r) {
  std::string msg(r->str, r->len);
  if (starts_with(r->str, r->len, "NOAUTH") ||
      starts_with(r->str, r->len, "WRONGPASS") ||
      starts_with(r->str, r->len, "NOPERM")) {
    return Error(Errc::permission_denied, t.where() + ": " + msg);
  }
  // A script run by a user whose ACL does not cover a key, channel or
  // command it touches (Redis 7 reports it as ERR).
  if (starts_with(r->str, r->len, "ERR The user executing the script can't")) {
    return Error(Errc::permission_denied,
                 t.where() + ": " + msg +
                     " (the store's user needs ~<prefix>* &<prefix>* and "
                     "the commands of docs/stores/redis.md, Security)");
  }
  if (starts_with(r->str, r->len, "LOADING") ||
      starts_with(r->str, r->len, "BUSY") ||
      starts_with(r->str, r->len, "READONLY") ||
      starts_with(r->str, r->len, "MASTERDOWN") ||
      starts_with(r->str, r->len, "TRYAGAIN")) {
    return unavailable(t, msg);
  }
  return Error(Errc::internal, t.where() + ": " + msg);
}

}  // namespace

Result<ConnPtr> connect(const Target& t, const CallContext& ctx) {
  bool capped = false;
  const milliseconds limit = io_timeout(t, ctx, &capped);
  if (limit <= milliseconds(0)) return deadline_passed(t, "no connection");
  ContextPtr rc(
      redisConnectWithTimeout(t.host.c_str(), t.port, to_timeval(limit)));
  if (!rc) return unavailable(t, "cannot allocate a connection");
  if (rc->err != 0) {
    if (capped && ctx.expired()) {
      return deadline_passed(t, std::string("no connection: ") + rc->errstr);
    }
    return unavailable(t, rc->errstr);
  }
  if (redisSetTimeout(rc.get(), to_timeval(t.timeout)) != REDIS_OK) {
    return unavailable(t, "cannot set the socket timeout");
  }
  auto conn = std::make_unique<Conn>();
  conn->ctx = std::move(rc);
  if (t.tls) {
    // The handshake gets its own I/O timeout, capped by the call deadline.
    const milliseconds hs = io_timeout(t, ctx, &capped);
    if (hs <= milliseconds(0)) return deadline_passed(t, "no TLS handshake");
    tls::TlsPeer peer;
    peer.host = t.host;  // where: the error is prefixed with t.where()
    peer.plain_port_hint =
        " (the server did not answer with TLS: is this a plain-text port? "
        "use redis:// for it)";
    peer.timeout_hint =
        " (no TLS answer in time: a slow server or network, or a "
        "plain-text port? use redis:// for that)";
    peer.client_cert_hint =
        " (the server requires a client certificate: give cert= and key=)";
    auto s = TlsSession::handshake(t.tls, conn->fd(), std::move(peer),
                                   Steady::now() + hs);
    if (!s.ok()) {
      if (capped && ctx.expired()) {
        return deadline_passed(t, s.error().message());
      }
      return unavailable(t, s.error().message());
    }
    conn->tls = std::move(*s);
  }
  if (!t.password.empty()) {
    std::vector<std::string> auth = {"AUTH"};
    if (!t.user.empty()) auth.push_back(t.user);
    auth.push_back(t.password);
    auto r = command(conn.get(), t, auth, ctx);
    if (!r.ok()) return std::move(r).error();
    if ((*r)->type == REDIS_REPLY_ERROR) {
      return Error(Errc::permission_denied,
                   t.where() + ": authentication failed: " +
                       std::string((*r)->str, (*r)->len));
    }
  }
  if (t.db != 0) {
    auto r = command(conn.get(), t, {"SELECT", std::to_string(t.db)}, ctx);
    if (!r.ok()) return std::move(r).error();
    if ((*r)->type == REDIS_REPLY_ERROR) {
      return Error(Errc::invalid_argument,
                   t.where() + ": cannot select database " +
                       std::to_string(t.db) + ": " +
                       std::string((*r)->str, (*r)->len));
    }
  }
  return conn;
}

Result<ReplyPtr> command(Conn* conn, const Target& t,
                         const std::vector<std::string>& args,
                         const CallContext& cc) {
  redisContext* ctx = conn->get();
  Argv a(args);
  // Rule 7: never wait for a reply past the call deadline. The reply is
  // awaited with poll(), whose timeout the kernel keeps to the millisecond;
  // the socket's SO_RCVTIMEO (hiredis's blocking read) is rounded to
  // scheduler ticks and overshot a 349 ms limit by 30 ms and more on a
  // loaded machine. A command that timed out leaves its reply outstanding,
  // so the caller drops the connection (every error here does).
  bool capped = false;
  const milliseconds limit = io_timeout(t, cc, &capped);
  if (limit <= milliseconds(0)) {
    return deadline_passed(t, "no time left to send the command");
  }
  // Capped: up to the call deadline itself, so that a timeout here is seen
  // as the call deadline passing (a blocking acquire answers `timeout`).
  const auto until = Steady::now() + limit;
  if (redisAppendCommandArgv(ctx, a.count(), a.argv.data(), a.lens.data()) !=
      REDIS_OK) {
    return unavailable(t, ctx->errstr);
  }
  std::string why;
  if (!flush(conn, until, &why)) {
    if (capped && cc.expired()) {
      return deadline_passed(t, "cannot send the command: " + why);
    }
    new_connection_hint(conn, &why);
    return unavailable(t, why);
  }
  for (;;) {
    void* raw = nullptr;
    if (redisGetReplyFromReader(ctx, &raw) != REDIS_OK) {
      return unavailable(t, ctx->errstr);
    }
    if (raw != nullptr) {
      conn->replied = true;
      return ReplyPtr(static_cast<redisReply*>(raw));
    }
    if (conn->tls && conn->tls->has_pending()) {  // poll(2) cannot see it
      if (!read_in(conn, &why)) return unavailable(t, why);
      continue;
    }
    const auto left = std::chrono::ceil<milliseconds>(until - Steady::now());
    if (left <= milliseconds(0)) {
      const std::string late =
          "no reply within " + std::to_string(limit.count()) + "ms";
      return capped ? deadline_passed(t, late) : unavailable(t, late);
    }
    pollfd p{conn->fd(), POLLIN, 0};
    const int rc = ::poll(&p, 1, static_cast<int>(left.count()));
    if (rc < 0 && errno != EINTR) return unavailable(t, std::strerror(errno));
    if (rc <= 0) continue;  // timed out or interrupted: the loop decides
    if (!read_in(conn, &why)) {
      new_connection_hint(conn, &why);
      return unavailable(t, why);
    }
  }
}

Result<ConnPtr> Pool::take(bool* reused, bool probe, const CallContext& ctx) {
  for (;;) {
    ConnPtr c;
    {
      std::lock_guard<std::mutex> lk(mu_);
      if (idle_.empty()) break;
      c = std::move(idle_.back());
      idle_.pop_back();
    }
    // An idle connection has nothing to read: readable means the server
    // closed it (restart, idle timeout). Checked before a script that must
    // not be re-run, so a stale connection costs no unknown outcome.
    if (probe && !idle_ok(c.get())) continue;  // dropped
    *reused = true;
    return c;
  }
  *reused = false;
  auto c = connect(target_, ctx);
  if (c.ok() && target_.restart_guard > milliseconds::zero()) {
    if (Status st = note_birth(c->get(), ctx); !st.ok()) return st.error();
  }
  return c;
}

Status Pool::note_birth(Conn* conn, const CallContext& ctx) {
  Result<ReplyPtr> r = Error(Errc::internal, "");
  if (use_functions_.load(std::memory_order_relaxed)) {
    bool fallback = false;
    r = fcall(conn, scripts().born, {target_.prefix}, &fallback, ctx);
    if (fallback) use_functions_ = false;
  }
  if (!use_functions_.load(std::memory_order_relaxed)) {
    r = command(conn, target_,
                {"EVAL", scripts().born.text, "0", target_.prefix}, ctx);
  }
  if (!r.ok()) return std::move(r).error();
  const redisReply* x = r->get();
  if (x->type == REDIS_REPLY_ERROR) return from_error_reply(target_, x);
  auto num = [&](std::size_t i) -> std::optional<std::int64_t> {
    if (x->type != REDIS_REPLY_ARRAY || x->elements != 2 ||
        x->element[i]->type != REDIS_REPLY_STRING) {
      return std::nullopt;
    }
    char* end = nullptr;
    const std::string s(x->element[i]->str, x->element[i]->len);
    const long long v = std::strtoll(s.c_str(), &end, 10);
    if (end == s.c_str() || *end != '\0') return std::nullopt;
    return v;
  };
  const auto now = num(0), born = num(1);
  if (!now || !born) {
    return Error(Errc::internal,
                 target_.where() + ": unexpected reply to the born script");
  }
  // The data's age on the server's clock, at the script; the reply came
  // later, so counting the guard from here is on the safe side.
  const microseconds age(std::max<std::int64_t>(0, *now - *born));
  if (age >= target_.restart_guard) return Status();
  const Steady::time_point from = Steady::now() + target_.restart_guard - age;
  auto seen = votes_from_.load();
  while (seen < from && !votes_from_.compare_exchange_weak(seen, from)) {
  }
  return Status();
}

void Pool::give(ConnPtr ctx) {
  std::lock_guard<std::mutex> lk(mu_);
  if (idle_.size() < max_idle_) idle_.push_back(std::move(ctx));
}

Result<ReplyPtr> Pool::eval(const Script& script,
                            const std::vector<std::string>& args,
                            const CallContext& ctx) {
  if (ctx.expired()) {
    return Error(Errc::timeout,
                 target_.where() +
                     ": not sent (the caller's wait ended: call deadline)");
  }
  bool reused = false;
  auto r = eval_once(script, args, &reused, ctx);
  if (r.ok() || r.error().code() != Errc::unavailable) return r;
  // A pooled connection the server closed meanwhile (restart, idle
  // timeout): lock scripts are idempotent by owner token, so they run once
  // more on a fresh connection; a timeout is not retried (no double wait).
  // A counter change is never re-run: the server may have applied it
  // before the connection broke, so its outcome is unknown.
  if (!script.idempotent) {
    return Error(Errc::unavailable,
                 r.error().message() + " (" + script.name +
                     " is not re-run: if the server received it, it may "
                     "have been applied; the outcome is unknown)");
  }
  if (reused &&
      r.error().message().find("no reply within") == std::string::npos) {
    r = eval_once(script, args, &reused, ctx);
  }
  return r;
}

Result<ReplyPtr> Pool::read(const std::vector<std::string>& args,
                            const CallContext& ctx) {
  for (int attempt = 0;; ++attempt) {
    bool reused = false;
    auto conn = take(&reused, false, ctx);
    if (!conn.ok()) return std::move(conn).error();
    auto r = command(conn->get(), target_, args, ctx);
    if (r.ok()) {
      give(std::move(*conn));
      if ((*r)->type == REDIS_REPLY_ERROR) {
        return from_error_reply(target_, r->get());
      }
      return r;
    }
    if (attempt > 0 || !reused || r.error().code() != Errc::unavailable ||
        r.error().message().find("no reply within") != std::string::npos) {
      return r;
    }
  }
}

Result<ReplyPtr> Pool::eval_once(const Script& script,
                                 const std::vector<std::string>& args,
                                 bool* reused, const CallContext& cc) {
  auto ctx = take(reused, !script.idempotent, cc);
  if (!ctx.ok()) return std::move(ctx).error();
  if (use_functions_.load(std::memory_order_relaxed)) {
    bool fallback = false;
    auto r = fcall(ctx->get(), script, args, &fallback, cc);
    if (!fallback) {
      if (!r.ok()) return std::move(r).error();  // the context is dropped
      give(std::move(*ctx));
      if ((*r)->type == REDIS_REPLY_ERROR) {
        return from_error_reply(target_, r->get());
      }
      return r;
    }
    use_functions_ = false;
  }
  std::string sha;
  {
    std::lock_guard<std::mutex> lk(mu_);
    auto it = sha_.find(script.name);
    if (it != sha_.end()) sha = it->second;
  }
  if (sha.empty()) {
    auto r = command(ctx->get(), target_, {"SCRIPT", "LOAD", script.text}, cc);
    if (!r.ok()) return std::move(r).error();
    if ((*r)->type != REDIS_REPLY_STRING) {
      if ((*r)->type == REDIS_REPLY_ERROR) {
        return from_error_reply(target_, r->get());
      }
      return Error(Errc::internal, target_.where() + ": SCRIPT LOAD failed");
    }
    sha.assign((*r)->str, (*r)->len);
    std::lock_guard<std::mutex> lk(mu_);
    sha_[script.name] = sha;
  }
  std::vector<std::string> cmd = {"EVALSHA", sha, "0"};
  cmd.insert(cmd.end(), args.begin(), args.end());
  auto r = command(ctx->get(), target_, cmd, cc);
  if (!r.ok()) return std::move(r).error();  // the context is dropped
  if ((*r)->type == REDIS_REPLY_ERROR &&
      starts_with((*r)->str, (*r)->len, "NOSCRIPT")) {
    cmd[0] = "EVAL";
    cmd[1] = script.text;
    r = command(ctx->get(), target_, cmd, cc);
    if (!r.ok()) return std::move(r).error();
  }
  give(std::move(*ctx));
  if ((*r)->type == REDIS_REPLY_ERROR) {
    return from_error_reply(target_, r->get());
  }
  return r;
}

Result<ReplyPtr> Pool::fcall(Conn* conn, const Script& script,
                             const std::vector<std::string>& args,
                             bool* fallback, const CallContext& ctx) {
  std::vector<std::string> cmd = {"FCALL", script.function, "0"};
  cmd.insert(cmd.end(), args.begin(), args.end());
  auto r = command(conn, target_, cmd, ctx);
  if (!r.ok() || (*r)->type != REDIS_REPLY_ERROR) return r;
  const char* e = (*r)->str;
  const std::size_t n = (*r)->len;
  if (starts_with(e, n, "NOPERM") || starts_with(e, n, "ERR unknown command")) {
    *fallback = true;  // Redis < 7, or an ACL without +fcall: use EVALSHA
    return r;
  }
  if (!starts_with(e, n, "ERR Function not found")) return r;
  auto load = command(conn, target_,
                      {"FUNCTION", "LOAD", "REPLACE", scripts().library}, ctx);
  if (!load.ok()) return std::move(load).error();
  if ((*load)->type == REDIS_REPLY_ERROR) {
    *fallback = true;  // no FUNCTION (Redis < 7) or not allowed by ACL
    return r;
  }
  return command(conn, target_, cmd, ctx);
}

std::shared_ptr<Notifier::Slot> Notifier::enter(const std::string& token) {
  std::lock_guard<std::mutex> lk(mu_);
  auto& s = slots_[token];
  if (!s) s = std::make_shared<Slot>();
  ++s->refs;
  return s;
}

void Notifier::leave(const std::string& token) {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = slots_.find(token);
  if (it != slots_.end() && --it->second->refs == 0) slots_.erase(it);
}

void Notifier::wake(const std::string& token, std::string payload,
                    const void* from) {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = slots_.find(token);
  if (it == slots_.end()) return;
  Slot& s = *it->second;
  ++s.gen;
  if (s.pushes.size() >= kMaxPushes) s.pushes.erase(s.pushes.begin());
  s.pushes.push_back(Push{from, std::move(payload)});
  s.cv.notify_all();
}

std::vector<Notifier::Push> Notifier::take_pushes(Slot& slot) {
  std::lock_guard<std::mutex> lk(mu_);
  return std::exchange(slot.pushes, {});
}

std::uint64_t Notifier::gen(Slot& slot) {
  std::lock_guard<std::mutex> lk(mu_);
  return slot.gen;
}

void Notifier::poke(Slot& slot) {
  std::lock_guard<std::mutex> lk(mu_);
  ++slot.gen;
  slot.cv.notify_all();
}

std::uint64_t Notifier::wait(Slot& slot, std::uint64_t seen,
                             std::chrono::steady_clock::time_point until) {
  std::unique_lock<std::mutex> lk(mu_);
  slot.cv.wait_until(lk, until, [&] { return slot.gen != seen; });
  return slot.gen;
}

TestHooks& test_hooks() {
  static TestHooks* hooks = new TestHooks();
  return *hooks;
}

Subscriber::Subscriber(Target target, Notifier& notifier, milliseconds linger)
    : target_(std::move(target)), notifier_(notifier), linger_(linger) {
  int fds[2];
  if (::pipe2(fds, O_NONBLOCK | O_CLOEXEC) == 0) {
    wake_r_ = fds[0];
    wake_w_ = fds[1];
  }
}

Subscriber::~Subscriber() {
  stop_ = true;
  {
    std::lock_guard<std::mutex> lk(mu_);
    cv_.notify_all();
  }
  wake();
  if (thread_.joinable()) thread_.join();
  if (wake_r_ >= 0) ::close(wake_r_);
  if (wake_w_ >= 0) ::close(wake_w_);
}

void Subscriber::wake() {
  if (wake_w_ < 0) return;
  const char b = 1;
  [[maybe_unused]] const auto n = ::write(wake_w_, &b, 1);
}

void Subscriber::add(const std::string& channel) {
  std::lock_guard<std::mutex> lk(mu_);
  if (!started_ && wake_r_ >= 0) {
    started_ = true;
    thread_ = std::thread([this] { run(); });
  }
  Channel& ch = channels_[channel];
  if (++ch.refs == 1 && !ch.sent_sub) wake();
}

std::optional<std::chrono::steady_clock::time_point> Subscriber::await_active(
    const std::string& channel, std::chrono::steady_clock::time_point until) {
  std::unique_lock<std::mutex> lk(mu_);
  auto it = channels_.find(channel);
  if (it == channels_.end()) return std::nullopt;
  Channel& ch = it->second;  // kept while it has a reference
  cv_.wait_until(lk, until, [&] { return ch.active_since || stop_; });
  return ch.active_since;
}

void Subscriber::unsubscribe(const std::string& channel) {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = channels_.find(channel);
  if (it == channels_.end() || it->second.refs == 0) return;
  if (--it->second.refs == 0) {
    it->second.idle_since = std::chrono::steady_clock::now();
    wake();  // the thread re-arms its linger timer
  }
}

int Subscriber::reconcile(redisContext* ctx,
                          std::chrono::steady_clock::time_point now) {
  std::lock_guard<std::mutex> lk(mu_);
  std::int64_t timeout = -1;
  for (auto it = channels_.begin(); it != channels_.end();) {
    Channel& ch = it->second;
    bool want = ch.refs > 0;
    if (!want && ch.sent_sub) {
      const auto until = ch.idle_since + linger_;
      if (now < until) {
        want = true;  // lingering
        const auto ms = std::chrono::ceil<milliseconds>(until - now).count();
        timeout = timeout < 0 ? ms : std::min<std::int64_t>(timeout, ms);
      }
    }
    if (want != ch.sent_sub) {
      const char* argv[2] = {want ? "SUBSCRIBE" : "UNSUBSCRIBE",
                             it->first.c_str()};
      const std::size_t lens[2] = {std::strlen(argv[0]), it->first.size()};
      redisAppendCommandArgv(ctx, 2, argv, lens);
      ch.sent_sub = want;
      ch.active_since.reset();
      ++ch.inflight;
    }
    if (ch.refs == 0 && !ch.sent_sub && ch.inflight == 0) {
      it = channels_.erase(it);
    } else {
      ++it;
    }
  }
  return static_cast<int>(std::min<std::int64_t>(timeout, 60000));
}

void Subscriber::on_reply(const redisReply* r) {
  if (r->type != REDIS_REPLY_ARRAY) return;
  if (r->elements < 3 || r->element[0]->type != REDIS_REPLY_STRING) return;
  const std::string kind(r->element[0]->str, r->element[0]->len);
  const redisReply* ch = r->element[1];
  if (kind == "message" && r->element[2]->type == REDIS_REPLY_STRING) {
    TestHooks& hooks = test_hooks();
    if (hooks.drop_messages.load()) {
      hooks.dropped.fetch_add(1);
      return;
    }
    hooks.delivered.fetch_add(1);
    std::string payload(r->element[2]->str, r->element[2]->len);
    std::string token = payload.substr(0, payload.find(' '));
    notifier_.wake(token, std::move(payload), this);
    return;
  }
  if ((kind != "subscribe" && kind != "unsubscribe") ||
      ch->type != REDIS_REPLY_STRING) {
    return;
  }
  std::lock_guard<std::mutex> lk(mu_);
  auto it = channels_.find(std::string(ch->str, ch->len));
  if (it == channels_.end() || it->second.inflight == 0) return;
  Channel& c = it->second;
  if (--c.inflight == 0 && c.sent_sub) {
    c.active_since = std::chrono::steady_clock::now();
    cv_.notify_all();
  }
}

bool Subscriber::serve(Conn* conn) {
  redisContext* ctx = conn->get();
  std::string why;
  for (;;) {
    const auto now = std::chrono::steady_clock::now();
    const int timeout = reconcile(ctx, now);
    if (!flush(conn, now + target_.timeout, &why)) return false;
    // Decrypted bytes inside OpenSSL: poll(2) cannot see them, so no wait.
    const bool pending = conn->tls && conn->tls->has_pending();
    pollfd fds[2] = {{conn->fd(), POLLIN, 0}, {wake_r_, POLLIN, 0}};
    if (::poll(fds, 2, pending ? 0 : timeout) < 0 && errno != EINTR) {
      return false;
    }
    if (stop_) return true;
    if (fds[1].revents & POLLIN) {
      char buf[64];
      while (::read(wake_r_, buf, sizeof buf) > 0) {
      }
    }
    if (pending || (fds[0].revents & (POLLIN | POLLERR | POLLHUP))) {
      if (!read_in(conn, &why)) return false;
      for (;;) {
        void* raw = nullptr;
        if (redisGetReplyFromReader(ctx, &raw) != REDIS_OK) return false;
        if (raw == nullptr) break;
        ReplyPtr reply(static_cast<redisReply*>(raw));
        on_reply(reply.get());
      }
    }
  }
}

void Subscriber::run() {
  while (!stop_) {
    auto conn = connect(target_, CallContext());  // the target's timeout
    if (conn.ok()) {
      serve(conn->get());
      // The server forgot every subscription with the connection.
      std::lock_guard<std::mutex> lk(mu_);
      for (auto& [name, ch] : channels_) {
        ch.sent_sub = false;
        ch.inflight = 0;
        ch.active_since.reset();
      }
      cv_.notify_all();
    }
    // Wait before reconnecting (woken early only by the destructor).
    std::unique_lock<std::mutex> lk(mu_);
    cv_.wait_for(lk, milliseconds(100), [&] { return stop_.load(); });
  }
}

}  // namespace baton::store::redis
