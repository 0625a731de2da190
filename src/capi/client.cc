// capi/client.cc — baton_client_t: open, acquire (try, wait, shared,
// some, all), extend, release, describe, list.
#include "baton/client.h"

#include <chrono>
#include <string>
#include <vector>

#include "baton/validate.h"
#include "capi/handles.h"

using baton::capi::begin;
using baton::capi::deliver;
using baton::capi::guarded;
using baton::capi::require;
using std::chrono::milliseconds;

namespace {

// acquire / acquire_shared / try_acquire.
baton_error_t* acquire_one(baton_client_t* client, const char* name,
                           std::int64_t wait_ms, bool shared,
                           const baton_acquire_options_t* options,
                           baton_cancel_t* cancel, baton_lease_t** out) {
  return guarded([&]() -> baton_error_t* {
    if (auto* e = begin(client, "client", out)) return e;
    if (auto* e = require(name, "lock name")) return e;
    const baton::capi::CallOptions call(options, cancel);
    const baton::AcquireOptions& o = call.get();
    const milliseconds wait(wait_ms);
    return deliver(shared ? client->client.acquire_shared(name, wait, o)
                          : client->client.acquire(name, wait, o),
                   out);
  });
}

// The names of acquire_some / acquire_all, each checked for NULL.
baton_error_t* names_of(const char* const* names, std::size_t count,
                        std::vector<std::string>& into) {
  if (count > 0) {
    if (auto* e = require(names, "names")) return e;
  }
  into.reserve(count);
  for (std::size_t i = 0; i < count; ++i) {
    if (!names[i]) {
      return baton::capi::invalid("names[" + std::to_string(i) + "] is NULL");
    }
    into.emplace_back(names[i]);
  }
  return nullptr;
}

baton_error_t* deliver_leases(baton::Result<std::vector<baton::Lease>>&& r,
                              baton_lease_list_t** out) {
  if (!r.ok()) return baton::capi::make_error(std::move(r).error());
  auto list = std::make_unique<baton_lease_list>();
  list->leases.reserve(r->size());
  for (auto& l : *r) list->leases.emplace_back(std::move(l));
  *out = list.release();
  return nullptr;
}

// acquire_some (under `reservation`) and acquire_all (all_or_nothing).
baton_error_t* acquire_many(baton_client_t* client, const char* const* names,
                            std::size_t count, bool all_or_nothing,
                            const char* reservation, std::int64_t wait_ms,
                            const baton_acquire_options_t* options,
                            baton_cancel_t* cancel, baton_lease_list_t** out) {
  return guarded([&]() -> baton_error_t* {
    if (auto* e = begin(client, "client", out)) return e;
    std::vector<std::string> v;
    if (auto* e = names_of(names, count, v)) return e;
    const baton::capi::CallOptions call(options, cancel);
    const milliseconds wait(wait_ms);
    if (all_or_nothing) {
      return deliver_leases(client->client.acquire_all(v, wait, call.get()),
                            out);
    }
    if (auto* e = require(reservation, "reservation")) return e;
    auto token = baton::OwnerToken::parse(reservation);
    if (!token.ok()) return baton::capi::make_error(std::move(token).error());
    return deliver_leases(
        client->client.acquire_some(v, *token, wait, call.get()), out);
  });
}

}  // namespace

extern "C" {

baton_error_t* baton_client_open(const char* url,
                                 const baton_client_options_t* options,
                                 baton_client_t** out) {
  return guarded([&]() -> baton_error_t* {
    if (out) *out = nullptr;
    if (auto* e = require(out, "out")) return e;
    if (auto* e = require(url, "store URL")) return e;
    const pid_t pid = baton::capi::current_pid();
    auto client = baton::Client::open(
        url, options ? options->options : baton::ClientOptions{});
    if (!client.ok()) return baton::capi::make_error(std::move(client).error());
    *out = new baton_client(std::move(*client), pid);
    return nullptr;
  });
}

void baton_client_destroy(baton_client_t* client) {
  // In a child after fork the client's state belongs to the parent (its
  // threads do not exist here): it is left alone, never torn down.
  if (client && !baton::capi::forked(client->pid)) delete client;
}

const char* baton_client_label(const baton_client_t* client) {
  return client ? client->client.label().c_str() : nullptr;
}

const char* baton_client_url(const baton_client_t* client) {
  return client ? client->url.c_str() : nullptr;
}

baton_error_t* baton_client_try_acquire(baton_client_t* client,
                                        const char* name,
                                        const baton_acquire_options_t* options,
                                        baton_lease_t** out) {
  return acquire_one(client, name, 0, false, options, nullptr, out);
}

baton_error_t* baton_client_acquire(baton_client_t* client, const char* name,
                                    int64_t wait_ms,
                                    const baton_acquire_options_t* options,
                                    baton_cancel_t* cancel,
                                    baton_lease_t** out) {
  return acquire_one(client, name, wait_ms, false, options, cancel, out);
}

baton_error_t* baton_client_acquire_shared(
    baton_client_t* client, const char* name, int64_t wait_ms,
    const baton_acquire_options_t* options, baton_cancel_t* cancel,
    baton_lease_t** out) {
  return acquire_one(client, name, wait_ms, true, options, cancel, out);
}

baton_error_t* baton_client_extend(baton_client_t* client,
                                   const baton_lease_t* lease, int64_t ttl_ms,
                                   baton_lease_t** out) {
  return guarded([&]() -> baton_error_t* {
    if (auto* e = begin(client, "client", out)) return e;
    if (auto* e = require(lease, "lease")) return e;
    // 0 = the lease's own TTL; every other value is checked as a TTL.
    const milliseconds ttl =
        ttl_ms == 0 ? lease->lease.ttl : milliseconds(ttl_ms);
    return deliver(client->client.extend(lease->lease, ttl), out);
  });
}

baton_error_t* baton_client_release(baton_client_t* client,
                                    const baton_lease_t* lease, int* released) {
  return guarded([&]() -> baton_error_t* {
    if (released) *released = 0;
    if (auto* e = begin(client, "client")) return e;
    if (auto* e = require(lease, "lease")) return e;
    auto r = client->client.release(lease->lease);
    if (!r.ok()) return baton::capi::make_error(std::move(r).error());
    if (released) *released = *r ? 1 : 0;
    return nullptr;
  });
}

baton_error_t* baton_client_describe(baton_client_t* client, const char* name,
                                     baton_lock_info_t** out) {
  return guarded([&]() -> baton_error_t* {
    if (auto* e = begin(client, "client", out)) return e;
    if (auto* e = require(name, "lock name")) return e;
    return deliver(client->client.describe(name), out);
  });
}

baton_error_t* baton_client_list(baton_client_t* client, const char* prefix,
                                 size_t limit, baton_lock_list_t** out) {
  return guarded([&]() -> baton_error_t* {
    if (auto* e = begin(client, "client", out)) return e;
    auto r = client->client.list(prefix ? prefix : "", limit);
    if (!r.ok()) return baton::capi::make_error(std::move(r).error());
    auto list = std::make_unique<baton_lock_list>();
    list->locks.reserve(r->size());
    for (auto& info : *r) list->locks.emplace_back(std::move(info));
    *out = list.release();
    return nullptr;
  });
}

baton_error_t* baton_client_acquire_some(baton_client_t* client,
                                         const char* const* names, size_t count,
                                         const char* reservation,
                                         int64_t wait_ms,
                                         const baton_acquire_options_t* options,
                                         baton_cancel_t* cancel,
                                         baton_lease_list_t** out) {
  return acquire_many(client, names, count, false, reservation, wait_ms,
                      options, cancel, out);
}

baton_error_t* baton_client_acquire_all(baton_client_t* client,
                                        const char* const* names, size_t count,
                                        int64_t wait_ms,
                                        const baton_acquire_options_t* options,
                                        baton_cancel_t* cancel,
                                        baton_lease_list_t** out) {
  return acquire_many(client, names, count, true, nullptr, wait_ms, options,
                      cancel, out);
}

}  // extern "C"
