// stores/redis/redis_store.cc — the redis:// store (see redis_store.h).
#include "stores/redis/redis_store.h"

#include <algorithm>
#include <memory>
#include <utility>

#include "core/validate.h"
#include "stores/redis/common.h"
#include "stores/redis/inbox.h"
#include "stores/redis/instance.h"
#include "stores/redis/watch.h"

namespace baton::store {
namespace {

using namespace redis;  // NOLINT

Error withdrawn_error(const std::string& name) {
  return Error(Errc::not_acquired, "the request for lock " +
                                       core::quote_name(name) +
                                       " was withdrawn while it waited");
}

class RedisStore final : public baton::Store {
 public:
  RedisStore(Target target, std::string prefix, std::string url)
      : inst_(std::move(target), std::move(prefix), notifier_),
        url_(std::move(url)) {}

  std::unique_ptr<Request> request(const AcquireSpec& spec) override;
  std::unique_ptr<MultiRequest> request_multi(const MultiSpec& spec) override;

  Result<Grant> extend(std::string_view name, const OwnerToken& token,
                       milliseconds ttl, const CallContext& ctx) override {
    return inst_.extend(name, token, ttl, ctx);
  }
  Result<ReleaseResult> release(std::string_view name, const OwnerToken& token,
                                const CallContext& ctx) override {
    return inst_.release(name, token, ctx);
  }
  Result<LockInfo> describe(std::string_view name,
                            const CallContext& ctx) override {
    return inst_.describe(name, ctx);
  }
  Result<std::vector<LockInfo>> list(std::string_view prefix, std::size_t limit,
                                     const CallContext& ctx) override {
    return inst_.list(prefix, std::max<std::size_t>(limit, 1), ctx);
  }
  Result<std::int64_t> counter_get(std::string_view name,
                                   const CallContext& ctx) override {
    return inst_.counter_get(name, ctx);
  }
  Result<std::int64_t> counter_add(std::string_view name, std::int64_t delta,
                                   const CallContext& ctx) override {
    return inst_.counter_add(name, delta, ctx);
  }
  Result<std::int64_t> counter_take(std::string_view name, std::int64_t n,
                                    const CallContext& ctx) override {
    return inst_.counter_take(name, n, ctx);
  }

  bool supports_shared() const override { return true; }
  milliseconds recheck_interval() const override {
    return redis::recheck_interval();
  }
  std::string safe_url() const override { return url_; }
  // Keyspace notifications, when the server has them on (watch.h).
  Result<std::unique_ptr<Waitable>> watch(std::string_view prefix,
                                          const CallContext& ctx) override {
    return watch_keyspace(
        {&inst_}, prefix, 1,
        [this, p = std::string(prefix)](const CallContext& c) {
          return inst_.list(p, kWatchedLocks, c);
        },
        ctx);
  }

  Notifier& notifier() { return notifier_; }
  Instance& instance() { return inst_; }

 private:
  Notifier notifier_;  // before inst_: its subscriber wakes it
  Instance inst_;
  const std::string url_;
};

// One acquire: the acquire script in its modes (try, wait, refresh,
// withdraw), woken by its inbox.
class RedisRequest final : public InboxRequest<Request> {
 public:
  RedisRequest(RedisStore& s, const AcquireSpec& spec)
      : InboxRequest(s.notifier(), spec.token.to_string(), {&s.instance()}),
        s_(s),
        spec_(spec) {}

  Result<Answer> ask(AskMode mode, milliseconds wait_left,
                     const CallContext& ctx) override {
    if (mode == AskMode::try_only) return try_once(ctx);
    return queue(kWait, wait_left, ctx);
  }
  Result<Answer> look(milliseconds wait_left, const CallContext& ctx) override {
    return queue(kRefresh, wait_left, ctx);
  }
  Result<Answer> withdraw(const CallContext& ctx) override {
    auto r = s_.instance().acquire(spec_, kWithdraw, 0, ctx);
    if (!r.ok()) return std::move(r).error();
    if (r->kind == AcqReply::Kind::granted) {
      return Answer::granted_with(grant_of(*r));
    }
    return expired_answer();
  }
  // A grant's message carries the grant: it is the answer (rule 10).
  std::optional<Grant> wait_change(Clock::time_point until,
                                   const CallContext& ctx) override {
    auto pushes = messages(until, ctx);
    if (pushes.empty()) return std::nullopt;
    auto pushed = parse_pushed_grant(pushes.back().payload, spec_.name);
    if (!pushed) return std::nullopt;
    test_hooks().pushed_grants.fetch_add(1);
    pushed->grant.shared = spec_.shared;  // the message has no mode
    return grant_of(*pushed);
  }

 private:
  Result<Answer> try_once(const CallContext& ctx) {
    auto r = s_.instance().acquire(spec_, kTry, 0, ctx);
    if (!r.ok()) return std::move(r).error();
    if (r->kind == AcqReply::Kind::granted) {
      return Answer::granted_with(r->grant);
    }
    if (r->kind == AcqReply::Kind::busy) return Answer::refused_with(r->busy);
    return expired_answer();
  }

  // `mode` is wait (enqueue) or refresh (a look: also the heartbeat).
  Result<Answer> queue(const char* mode, milliseconds wait_left,
                       const CallContext& ctx) {
    inbox_.before_send();
    auto r = s_.instance().acquire(spec_, mode, wait_left.count(), ctx);
    if (!r.ok()) return std::move(r).error();
    switch (r->kind) {
      case AcqReply::Kind::granted:
        return Answer::granted_with(grant_of(*r));
      case AcqReply::Kind::withdrawn:
        return Answer::refused_with(withdrawn_error(spec_.name));
      case AcqReply::Kind::busy:
        return Answer::refused_with(r->busy);
      case AcqReply::Kind::timeout:
        return expired_answer();
      case AcqReply::Kind::queued:
        break;
    }
    if (arrival_us_ == 0) arrival_us_ = r->now_us;
    Answer a;
    a.position = static_cast<std::uint32_t>(r->position);
    if (r->next_us > 0) {  // look again at the holder's expiry
      a.look_at = ctx.now() +
                  std::chrono::ceil<milliseconds>(
                      microseconds(r->next_us - r->now_us)) +
                  milliseconds(1);
    }
    if (inbox_.subscribe(ctx)) a.look_at = Clock::time_point::min();
    return a;
  }

  // A grant after a wait counts from the store's receipt of the first ask
  // (rule 14): expiry − the store time of the first `queued` reply.
  Grant grant_of(const AcqReply& r) const {
    Grant g = r.grant;
    if (arrival_us_ > 0 && r.expiry_us - arrival_us_ > g.valid_for.count()) {
      g.valid_for = microseconds(r.expiry_us - arrival_us_);
    }
    return g;
  }

  RedisStore& s_;
  const AcquireSpec spec_;
  std::int64_t arrival_us_ = 0;  // store time of the first queued reply
};

// acquire_some / acquire_all: the multi script under one reservation.
class RedisMulti final : public InboxRequest<MultiRequest> {
 public:
  RedisMulti(RedisStore& s, const MultiSpec& spec)
      : InboxRequest(s.notifier(), spec.reservation.to_string(),
                     {&s.instance()}),
        s_(s),
        spec_(spec) {}

  Result<MultiAnswer> ask(AskMode mode, milliseconds wait_left,
                          const CallContext& ctx) override {
    if (spec_.all_or_nothing && mode == AskMode::try_only) {
      return try_all(ctx);
    }
    return queue(kWait, wait_left, ctx);
  }
  Result<MultiAnswer> look(milliseconds wait_left,
                           const CallContext& ctx) override {
    return queue(kRefresh, wait_left, ctx);
  }
  Result<MultiAnswer> withdraw(const CallContext& ctx) override {
    if (!spec_.all_or_nothing) {
      for (const auto& n : spec_.names) {
        auto r = s_.instance().release(n, spec_.reservation, ctx);
        if (!r.ok()) return std::move(r).error();
      }
      return expired_multi();
    }
    auto r = s_.instance().multi(spec_, kWithdraw, 0, ctx);
    if (!r.ok()) return std::move(r).error();
    if (r->kind == MultiReply::Kind::ok &&
        r->grants.size() == spec_.names.size()) {
      MultiAnswer a;
      a.grants = std::move(r->grants);
      return a;
    }
    return expired_multi();
  }

 private:
  Result<MultiAnswer> try_all(const CallContext& ctx) {
    auto r = s_.instance().multi(spec_, kTry, 0, ctx);
    if (!r.ok()) return std::move(r).error();
    if (r->kind == MultiReply::Kind::busy) return refused_multi(r->busy);
    const std::size_t n = spec_.names.size();
    if (r->grants.size() != n) {
      return refused_multi(
          Error(Errc::not_acquired,
                "not all of the " + std::to_string(n) + " locks are free"));
    }
    MultiAnswer a;
    a.grants = std::move(r->grants);
    return a;
  }

  // acquire_all queues until the wait's end; acquire_some keeps its
  // requests queued `ttl` after the call.
  Result<MultiAnswer> queue(const char* mode, milliseconds wait_left,
                            const CallContext& ctx) {
    inbox_.before_send();
    const bool all = spec_.all_or_nothing;
    auto r = s_.instance().multi(
        spec_, mode, all ? wait_left.count() : spec_.ttl.count(), ctx);
    if (!r.ok()) return std::move(r).error();
    switch (r->kind) {
      case MultiReply::Kind::timeout:
        return expired_multi();
      case MultiReply::Kind::busy:
        return refused_multi(r->busy);
      case MultiReply::Kind::withdrawn:
        return refused_multi(
            Error(Errc::not_acquired,
                  "the reservation was withdrawn while it waited"));
      case MultiReply::Kind::ok:
        break;
    }
    MultiAnswer a;
    a.pending = r->pending;
    a.grants = std::move(r->grants);
    const bool waits = all ? a.grants.size() < spec_.names.size()
                           : a.grants.empty() && a.pending > 0;
    if (waits && wait_left > milliseconds::zero() && inbox_.subscribe(ctx)) {
      a.look_at = Clock::time_point::min();
    }
    return a;
  }

  RedisStore& s_;
  const MultiSpec spec_;
};

std::unique_ptr<Request> RedisStore::request(const AcquireSpec& spec) {
  return std::make_unique<RedisRequest>(*this, spec);
}

std::unique_ptr<MultiRequest> RedisStore::request_multi(const MultiSpec& spec) {
  return std::make_unique<RedisMulti>(*this, spec);
}

Result<std::unique_ptr<baton::Store>> open_redis(const StoreUrl& url) {
  if (url.hosts.size() != 1) {
    return Error(Errc::invalid_argument,
                 "store URL \"" + url.safe +
                     "\": redis:// takes exactly one host (use redlock:// "
                     "for several)");
  }
  auto config = config_of(url);
  if (!config.ok()) return std::move(config).error();
  Target& t = config->targets[0];
  // Check that the server answers (and that the password is right) now, so
  // that opening reports an unreachable store clearly.
  auto conn = connect(t, CallContext());
  if (!conn.ok()) return std::move(conn).error();
  return std::unique_ptr<baton::Store>(
      std::make_unique<RedisStore>(std::move(t), config->prefix, url.safe));
}

}  // namespace

const StoreDescriptor& redis_descriptor() {
  static const StoreDescriptor d = [] {
    StoreDescriptor r;
    r.name = "redis";
    r.schemes = {"redis", "rediss"};
    r.summary = "one Redis 7 server, Lua scripts (rediss:// = over TLS)";
    r.url_form =
        "redis[s]://[user:password@]host[:port][/db][?prefix=baton:&...]";
    r.default_port = 6379;
    r.options = redis::common_options("5s");
    r.open = open_redis;
    return r;
  }();
  return d;
}

}  // namespace baton::store
