// baton/fence.h — the protected resource's side of fencing
// (docs/contract.md, "The protected resource").
//
// A lease alone cannot stop a paused holder from writing after its lease
// ended. The resource must check the fencing token: accept a write only if
// its token is at least the highest token it has seen. FencedResource is
// that check for an in-process resource (and the torture test's judge);
// stores ship the same check as one SQL statement or one script (see
// docs/stores/).
//
// Thread safety: all methods are safe to call concurrently.
#ifndef BATON_FENCE_H_
#define BATON_FENCE_H_

#include <cstdint>
#include <mutex>

namespace baton {

class FencedResource {
 public:
  // Accepts (returns true) iff token >= the highest token accepted so far,
  // and then records it. Equal tokens are accepted: one holder may write
  // many times under one grant.
  bool try_write(std::uint64_t token) {
    std::lock_guard<std::mutex> lock(mu_);
    if (token < highest_) {
      ++rejected_;
      return false;
    }
    highest_ = token;
    ++accepted_;
    return true;
  }
  std::uint64_t highest() const {
    std::lock_guard<std::mutex> lock(mu_);
    return highest_;
  }
  std::uint64_t accepted() const {
    std::lock_guard<std::mutex> lock(mu_);
    return accepted_;
  }
  std::uint64_t rejected() const {
    std::lock_guard<std::mutex> lock(mu_);
    return rejected_;
  }

 private:
  mutable std::mutex mu_;
  std::uint64_t highest_ = 0;
  std::uint64_t accepted_ = 0;
  std::uint64_t rejected_ = 0;
};

}  // namespace baton

#endif  // BATON_FENCE_H_
