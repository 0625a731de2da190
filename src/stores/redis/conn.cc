// stores/redis/conn.cc — hiredis pool, notifier and subscriber.
#include "stores/redis/conn.h"

#include <sys/socket.h>
#include <sys/time.h>

#include <cstring>

namespace baton::store::redis {
namespace {

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

Result<ContextPtr> connect(const Target& t) {
  ContextPtr ctx(
      redisConnectWithTimeout(t.host.c_str(), t.port, to_timeval(t.timeout)));
  if (!ctx) return unavailable(t, "cannot allocate a connection");
  if (ctx->err != 0) return unavailable(t, ctx->errstr);
  if (redisSetTimeout(ctx.get(), to_timeval(t.timeout)) != REDIS_OK) {
    return unavailable(t, "cannot set the socket timeout");
  }
  if (!t.password.empty()) {
    std::vector<std::string> auth = {"AUTH"};
    if (!t.user.empty()) auth.push_back(t.user);
    auth.push_back(t.password);
    auto r = command(ctx.get(), t, auth);
    if (!r.ok()) return std::move(r).error();
    if ((*r)->type == REDIS_REPLY_ERROR) {
      return Error(Errc::permission_denied,
                   t.where() + ": authentication failed: " +
                       std::string((*r)->str, (*r)->len));
    }
  }
  if (t.db != 0) {
    auto r = command(ctx.get(), t, {"SELECT", std::to_string(t.db)});
    if (!r.ok()) return std::move(r).error();
    if ((*r)->type == REDIS_REPLY_ERROR) {
      return Error(Errc::invalid_argument,
                   t.where() + ": cannot select database " +
                       std::to_string(t.db) + ": " +
                       std::string((*r)->str, (*r)->len));
    }
  }
  return ctx;
}

Result<ReplyPtr> command(redisContext* ctx, const Target& t,
                         const std::vector<std::string>& args) {
  std::vector<const char*> argv;
  std::vector<std::size_t> lens;
  argv.reserve(args.size());
  lens.reserve(args.size());
  for (const auto& a : args) {
    argv.push_back(a.data());
    lens.push_back(a.size());
  }
  void* raw = redisCommandArgv(ctx, static_cast<int>(args.size()), argv.data(),
                               lens.data());
  if (raw == nullptr) {
    std::string why = ctx->err != 0 ? ctx->errstr : "no reply";
    if (ctx->err == REDIS_ERR_IO && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      why = "no reply within " + std::to_string(t.timeout.count()) + "ms";
    }
    return unavailable(t, why);
  }
  return ReplyPtr(static_cast<redisReply*>(raw));
}

Result<ContextPtr> Pool::take(bool* reused) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (!idle_.empty()) {
      ContextPtr c = std::move(idle_.back());
      idle_.pop_back();
      *reused = true;
      return c;
    }
  }
  *reused = false;
  return connect(target_);
}

void Pool::give(ContextPtr ctx) {
  std::lock_guard<std::mutex> lk(mu_);
  if (idle_.size() < max_idle_) idle_.push_back(std::move(ctx));
}

Result<ReplyPtr> Pool::eval(const Script& script,
                            const std::vector<std::string>& args) {
  bool reused = false;
  auto r = eval_once(script, args, &reused);
  // A pooled connection the server closed meanwhile (restart, idle
  // timeout): try once more on a fresh one. Scripts are idempotent by owner
  // token, so a rerun is safe; a timeout is not retried (no double wait).
  if (!r.ok() && reused && r.error().code() == Errc::unavailable &&
      r.error().message().find("no reply within") == std::string::npos) {
    r = eval_once(script, args, &reused);
  }
  return r;
}

Result<ReplyPtr> Pool::eval_once(const Script& script,
                                 const std::vector<std::string>& args,
                                 bool* reused) {
  auto ctx = take(reused);
  if (!ctx.ok()) return std::move(ctx).error();
  std::string sha;
  {
    std::lock_guard<std::mutex> lk(mu_);
    auto it = sha_.find(script.name);
    if (it != sha_.end()) sha = it->second;
  }
  if (sha.empty()) {
    auto r = command(ctx->get(), target_, {"SCRIPT", "LOAD", script.text});
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
  auto r = command(ctx->get(), target_, cmd);
  if (!r.ok()) return std::move(r).error();  // the context is dropped
  if ((*r)->type == REDIS_REPLY_ERROR &&
      starts_with((*r)->str, (*r)->len, "NOSCRIPT")) {
    cmd[0] = "EVAL";
    cmd[1] = script.text;
    r = command(ctx->get(), target_, cmd);
    if (!r.ok()) return std::move(r).error();
  }
  give(std::move(*ctx));
  if ((*r)->type == REDIS_REPLY_ERROR) {
    return from_error_reply(target_, r->get());
  }
  return r;
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

void Notifier::wake(const std::string& token) {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = slots_.find(token);
  if (it == slots_.end()) return;
  ++it->second->gen;
  it->second->cv.notify_all();
}

std::uint64_t Notifier::gen(Slot& slot) {
  std::lock_guard<std::mutex> lk(mu_);
  return slot.gen;
}

std::uint64_t Notifier::wait(Slot& slot, std::uint64_t seen,
                             std::chrono::steady_clock::time_point until) {
  std::unique_lock<std::mutex> lk(mu_);
  slot.cv.wait_until(lk, until, [&] { return slot.gen != seen; });
  return slot.gen;
}

Subscriber::~Subscriber() {
  stop_ = true;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (fd_ >= 0) ::shutdown(fd_, SHUT_RDWR);
  }
  if (thread_.joinable()) thread_.join();
}

void Subscriber::ensure_started() {
  std::unique_lock<std::mutex> lk(mu_);
  if (started_) return;  // later waiters rely on re-checks meanwhile
  started_ = true;
  thread_ = std::thread([this] { run(); });
  cv_.wait_for(lk, target_.timeout, [&] { return subscribed_; });
}

void Subscriber::run() {
  while (!stop_) {
    auto ctx = connect(target_);
    if (ctx.ok()) {
      auto r = command(ctx->get(), target_, {"PSUBSCRIBE", pattern_});
      if (r.ok() && (*r)->type == REDIS_REPLY_ARRAY) {
        redisSetTimeout(ctx->get(), timeval{0, 0});  // block until a message
        {
          std::lock_guard<std::mutex> lk(mu_);
          fd_ = (*ctx)->fd;
          subscribed_ = true;
          if (stop_) ::shutdown(fd_, SHUT_RDWR);
        }
        cv_.notify_all();
        for (;;) {
          void* raw = nullptr;
          if (redisGetReply(ctx->get(), &raw) != REDIS_OK || raw == nullptr) {
            break;
          }
          ReplyPtr msg(static_cast<redisReply*>(raw));
          if (msg->type == REDIS_REPLY_ARRAY && msg->elements == 4 &&
              msg->element[3]->type == REDIS_REPLY_STRING) {
            notifier_.wake(
                std::string(msg->element[3]->str, msg->element[3]->len));
          }
        }
        std::lock_guard<std::mutex> lk(mu_);
        fd_ = -1;
        subscribed_ = false;
      }
    }
    for (int i = 0; i < 10 && !stop_; ++i) {
      std::this_thread::sleep_for(milliseconds(10));
    }
  }
}

}  // namespace baton::store::redis
