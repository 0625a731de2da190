// capi/options.cc — the option objects of <baton/baton.h>. Each setter
// checks its value with the same rules as the calls (<baton/validate.h>)
// and leaves the object unchanged when it refuses one.
#include <chrono>
#include <string>

#include "baton/lease.h"
#include "baton/validate.h"
#include "capi/handles.h"

using baton::capi::guarded;
using baton::capi::invalid;
using baton::capi::require;
using std::chrono::milliseconds;

namespace {

// The label rules (<= 256 bytes); NULL means "".
baton_error_t* set_label(std::string& field, const char* label) {
  const std::string value = label ? label : "";
  if (auto* e = baton::capi::from_status(baton::validate_label(value))) {
    return e;
  }
  field = value;
  return nullptr;
}

baton_error_t* not_negative(const char* what, std::int64_t ms) {
  if (ms >= 0) return nullptr;
  return invalid(std::string(what) + " " + std::to_string(ms) +
                 "ms must not be negative");
}

baton_error_t* set_ttl(milliseconds& field, std::int64_t ms) {
  if (auto* e =
          baton::capi::from_status(baton::validate_ttl(milliseconds(ms)))) {
    return e;
  }
  field = milliseconds(ms);
  return nullptr;
}

baton_error_t* set_sink(baton_lost_sink& sink, baton_lost_fn fn, void* user) {
  sink.fn = fn;
  sink.user = fn ? user : nullptr;
  return nullptr;
}

baton_error_t* set_sink_fd(baton_lost_sink& sink, int fd) {
  if (auto* e = baton::capi::check_fd(fd)) return e;
  sink.fd = fd;
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
  return guarded([&]() -> baton_error_t* {
    if (auto* e = require(o, "options")) return e;
    return set_label(o->options.label, label);
  });
}

baton_error_t* baton_client_options_set_request_timeout(
    baton_client_options_t* o, int64_t ms) {
  return guarded([&]() -> baton_error_t* {
    if (auto* e = require(o, "options")) return e;
    if (ms <= 0) {
      return invalid("request_timeout " + std::to_string(ms) +
                     "ms must be positive");
    }
    o->options.request_timeout = milliseconds(ms);
    return nullptr;
  });
}

baton_error_t* baton_client_options_set_retry_interval(
    baton_client_options_t* o, int64_t ms) {
  return guarded([&]() -> baton_error_t* {
    if (auto* e = require(o, "options")) return e;
    if (auto* e = not_negative("retry_interval", ms)) return e;
    o->options.retry_interval = milliseconds(ms);
    return nullptr;
  });
}

baton_error_t* baton_client_options_set_max_retries(baton_client_options_t* o,
                                                    int retries) {
  return guarded([&]() -> baton_error_t* {
    if (auto* e = require(o, "options")) return e;
    if (retries < 0) {
      return invalid("max_retries " + std::to_string(retries) +
                     " must not be negative");
    }
    o->options.max_retries = retries;
    return nullptr;
  });
}

baton_error_t* baton_client_options_set_drift(baton_client_options_t* o,
                                              double factor, int64_t floor_ms) {
  return guarded([&]() -> baton_error_t* {
    if (auto* e = require(o, "options")) return e;
    if (!(factor >= 0.0 && factor < 0.5)) {
      return invalid("drift_factor " + std::to_string(factor) +
                     " is out of range [0, 0.5)");
    }
    if (auto* e = not_negative("drift_floor", floor_ms)) return e;
    o->options.drift_factor = factor;
    o->options.drift_floor = milliseconds(floor_ms);
    return nullptr;
  });
}

baton_acquire_options_t* baton_acquire_options_new(void) {
  return new (std::nothrow) baton_acquire_options;
}
void baton_acquire_options_destroy(baton_acquire_options_t* o) { delete o; }

baton_error_t* baton_acquire_options_set_ttl(baton_acquire_options_t* o,
                                             int64_t ms) {
  return guarded([&]() -> baton_error_t* {
    if (auto* e = require(o, "options")) return e;
    return set_ttl(o->options.ttl, ms);
  });
}

baton_error_t* baton_acquire_options_set_capacity(baton_acquire_options_t* o,
                                                  uint32_t capacity) {
  return guarded([&]() -> baton_error_t* {
    if (auto* e = require(o, "options")) return e;
    if (auto* e =
            baton::capi::from_status(baton::validate_capacity(capacity))) {
      return e;
    }
    o->options.capacity = capacity;
    return nullptr;
  });
}

baton_error_t* baton_acquire_options_set_label(baton_acquire_options_t* o,
                                               const char* label) {
  return guarded([&]() -> baton_error_t* {
    if (auto* e = require(o, "options")) return e;
    return set_label(o->options.label, label);
  });
}

baton_error_t* baton_acquire_options_set_reentrancy_key(
    baton_acquire_options_t* o, const char* key) {
  return guarded([&]() -> baton_error_t* {
    if (auto* e = require(o, "options")) return e;
    o->options.reentrancy_key = key ? key : "";
    return nullptr;
  });
}

baton_error_t* baton_acquire_options_set_token(baton_acquire_options_t* o,
                                               const char* hex) {
  return guarded([&]() -> baton_error_t* {
    if (auto* e = require(o, "options")) return e;
    if (!hex) {
      o->options.token.reset();
      return nullptr;
    }
    auto token = baton::OwnerToken::parse(hex);
    if (!token.ok()) return baton::capi::make_error(std::move(token).error());
    o->options.token = *token;
    return nullptr;
  });
}

baton_keeper_options_t* baton_keeper_options_new(void) {
  return new (std::nothrow) baton_keeper_options;
}
void baton_keeper_options_destroy(baton_keeper_options_t* o) { delete o; }

baton_error_t* baton_keeper_options_set_renew_interval(
    baton_keeper_options_t* o, int64_t ms) {
  return guarded([&]() -> baton_error_t* {
    if (auto* e = require(o, "options")) return e;
    if (auto* e = not_negative("renew_interval", ms)) return e;
    o->renew_interval = milliseconds(ms);
    return nullptr;
  });
}

baton_error_t* baton_keeper_options_set_on_lost(baton_keeper_options_t* o,
                                                baton_lost_fn fn, void* user) {
  if (auto* e = require(o, "options")) return e;
  return set_sink(o->on_lost, fn, user);
}

baton_error_t* baton_keeper_options_set_lost_fd(baton_keeper_options_t* o,
                                                int fd) {
  if (auto* e = require(o, "options")) return e;
  return set_sink_fd(o->on_lost, fd);
}

baton_elector_options_t* baton_elector_options_new(void) {
  return new (std::nothrow) baton_elector_options;
}
void baton_elector_options_destroy(baton_elector_options_t* o) { delete o; }

baton_error_t* baton_elector_options_set_ttl(baton_elector_options_t* o,
                                             int64_t ms) {
  return guarded([&]() -> baton_error_t* {
    if (auto* e = require(o, "options")) return e;
    return set_ttl(o->options.ttl, ms);
  });
}

baton_error_t* baton_elector_options_set_retry_interval(
    baton_elector_options_t* o, int64_t ms) {
  return guarded([&]() -> baton_error_t* {
    if (auto* e = require(o, "options")) return e;
    if (auto* e = not_negative("retry_interval", ms)) return e;
    o->options.retry_interval = milliseconds(ms);
    return nullptr;
  });
}

baton_error_t* baton_elector_options_set_label(baton_elector_options_t* o,
                                               const char* label) {
  return guarded([&]() -> baton_error_t* {
    if (auto* e = require(o, "options")) return e;
    return set_label(o->options.label, label);
  });
}

baton_error_t* baton_elector_options_set_on_elected(baton_elector_options_t* o,
                                                    baton_elected_fn fn,
                                                    void* user) {
  if (auto* e = require(o, "options")) return e;
  o->on_elected = fn;
  o->on_elected_user = fn ? user : nullptr;
  return nullptr;
}

baton_error_t* baton_elector_options_set_on_new_leader(
    baton_elector_options_t* o, baton_leader_fn fn, void* user) {
  if (auto* e = require(o, "options")) return e;
  o->on_new_leader = fn;
  o->on_new_leader_user = fn ? user : nullptr;
  return nullptr;
}

baton_error_t* baton_elector_options_set_on_lost(baton_elector_options_t* o,
                                                 baton_lost_fn fn, void* user) {
  if (auto* e = require(o, "options")) return e;
  return set_sink(o->on_lost, fn, user);
}

baton_error_t* baton_elector_options_set_lost_fd(baton_elector_options_t* o,
                                                 int fd) {
  if (auto* e = require(o, "options")) return e;
  return set_sink_fd(o->on_lost, fd);
}

}  // extern "C"
