// client/counter.cc — baton::Counter: one atomic store operation per call.
#include "baton/counter.h"

#include <chrono>
#include <string>

#include "client/client_impl.h"
#include "core/validate.h"

namespace baton {
namespace {

Status check(const Client::Impl& impl, const std::string& name) {
  if (!impl.options_status.ok()) return impl.options_status;
  return core::validate_name(name, "counter name");
}

}  // namespace

Result<std::int64_t> Counter::get() const {
  const Client::Impl& impl = client_internal::impl_of(client_);
  if (Status st = check(impl, name_); !st.ok()) return st.error();
  return client_internal::bounded_call(impl, [&](const CallContext& ctx) {
    return impl.store->counter_get(name_, ctx);
  });
}

// Note: a retried add whose first reply was lost may apply twice; counters
// have no request id. Only `unavailable` before sending is retried safely,
// so add and take are not retried.
Result<std::int64_t> Counter::add(std::int64_t delta) const {
  const Client::Impl& impl = client_internal::impl_of(client_);
  if (Status st = check(impl, name_); !st.ok()) return st.error();
  return client_internal::bounded_call(
      impl,
      [&](const CallContext& ctx) {
        return impl.store->counter_add(name_, delta, ctx);
      },
      false);
}

Result<std::int64_t> Counter::take(std::int64_t n) const {
  const Client::Impl& impl = client_internal::impl_of(client_);
  if (Status st = check(impl, name_); !st.ok()) return st.error();
  if (n < 1) {
    return Error(Errc::invalid_argument,
                 "take(" + std::to_string(n) + "): n must be at least 1");
  }
  return client_internal::bounded_call(
      impl,
      [&](const CallContext& ctx) {
        return impl.store->counter_take(name_, n, ctx);
      },
      false);
}

}  // namespace baton
