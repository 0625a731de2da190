// capi/lease.cc — the value objects: leases, lease lists, lock
// descriptions, lock lists. No I/O and no process check: they are plain
// memory, as usable in a forked child as anywhere.
#include "baton/lease.h"

#include <chrono>
#include <cstring>
#include <string>

#include "baton/validate.h"
#include "capi/handles.h"

using baton::capi::guarded;
using baton::capi::require;

baton_lease::baton_lease(baton::Lease l) : lease(std::move(l)) {
  const std::string hex = lease.token.to_string();
  std::memcpy(token, hex.c_str(), sizeof token);
}

namespace {

const baton::WaiterInfo* waiter_at(const baton_lock_info_t* info,
                                   std::size_t i) {
  return info && i < info->info.waiters.size() ? &info->info.waiters[i]
                                               : nullptr;
}

}  // namespace

extern "C" {

baton_error_t* baton_lease_new(const char* name, const char* token_hex,
                               int64_t ttl_ms, baton_lease_t** out) {
  return guarded([&]() -> baton_error_t* {
    if (out) *out = nullptr;
    if (auto* e = require(out, "out")) return e;
    if (auto* e = baton::capi::check_name(name, "lock name")) return e;
    if (auto* e = require(token_hex, "owner token")) return e;
    auto token = baton::OwnerToken::parse(token_hex);
    if (!token.ok()) return baton::capi::make_error(std::move(token).error());
    const std::chrono::milliseconds ttl(ttl_ms);
    if (auto* e = baton::capi::from_status(baton::validate_ttl(ttl))) return e;
    baton::Lease l;
    l.name = name;
    l.token = *token;
    l.ttl = ttl;
    *out = new baton_lease(std::move(l));
    return nullptr;
  });
}

baton_lease_t* baton_lease_copy(const baton_lease_t* lease) {
  if (!lease) return nullptr;
  try {
    return new baton_lease(*lease);
  } catch (...) {
    return nullptr;
  }
}

void baton_lease_destroy(baton_lease_t* lease) { delete lease; }

const char* baton_lease_name(const baton_lease_t* lease) {
  return lease ? lease->lease.name.c_str() : nullptr;
}
const char* baton_lease_token(const baton_lease_t* lease) {
  return lease ? lease->token : nullptr;
}
uint64_t baton_lease_fencing_token(const baton_lease_t* lease) {
  return lease ? lease->lease.fencing_token : 0;
}
int64_t baton_lease_ttl_ms(const baton_lease_t* lease) {
  return lease ? lease->lease.ttl.count() : 0;
}
uint32_t baton_lease_holds(const baton_lease_t* lease) {
  return lease ? lease->lease.holds : 0;
}
uint32_t baton_lease_capacity(const baton_lease_t* lease) {
  return lease ? lease->lease.capacity : 0;
}
int baton_lease_shared(const baton_lease_t* lease) {
  return lease && lease->lease.shared;
}
int64_t baton_lease_local_deadline_ns(const baton_lease_t* lease) {
  return lease ? baton::capi::monotonic_ns(lease->lease.local_deadline) : 0;
}
int64_t baton_lease_time_left_ms(const baton_lease_t* lease) {
  return lease ? lease->lease.time_left().count() : 0;
}
int64_t baton_lease_store_expires_at_ms(const baton_lease_t* lease) {
  return lease ? lease->lease.store_expires_at_ms : 0;
}

size_t baton_lease_list_count(const baton_lease_list_t* list) {
  return list ? list->leases.size() : 0;
}
const baton_lease_t* baton_lease_list_get(const baton_lease_list_t* list,
                                          size_t i) {
  return list && i < list->leases.size() ? &list->leases[i] : nullptr;
}
void baton_lease_list_destroy(baton_lease_list_t* list) { delete list; }

const char* baton_lock_info_name(const baton_lock_info_t* info) {
  return info ? info->info.name.c_str() : nullptr;
}
uint32_t baton_lock_info_capacity(const baton_lock_info_t* info) {
  return info ? info->info.capacity : 0;
}
uint64_t baton_lock_info_last_fencing_token(const baton_lock_info_t* info) {
  return info ? info->info.last_fencing_token : 0;
}
int baton_lock_info_is_free(const baton_lock_info_t* info) {
  // info.holders was moved into `holders`: count those.
  return info && info->holders.items.size() < info->info.capacity;
}
const baton_holders_t* baton_lock_info_holders(const baton_lock_info_t* info) {
  return info ? &info->holders : nullptr;
}
size_t baton_lock_info_waiter_count(const baton_lock_info_t* info) {
  return info ? info->info.waiters.size() : 0;
}
const char* baton_lock_info_waiter_label(const baton_lock_info_t* info,
                                         size_t i) {
  const auto* w = waiter_at(info, i);
  return w ? w->label.c_str() : nullptr;
}
int64_t baton_lock_info_waiter_waited_ms(const baton_lock_info_t* info,
                                         size_t i) {
  const auto* w = waiter_at(info, i);
  return w ? w->waited.count() : 0;
}
int baton_lock_info_waiter_all_or_nothing(const baton_lock_info_t* info,
                                          size_t i) {
  const auto* w = waiter_at(info, i);
  return w && w->all_or_nothing;
}
int baton_lock_info_waiter_shared(const baton_lock_info_t* info, size_t i) {
  const auto* w = waiter_at(info, i);
  return w && w->shared;
}
void baton_lock_info_destroy(baton_lock_info_t* info) { delete info; }

size_t baton_lock_list_count(const baton_lock_list_t* list) {
  return list ? list->locks.size() : 0;
}
const baton_lock_info_t* baton_lock_list_get(const baton_lock_list_t* list,
                                             size_t i) {
  return list && i < list->locks.size() ? &list->locks[i] : nullptr;
}
void baton_lock_list_destroy(baton_lock_list_t* list) { delete list; }

}  // extern "C"
