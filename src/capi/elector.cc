// capi/elector.cc — baton_elector_t and baton_leader_t: leader election,
// with C callbacks.
//
// After baton_elector_destroy() returns, no callback of the elector runs
// any more: ~Elector joins the elector's thread (on_elected,
// on_new_leader) and waits for an on_lost running on the notice thread.
//
// A callback may destroy its own elector (a binding's garbage collector
// can do that at any moment). Neither the join nor the wait can happen on
// the callback's own thread, so the callbacks mark the thread they run on,
// and a destroy from inside one finishes on a thread of its own.
#include "baton/elector.h"

#include <chrono>
#include <thread>

#include "baton/validate.h"
#include "capi/handles.h"

using baton::capi::begin;
using baton::capi::guarded;
using baton::capi::require;
using std::chrono::milliseconds;

namespace {

// The elector whose callback is running on this thread, if any.
thread_local const baton_elector* tl_in_callback_of = nullptr;

class CallbackScope {
 public:
  explicit CallbackScope(const baton_elector* e) : saved_(tl_in_callback_of) {
    tl_in_callback_of = e;
  }
  ~CallbackScope() { tl_in_callback_of = saved_; }
  CallbackScope(const CallbackScope&) = delete;
  CallbackScope& operator=(const CallbackScope&) = delete;

 private:
  const baton_elector* saved_;
};

// ElectorOptions with C++ callbacks that call the C ones for `e`.
baton::ElectorOptions elector_options(const baton_elector_options_t* o,
                                      const baton_elector* e) {
  if (!o) return {};
  baton::ElectorOptions out = o->options;
  if (auto fn = o->on_elected) {
    void* user = o->on_elected_user;
    out.on_elected = [fn, user, e](const baton::Lease& l) {
      const CallbackScope scope(e);
      const baton_lease lease(l);
      fn(&lease, user);
    };
  }
  if (auto fn = o->on_new_leader) {
    void* user = o->on_new_leader_user;
    out.on_new_leader = [fn, user, e](const std::string& label) {
      const CallbackScope scope(e);
      fn(label.c_str(), user);
    };
  }
  if (auto lost = baton::capi::lost_callback(o->on_lost)) {
    out.on_lost = [lost = std::move(lost), e](const baton::Error& why) {
      const CallbackScope scope(e);
      lost(why);
    };
  }
  return out;
}

}  // namespace

extern "C" {

baton_error_t* baton_elector_new(baton_client_t* client, const char* group,
                                 const baton_elector_options_t* options,
                                 baton_elector_t** out) {
  return guarded([&]() -> baton_error_t* {
    if (auto* e = begin(client, "client", out)) return e;
    // Elector checks the group only at campaign(): refuse a bad one now,
    // before a thread is started for an elector that can never run.
    if (auto* e = baton::capi::check_name(group, "election group")) return e;
    auto e = std::make_unique<baton_elector>();
    e->pid = client->pid;
    e->elector = std::make_unique<baton::Elector>(
        client->client, group, elector_options(options, e.get()));
    *out = e.release();
    return nullptr;
  });
}

baton_error_t* baton_elector_campaign(baton_elector_t* e, int64_t wait_ms,
                                      baton_cancel_t* cancel) {
  return guarded([&]() -> baton_error_t* {
    if (auto* err = begin(e, "elector")) return err;
    return baton::capi::from_status(e->elector->campaign(
        milliseconds(wait_ms), baton::capi::stop_of(cancel)));
  });
}

baton_error_t* baton_elector_resign(baton_elector_t* e) {
  return guarded([&]() -> baton_error_t* {
    if (auto* err = begin(e, "elector")) return err;
    return baton::capi::from_status(e->elector->resign());
  });
}

baton_error_t* baton_elector_observe(const baton_elector_t* e,
                                     baton_leader_t** out) {
  return guarded([&]() -> baton_error_t* {
    if (auto* err = begin(e, "elector", out)) return err;
    auto r = e->elector->observe();
    if (!r.ok()) return baton::capi::make_error(std::move(r).error());
    *out = new baton_leader{std::move(*r)};
    return nullptr;
  });
}

int baton_elector_is_leader(const baton_elector_t* e) {
  if (!e || baton::capi::forked(e->pid)) return 0;
  return e->elector->is_leader();
}

int baton_elector_cancelled(const baton_elector_t* e) {
  if (!e || baton::capi::forked(e->pid)) return 1;
  return e->elector->cancelled().load();
}

baton_error_t* baton_elector_lease(const baton_elector_t* e,
                                   baton_lease_t** out) {
  return guarded([&]() -> baton_error_t* {
    if (auto* err = begin(e, "elector", out)) return err;
    auto l = e->elector->lease();
    if (!l) {
      return baton::capi::make_error(baton::Error(
          baton::Errc::not_acquired, "this candidate is not the leader"));
    }
    *out = new baton_lease(std::move(*l));
    return nullptr;
  });
}

int64_t baton_elector_safe_deadline_ns(const baton_elector_t* e) {
  if (!e || baton::capi::forked(e->pid)) return 0;
  return baton::capi::monotonic_ns(e->elector->safe_deadline());
}

void baton_elector_destroy(baton_elector_t* e) {
  if (!e || baton::capi::forked(e->pid)) return;
  if (tl_in_callback_of != e) {
    delete e;
    return;
  }
  // Inside one of e's callbacks: ~Elector waits for the callback's thread,
  // so it runs on another one (it resigns, waits, then joins).
  try {
    std::thread([e] { delete e; }).detach();
  } catch (...) {
    // No thread to be had: leaving the elector alive is the only safe
    // choice (its lease expires by its TTL once the process ends).
  }
}

const char* baton_leader_label(const baton_leader_t* l) {
  return l ? l->info.label.c_str() : nullptr;
}
uint64_t baton_leader_fencing_token(const baton_leader_t* l) {
  return l ? l->info.fencing_token : 0;
}
int64_t baton_leader_time_left_ms(const baton_leader_t* l) {
  return l ? l->info.time_left.count() : 0;
}
void baton_leader_destroy(baton_leader_t* l) { delete l; }

}  // extern "C"
