// stores/etcd/etcd_keys.cc — which key a request of this store is written
// under: keys are reused (docs/stores/etcd.md, "Key layout").
#include <cinttypes>
#include <cstdio>
#include <cstdlib>

#include "stores/etcd/etcd_impl.h"

namespace baton::store::etcd {
namespace {

// Bounds on the maps below (a process that touches millions of lock names
// once each): past them they are cleared; what is lost is only reuse, and
// a retry's memory of its key (docs/stores/etcd.md, "Key layout").
constexpr std::size_t kMaxKeys = 100000;
constexpr std::size_t kMaxFreeLocks = 10000;
constexpr std::size_t kMaxFreePerLock = 64;

std::string hex16(std::uint64_t n) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016" PRIx64, n);
  return std::string(buf, 16);
}

}  // namespace

std::string EtcdStore::key_for(std::string_view name, const OwnerToken& token) {
  const std::string id = id_of(name, token);
  {
    std::lock_guard<std::mutex> lk(mu_);
    auto it = keys_.find(id);
    if (it != keys_.end()) return it->second;
  }
  const std::string dir = lock_dir(name);
  std::lock_guard<std::mutex> lk(mu_);
  std::uint64_t slot = next_slot_;
  auto f = free_.find(dir);
  if (f != free_.end() && !f->second.empty()) {
    slot = f->second.back();
    f->second.pop_back();
    if (f->second.empty()) free_.erase(f);
  } else {
    ++next_slot_;
  }
  if (keys_.size() >= kMaxKeys) keys_.clear();
  std::string key = dir + store_id_ + hex16(slot);
  keys_[id] = key;
  return key;
}

std::string EtcdStore::new_key(std::string_view name, const OwnerToken& token) {
  std::lock_guard<std::mutex> lk(mu_);
  std::string key = lock_dir(name) + store_id_ + hex16(next_slot_++);
  keys_[id_of(name, token)] = key;
  return key;
}

std::optional<std::string> EtcdStore::known_key(std::string_view name,
                                                const OwnerToken& token) {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = keys_.find(id_of(name, token));
  if (it == keys_.end()) return std::nullopt;
  return it->second;
}

void EtcdStore::key_is(std::string_view name, const OwnerToken& token,
                       const std::string& key) {
  std::lock_guard<std::mutex> lk(mu_);
  if (keys_.size() >= kMaxKeys) keys_.clear();
  keys_[id_of(name, token)] = key;
}

void EtcdStore::key_done(std::string_view name, const OwnerToken& token,
                         bool gone) {
  const std::string dir = lock_dir(name);
  std::lock_guard<std::mutex> lk(mu_);
  auto it = keys_.find(id_of(name, token));
  if (it == keys_.end()) return;
  const std::string key = std::move(it->second);
  keys_.erase(it);
  // Only this store's keys of the new layout are reused.
  if (!gone || key.size() != dir.size() + 32 ||
      key.compare(dir.size(), 16, store_id_) != 0) {
    return;
  }
  const std::uint64_t slot =
      std::strtoull(key.c_str() + dir.size() + 16, nullptr, 16);
  if (free_.size() >= kMaxFreeLocks && free_.count(dir) == 0) free_.clear();
  auto& slots = free_[dir];
  if (slots.size() < kMaxFreePerLock) slots.push_back(slot);
}

}  // namespace baton::store::etcd
