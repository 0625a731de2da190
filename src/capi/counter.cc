// capi/counter.cc — baton_counter_t: an atomic counter beside the locks.
#include "baton/counter.h"

#include <string>

#include "baton/validate.h"
#include "capi/handles.h"

using baton::capi::guarded;
using baton::capi::require;

namespace {

// The value of `r` into *value (may be NULL), or its error.
baton_error_t* deliver_value(baton::Result<std::int64_t>&& r,
                             std::int64_t* value) {
  if (!r.ok()) return baton::capi::make_error(std::move(r).error());
  if (value) *value = *r;
  return nullptr;
}

baton_error_t* begin_value(const baton_counter_t* c, std::int64_t* value) {
  if (value) *value = 0;
  return baton::capi::begin(c, "counter");
}

}  // namespace

extern "C" {

baton_error_t* baton_counter_new(baton_client_t* client, const char* name,
                                 baton_counter_t** out) {
  return guarded([&]() -> baton_error_t* {
    if (auto* e = baton::capi::begin(client, "client", out)) return e;
    if (auto* e = baton::capi::check_name(name, "counter name")) return e;
    *out = new baton_counter(client->client.counter(name), client->pid);
    return nullptr;
  });
}

const char* baton_counter_name(const baton_counter_t* c) {
  return c ? c->counter.name().c_str() : nullptr;
}

baton_error_t* baton_counter_get(baton_counter_t* c, int64_t* value) {
  return guarded([&]() -> baton_error_t* {
    if (auto* e = begin_value(c, value)) return e;
    if (auto* e = require(value, "value")) return e;
    return deliver_value(c->counter.get(), value);
  });
}

baton_error_t* baton_counter_add(baton_counter_t* c, int64_t delta,
                                 int64_t* value) {
  return guarded([&]() -> baton_error_t* {
    if (auto* e = begin_value(c, value)) return e;
    return deliver_value(c->counter.add(delta), value);
  });
}

baton_error_t* baton_counter_take(baton_counter_t* c, int64_t n,
                                  int64_t* value) {
  return guarded([&]() -> baton_error_t* {
    if (auto* e = begin_value(c, value)) return e;
    return deliver_value(c->counter.take(n), value);
  });
}

void baton_counter_destroy(baton_counter_t* c) {
  if (c && !baton::capi::forked(c->pid)) delete c;
}

}  // extern "C"
