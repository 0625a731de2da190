// capi/options.cc — the option objects of <baton/baton.h>. Each setter
// checks its value with the same rules as the calls (<baton/validate.h>)
// and leaves the object unchanged when it refuses one.
#include <chrono>
#include <string>

#include "baton/lease.h"
#include "baton/validate.h"
#include "capi/handles.h"

using baton::capi::from_status;
using baton::capi::invalid;
using std::chrono::milliseconds;

namespace {

// A setter: `o` must be given; `apply(*o)` checks the value and stores it,
// or returns the error. No exception leaves.
template <typename O, typename F>
baton_error_t* set(O* o, F&& apply) {
  return baton::capi::guarded([&]() -> baton_error_t* {
    if (auto* e = baton::capi::require(o, "options")) return e;
    return apply(*o);
  });
}

// The label rules (<= 256 bytes); NULL means "".
baton_error_t* set_label(std::string& field, const char* label) {
  const std::string value = label ? label : "";
  if (auto* e = from_status(baton::validate_label(value))) return e;
  field = value;
  return nullptr;
}

// A duration that must not be negative.
baton_error_t* set_interval(milliseconds& field, const char* what,
                            std::int64_t ms) {
  if (ms < 0) {
    return invalid(std::string(what) + " " + std::to_string(ms) +
                   "ms must not be negative");
  }
  field = milliseconds(ms);
  return nullptr;
}

baton_error_t* set_ttl(milliseconds& field, std::int64_t ms) {
  if (auto* e = from_status(baton::validate_ttl(milliseconds(ms)))) return e;
  field = milliseconds(ms);
  return nullptr;
}

baton_error_t* set_sink_fd(baton_lost_sink& sink, int fd) {
  if (auto* e = baton::capi::check_fd(fd)) return e;
  sink.fd = fd;
  return nullptr;
}

// A callback and its user pointer (the pointer is dropped with the
// callback).
template <typename Fn>
baton_error_t* set_callback(Fn& fn_field, void*& user_field, Fn fn,
                            void* user) {
  fn_field = fn;
  user_field = fn ? user : nullptr;
  return nullptr;
}

}  // namespace

extern "C" {

baton_client_options_t* baton_client_options_new(void) {
  return new (std::nothrow) baton_client_options;
}
void baton_client_options_destroy(baton_client_options_t* o) { delete o; }

baton_error_t* baton_client_options_set_label(baton_client_options_t* o,
                                              const char* label) {
  return set(o, [&](auto& x) { return set_label(x.options.label, label); });
}

baton_error_t* baton_client_options_set_request_timeout(
    baton_client_options_t* o, int64_t ms) {
  return set(o, [&](auto& x) -> baton_error_t* {
    if (ms <= 0) {
      return invalid("request_timeout " + std::to_string(ms) +
                     "ms must be positive");
    }
    x.options.request_timeout = milliseconds(ms);
    return nullptr;
  });
}

baton_error_t* baton_client_options_set_retry_interval(
    baton_client_options_t* o, int64_t ms) {
  return set(o, [&](auto& x) {
    return set_interval(x.options.retry_interval, "retry_interval", ms);
  });
}

baton_error_t* baton_client_options_set_max_retries(baton_client_options_t* o,
                                                    int retries) {
  return set(o, [&](auto& x) -> baton_error_t* {
    if (retries < 0) {
      return invalid("max_retries " + std::to_string(retries) +
                     " must not be negative");
    }
    x.options.max_retries = retries;
    return nullptr;
  });
}

baton_error_t* baton_client_options_set_drift(baton_client_options_t* o,
                                              double factor, int64_t floor_ms) {
  return set(o, [&](auto& x) -> baton_error_t* {
    if (!(factor >= 0.0 && factor < 0.5)) {
      return invalid("drift_factor " + std::to_string(factor) +
                     " is out of range [0, 0.5)");
    }
    milliseconds floor;
    if (auto* e = set_interval(floor, "drift_floor", floor_ms)) return e;
    x.options.drift_factor = factor;
    x.options.drift_floor = floor;
    return nullptr;
  });
}

baton_acquire_options_t* baton_acquire_options_new(void) {
  return new (std::nothrow) baton_acquire_options;
}
void baton_acquire_options_destroy(baton_acquire_options_t* o) { delete o; }

baton_error_t* baton_acquire_options_set_ttl(baton_acquire_options_t* o,
                                             int64_t ms) {
  return set(o, [&](auto& x) { return set_ttl(x.options.ttl, ms); });
}

baton_error_t* baton_acquire_options_set_capacity(baton_acquire_options_t* o,
                                                  uint32_t capacity) {
  return set(o, [&](auto& x) -> baton_error_t* {
    if (auto* e = from_status(baton::validate_capacity(capacity))) return e;
    x.options.capacity = capacity;
    return nullptr;
  });
}

baton_error_t* baton_acquire_options_set_label(baton_acquire_options_t* o,
                                               const char* label) {
  return set(o, [&](auto& x) { return set_label(x.options.label, label); });
}

baton_error_t* baton_acquire_options_set_reentrancy_key(
    baton_acquire_options_t* o, const char* key) {
  return set(o, [&](auto& x) -> baton_error_t* {
    x.options.reentrancy_key = key ? key : "";
    return nullptr;
  });
}

baton_error_t* baton_acquire_options_set_token(baton_acquire_options_t* o,
                                               const char* hex) {
  return set(o, [&](auto& x) -> baton_error_t* {
    if (!hex) {
      x.options.token.reset();
      return nullptr;
    }
    auto token = baton::OwnerToken::parse(hex);
    if (!token.ok()) return baton::capi::make_error(std::move(token).error());
    x.options.token = *token;
    return nullptr;
  });
}

baton_keeper_options_t* baton_keeper_options_new(void) {
  return new (std::nothrow) baton_keeper_options;
}
void baton_keeper_options_destroy(baton_keeper_options_t* o) { delete o; }

baton_error_t* baton_keeper_options_set_renew_interval(
    baton_keeper_options_t* o, int64_t ms) {
  return set(o, [&](auto& x) {
    return set_interval(x.renew_interval, "renew_interval", ms);
  });
}

baton_error_t* baton_keeper_options_set_on_lost(baton_keeper_options_t* o,
                                                baton_lost_fn fn, void* user) {
  return set(o, [&](auto& x) {
    return set_callback(x.on_lost.fn, x.on_lost.user, fn, user);
  });
}

baton_error_t* baton_keeper_options_set_lost_fd(baton_keeper_options_t* o,
                                                int fd) {
  return set(o, [&](auto& x) { return set_sink_fd(x.on_lost, fd); });
}

baton_elector_options_t* baton_elector_options_new(void) {
  return new (std::nothrow) baton_elector_options;
}
void baton_elector_options_destroy(baton_elector_options_t* o) { delete o; }

baton_error_t* baton_elector_options_set_ttl(baton_elector_options_t* o,
                                             int64_t ms) {
  return set(o, [&](auto& x) { return set_ttl(x.options.ttl, ms); });
}

baton_error_t* baton_elector_options_set_retry_interval(
    baton_elector_options_t* o, int64_t ms) {
  return set(o, [&](auto& x) {
    return set_interval(x.options.retry_interval, "retry_interval", ms);
  });
}

baton_error_t* baton_elector_options_set_label(baton_elector_options_t* o,
                                               const char* label) {
  return set(o, [&](auto& x) { return set_label(x.options.label, label); });
}

baton_error_t* baton_elector_options_set_on_elected(baton_elector_options_t* o,
                                                    baton_elected_fn fn,
                                                    void* user) {
  return set(o, [&](auto& x) {
    return set_callback(x.on_elected, x.on_elected_user, fn, user);
  });
}

baton_error_t* baton_elector_options_set_on_new_leader(
    baton_elector_options_t* o, baton_leader_fn fn, void* user) {
  return set(o, [&](auto& x) {
    return set_callback(x.on_new_leader, x.on_new_leader_user, fn, user);
  });
}

baton_error_t* baton_elector_options_set_on_lost(baton_elector_options_t* o,
                                                 baton_lost_fn fn, void* user) {
  return set(o, [&](auto& x) {
    return set_callback(x.on_lost.fn, x.on_lost.user, fn, user);
  });
}

baton_error_t* baton_elector_options_set_lost_fd(baton_elector_options_t* o,
                                                 int fd) {
  return set(o, [&](auto& x) { return set_sink_fd(x.on_lost, fd); });
}

}  // extern "C"
