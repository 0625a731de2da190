// stores/redis/redis_store.cc — the redis:// store (see redis_store.h).
#include "stores/redis/redis_store.h"

#include <algorithm>

#include "stores/redis/common.h"
#include "stores/redis/instance.h"
#include "stores/redis/wait.h"

namespace baton::store {
namespace {

using namespace redis;  // NOLINT
using std::chrono::microseconds;

Error withdrawn(const std::string& name) {
  return Error(Errc::not_acquired, "the request for lock " +
                                       core::quote_name(name) +
                                       " was withdrawn while it waited");
}

class RedisStore final : public Store {
 public:
  RedisStore(Target target, const StoreConfig& config, std::string url)
      : inst_(std::move(target), config.prefix, notifier_),
        url_(std::move(url)) {}

  Result<Grant> acquire(const AcquireSpec& spec, milliseconds wait) override {
    if (Status st = check_acquire(spec, wait); !st.ok()) return st.error();
    if (wait <= milliseconds::zero()) {
      auto r = inst_.acquire(spec, kTry, 0);
      if (!r.ok()) return std::move(r).error();
      if (r->kind == AcqReply::Kind::granted) return r->grant;
      if (r->kind == AcqReply::Kind::busy) return r->busy;
      return Error(Errc::not_acquired,
                   "lock " + core::quote_name(spec.name) + " is not free");
    }
    const auto end = wait_end(wait);
    std::int64_t arrival_us = 0;
    auto granted = [&](AcqReply& r) {
      if (arrival_us > 0 &&
          r.expiry_us - arrival_us > r.grant.valid_for.count()) {
        r.grant.valid_for = microseconds(r.expiry_us - arrival_us);
      }
      return r.grant;
    };
    Waiter waiter(notifier_, spec.token.to_string(), {&inst_});
    auto out = waiter.run<Grant>(
        end, true,
        [&](bool first, std::int64_t left) -> Round<Grant> {
          // Woken by its grant's message: that is the reply (rule 10).
          if (auto pushed =
                  parse_pushed_grant(waiter.take_payload(), spec.name);
              pushed && !first) {
            test_hooks().pushed_grants.fetch_add(1);
            pushed->grant.shared = spec.shared;  // the message has no mode
            return Result<Grant>(granted(*pushed));
          }
          auto r = inst_.acquire(spec, first ? kWait : kRefresh, left);
          if (!r.ok()) return Result<Grant>(std::move(r).error());
          switch (r->kind) {
            case AcqReply::Kind::granted:
              return Result<Grant>(granted(*r));
            case AcqReply::Kind::withdrawn:
              return Result<Grant>(withdrawn(spec.name));
            case AcqReply::Kind::queued:
              break;
            default:
              return Keep{.expired = true};
          }
          if (arrival_us == 0) arrival_us = r->now_us;
          Keep keep;
          if (r->next_us > 0) {  // re-check at the holder's expiry
            keep.nap = std::chrono::ceil<milliseconds>(
                           microseconds(r->next_us - r->now_us)) +
                       milliseconds(1);
          }
          return keep;
        },
        [] {});
    if (out) return std::move(*out);
    auto r = inst_.acquire(spec, kWithdraw, 0);
    if (!r.ok()) return std::move(r).error();
    if (r->kind == AcqReply::Kind::granted) return granted(*r);
    return Error(Errc::timeout, "lock " + core::quote_name(spec.name) +
                                    " was not granted within " +
                                    std::to_string(wait.count()) + "ms");
  }

  Result<Grant> extend(std::string_view name, const OwnerToken& token,
                       milliseconds ttl) override {
    if (Status st = core::validate_name(name); !st.ok()) return st.error();
    if (Status st = core::validate_ttl(ttl); !st.ok()) return st.error();
    return inst_.extend(name, token, ttl);
  }

  Result<ReleaseResult> release(std::string_view name,
                                const OwnerToken& token) override {
    if (Status st = core::validate_name(name); !st.ok()) return st.error();
    return inst_.release(name, token);
  }

  Result<LockInfo> describe(std::string_view name) override {
    if (Status st = core::validate_name(name); !st.ok()) return st.error();
    return inst_.describe(name);
  }

  Result<std::vector<LockInfo>> list(std::string_view prefix,
                                     std::size_t limit) override {
    if (!prefix.empty()) {
      if (Status st = core::validate_name(prefix, "name prefix"); !st.ok()) {
        return st.error();
      }
    }
    return inst_.list(prefix, std::max<std::size_t>(limit, 1));
  }

  Result<std::vector<Grant>> acquire_multi(const MultiSpec& spec,
                                           milliseconds wait) override {
    if (Status st = check_multi(spec, wait); !st.ok()) return st.error();
    const std::size_t n = spec.names.size();
    if (spec.all_or_nothing && wait <= milliseconds::zero()) {
      auto r = inst_.multi(spec, kTry, 0);
      if (!r.ok()) return std::move(r).error();
      if (r->kind == MultiReply::Kind::busy) return r->busy;
      if (r->grants.size() == n) return r->grants;
      return Error(Errc::not_acquired,
                   "not all of the " + std::to_string(n) + " locks are free");
    }
    const auto end = wait_end(wait);
    const std::int64_t queue_ms = spec.ttl.count();
    Waiter waiter(notifier_, spec.reservation.to_string(), {&inst_});
    auto out = waiter.run<std::vector<Grant>>(
        end, spec.all_or_nothing,
        [&](bool first, std::int64_t left) -> Round<std::vector<Grant>> {
          using R = Result<std::vector<Grant>>;
          auto r = inst_.multi(spec, first ? kWait : kRefresh,
                               spec.all_or_nothing ? left : queue_ms);
          if (!r.ok()) return R(std::move(r).error());
          if (r->kind == MultiReply::Kind::timeout)
            return Keep{.expired = true};
          if (r->kind == MultiReply::Kind::busy) return R(r->busy);
          if (r->kind == MultiReply::Kind::withdrawn) {
            return R(Error(Errc::not_acquired,
                           "the reservation was withdrawn while it waited"));
          }
          if (spec.all_or_nothing
                  ? r->grants.size() == n
                  : (!r->grants.empty() || r->pending == 0 || left <= 0 ||
                     (first && wait <= milliseconds::zero()))) {
            return R(r->grants);
          }
          return Keep{};
        },
        [] {});
    if (out) return std::move(*out);
    auto r = inst_.multi(spec, kWithdraw, 0);
    if (!r.ok()) return std::move(r).error();
    if (r->kind == MultiReply::Kind::ok && r->grants.size() == n) {
      return r->grants;
    }
    return Error(Errc::timeout, "not all of the " + std::to_string(n) +
                                    " locks were granted within " +
                                    std::to_string(wait.count()) + "ms");
  }

  Result<std::int64_t> counter_get(std::string_view name) override {
    if (Status st = core::validate_name(name, "counter name"); !st.ok()) {
      return st.error();
    }
    return inst_.counter_get(name);
  }
  Result<std::int64_t> counter_add(std::string_view name,
                                   std::int64_t delta) override {
    if (Status st = core::validate_name(name, "counter name"); !st.ok()) {
      return st.error();
    }
    return inst_.counter_add(name, delta);
  }
  Result<std::int64_t> counter_take(std::string_view name,
                                    std::int64_t n) override {
    if (Status st = core::validate_name(name, "counter name"); !st.ok()) {
      return st.error();
    }
    if (n < 1) {
      return Error(Errc::invalid_argument,
                   "counter take of " + std::to_string(n) +
                       " is invalid; it must be at least 1");
    }
    return inst_.counter_take(name, n);
  }

  bool supports_shared() const override { return true; }
  std::string safe_url() const override { return url_; }

 private:
  Notifier notifier_;  // before inst_: its subscriber wakes it
  Instance inst_;
  const std::string url_;
};

}  // namespace

Result<std::unique_ptr<Store>> open_redis_store(const core::Url& url) {
  if (url.scheme != "redis" && url.scheme != "rediss") {
    return Error(Errc::invalid_argument, "store URL \"" + url.safe() +
                                             "\" is not a redis:// or "
                                             "rediss:// URL");
  }
  if (url.hosts.size() != 1) {
    return Error(Errc::invalid_argument,
                 "store URL \"" + url.safe() +
                     "\": redis:// takes exactly one host (use redlock:// "
                     "for several)");
  }
  auto config = parse_config(url, milliseconds(5000));
  if (!config.ok()) return std::move(config).error();
  Target t;
  t.host = url.hosts[0].host;
  t.port = url.hosts[0].port == 0 ? 6379 : url.hosts[0].port;
  t.user = config->user;
  t.password = config->password;
  t.db = config->db;
  t.timeout = config->timeout;
  t.tls = config->tls;
  // Check that the server answers (and that the password is right) now, so
  // that open() reports an unreachable store clearly.
  auto ctx = connect(t);
  if (!ctx.ok()) return std::move(ctx).error();
  return std::unique_ptr<Store>(
      std::make_unique<RedisStore>(t, *config, url.safe()));
}

}  // namespace baton::store
