// tests/server/direct_store.h — a store opened from its URL and called
// through its primitives (baton/store.h) directly, one primitive per call,
// with no client and no engine in between: what batond (or a fake server)
// answers is what the test sees. acquire() is one ask (try_only for a wait
// of 0); a refusal comes back as its error.
#ifndef BATON_TESTS_SERVER_DIRECT_STORE_H_
#define BATON_TESTS_SERVER_DIRECT_STORE_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "baton/store.h"
#include "baton/store_descriptor.h"

namespace baton::testing {

class DirectStore {
 public:
  explicit DirectStore(std::unique_ptr<Store> s) : s_(std::move(s)) {}

  static Result<std::unique_ptr<DirectStore>> open(std::string_view url) {
    auto s = open_store(url);
    if (!s) return s.error();
    return std::make_unique<DirectStore>(std::move(*s));
  }

  Result<Grant> acquire(const AcquireSpec& spec,
                        std::chrono::milliseconds wait) {
    auto req = s_->request(spec);
    const AskMode mode = wait.count() == 0 ? AskMode::try_only : AskMode::wait;
    auto a = req->ask(mode, wait, CallContext());
    if (!a) return a.error();
    switch (a->kind) {
      case Answer::Kind::granted:
        return a->grant;
      case Answer::Kind::refused:
        return a->error;
      case Answer::Kind::expired:
        return Error(Errc::timeout, "the store's wait ended");
      case Answer::Kind::queued:
        break;
    }
    return Error(Errc::internal, "queued");
  }
  Result<std::vector<Grant>> acquire_multi(const MultiSpec& spec,
                                           std::chrono::milliseconds wait) {
    auto req = s_->request_multi(spec);
    const AskMode mode = wait.count() == 0 ? AskMode::try_only : AskMode::wait;
    auto a = req->ask(mode, wait, CallContext());
    if (!a) return a.error();
    if (a->kind == MultiAnswer::Kind::refused) return a->error;
    if (a->kind == MultiAnswer::Kind::expired) {
      return Error(Errc::timeout, "the store's wait ended");
    }
    return a->grants;
  }
  Result<Grant> extend(std::string_view name, const OwnerToken& token,
                       std::chrono::milliseconds ttl) {
    return s_->extend(name, token, ttl, CallContext());
  }
  Result<ReleaseResult> release(std::string_view name,
                                const OwnerToken& token) {
    return s_->release(name, token, CallContext());
  }
  Result<LockInfo> describe(std::string_view name) {
    return s_->describe(name, CallContext());
  }
  Result<std::vector<LockInfo>> list(std::string_view prefix,
                                     std::size_t limit) {
    return s_->list(prefix, limit, CallContext());
  }
  Result<std::int64_t> counter_get(std::string_view name) {
    return s_->counter_get(name, CallContext());
  }
  Result<std::int64_t> counter_add(std::string_view name, std::int64_t delta) {
    return s_->counter_add(name, delta, CallContext());
  }

 private:
  std::unique_ptr<Store> s_;
};

}  // namespace baton::testing

#endif  // BATON_TESTS_SERVER_DIRECT_STORE_H_
