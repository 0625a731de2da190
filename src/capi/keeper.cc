// capi/keeper.cc — baton_keeper_t and baton_session_t: leases renewed by a
// session, with the lost notice as a callback, an fd and a flag.
#include "baton/keeper.h"

#include <chrono>

#include "baton/session.h"
#include "baton/validate.h"
#include "capi/handles.h"

using baton::capi::begin;
using baton::capi::guarded;
using baton::capi::require;
using std::chrono::milliseconds;

namespace {

baton::KeeperOptions keeper_options(const baton_keeper_options_t* o) {
  baton::KeeperOptions k;
  if (o) {
    k.renew_interval = o->renew_interval;
    k.on_lost = baton::capi::lost_callback(o->on_lost);
  }
  return k;
}

baton_error_t* acquire_kept(baton_client_t* client, const char* name,
                            std::int64_t wait_ms, bool shared,
                            const baton_acquire_options_t* options,
                            const baton_keeper_options_t* keeper_opts,
                            baton_cancel_t* cancel, baton_keeper_t** out) {
  return guarded([&]() -> baton_error_t* {
    if (auto* e = begin(client, "client", out)) return e;
    if (auto* e = require(name, "lock name")) return e;
    // LeaseKeeper::acquire reads a wait <= 0 as a try: refuse a negative
    // one here, as every other call does.
    const milliseconds wait(wait_ms);
    if (auto* e = baton::capi::from_status(baton::validate_wait(wait))) {
      return e;
    }
    const baton::capi::CallOptions call(options, cancel);
    const baton::AcquireOptions& o = call.get();
    auto k =
        shared ? baton::LeaseKeeper::acquire_shared(
                     client->client, name, wait, o, keeper_options(keeper_opts))
               : baton::LeaseKeeper::acquire(client->client, name, wait, o,
                                             keeper_options(keeper_opts));
    if (!k.ok()) return baton::capi::make_error(std::move(k).error());
    *out = new baton_keeper(std::move(*k), client->pid);
    return nullptr;
  });
}

}  // namespace

extern "C" {

baton_error_t* baton_keeper_acquire(
    baton_client_t* client, const char* name, int64_t wait_ms,
    const baton_acquire_options_t* options,
    const baton_keeper_options_t* keeper_options, baton_cancel_t* cancel,
    baton_keeper_t** out) {
  return acquire_kept(client, name, wait_ms, false, options, keeper_options,
                      cancel, out);
}

baton_error_t* baton_keeper_acquire_shared(
    baton_client_t* client, const char* name, int64_t wait_ms,
    const baton_acquire_options_t* options,
    const baton_keeper_options_t* keeper_options, baton_cancel_t* cancel,
    baton_keeper_t** out) {
  return acquire_kept(client, name, wait_ms, true, options, keeper_options,
                      cancel, out);
}

baton_error_t* baton_keeper_new(baton_client_t* client,
                                const baton_lease_t* lease,
                                const baton_keeper_options_t* keeper_opts,
                                baton_keeper_t** out) {
  return guarded([&]() -> baton_error_t* {
    if (auto* e = begin(client, "client", out)) return e;
    if (auto* e = require(lease, "lease")) return e;
    *out = new baton_keeper(baton::LeaseKeeper(client->client, lease->lease,
                                               keeper_options(keeper_opts)),
                            client->pid);
    return nullptr;
  });
}

baton_error_t* baton_keeper_lease(const baton_keeper_t* k,
                                  baton_lease_t** out) {
  return guarded([&]() -> baton_error_t* {
    if (auto* e = begin(k, "keeper", out)) return e;
    *out = new baton_lease(k->keeper.lease());
    return nullptr;
  });
}

int baton_keeper_lost(const baton_keeper_t* k) {
  if (!k || baton::capi::forked(k->pid)) return 1;
  return k->keeper.lost();
}

int64_t baton_keeper_safe_deadline_ns(const baton_keeper_t* k) {
  if (!k || baton::capi::forked(k->pid)) return 0;
  return baton::capi::monotonic_ns(k->keeper.safe_deadline());
}

baton_error_t* baton_keeper_release(baton_keeper_t* k, int* released) {
  return guarded([&]() -> baton_error_t* {
    if (released) *released = 0;
    if (auto* e = begin(k, "keeper")) return e;
    auto r = k->keeper.release();
    if (!r.ok()) return baton::capi::make_error(std::move(r).error());
    if (released) *released = *r ? 1 : 0;
    return nullptr;
  });
}

void baton_keeper_destroy(baton_keeper_t* k) {
  if (k && !baton::capi::forked(k->pid)) delete k;
}

baton_error_t* baton_session_new(baton_client_t* client,
                                 baton_session_t** out) {
  return guarded([&]() -> baton_error_t* {
    if (auto* e = begin(client, "client", out)) return e;
    *out = new baton_session(client->client, client->pid);
    return nullptr;
  });
}

baton_error_t* baton_session_keep(baton_session_t* s,
                                  const baton_lease_t* lease,
                                  const baton_keeper_options_t* keeper_opts,
                                  baton_keeper_t** out) {
  return guarded([&]() -> baton_error_t* {
    if (auto* e = begin(s, "session", out)) return e;
    if (auto* e = require(lease, "lease")) return e;
    *out = new baton_keeper(
        s->session.keep(lease->lease, keeper_options(keeper_opts)), s->pid);
    return nullptr;
  });
}

size_t baton_session_size(const baton_session_t* s) {
  if (!s || baton::capi::forked(s->pid)) return 0;
  return s->session.size();
}

void baton_session_destroy(baton_session_t* s) {
  if (s && !baton::capi::forked(s->pid)) delete s;
}

}  // extern "C"
