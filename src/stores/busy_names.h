// stores/busy_names.h — lock names a store's one-statement fast path
// failed on lately, so that its calls on them skip that path for a while.
//
// A fast path (postgres:// and mysql://: one UPDATE that grants an idle
// lock or ends a lease nobody waits for) that finds the name busy costs a
// round trip before the full pass, and on a contended lock that is every
// acquire and every release (the release's round trip is on the handoff's
// critical path). A name marked here goes straight to the full pass until
// its mark is `kFor` old; an idle name is never marked. Only speed depends
// on it: both paths decide correctly on every name.
//
// Thread safety: safe for concurrent use.
#ifndef BATON_STORES_BUSY_NAMES_H_
#define BATON_STORES_BUSY_NAMES_H_

#include <chrono>
#include <mutex>
#include <string>
#include <unordered_map>

namespace baton::store {

class BusyNames {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr std::chrono::seconds kFor{2};
  static constexpr std::size_t kMaxNames = 4096;

  bool busy(const std::string& name) {
    std::lock_guard<std::mutex> lk(mu_);
    auto it = until_.find(name);
    if (it == until_.end()) return false;
    if (it->second > Clock::now()) return true;
    until_.erase(it);
    return false;
  }

  void mark(const std::string& name) {
    std::lock_guard<std::mutex> lk(mu_);
    const Clock::time_point now = Clock::now();
    if (until_.size() >= kMaxNames) {
      std::erase_if(until_, [&](const auto& e) { return e.second <= now; });
      if (until_.size() >= kMaxNames) until_.clear();
    }
    until_[name] = now + kFor;
  }

 private:
  std::mutex mu_;
  std::unordered_map<std::string, Clock::time_point> until_;  // guarded
};

}  // namespace baton::store

#endif  // BATON_STORES_BUSY_NAMES_H_
