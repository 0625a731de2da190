// client/client.cc — baton::Client: validation, retries, safe deadlines.
#include "baton/client.h"

#include <errno.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <random>
#include <string>
#include <thread>
#include <utility>

#include "baton/counter.h"
#include "baton/store_descriptor.h"
#include "client/client_impl.h"
#include "client/events.h"
#include "client/session_core.h"
#include "core/duration.h"
#include "core/request.h"
#include "core/validate.h"

namespace baton {
namespace {

using std::chrono::milliseconds;

std::string default_label() {
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
  std::string label = std::string(host[0] ? host : "unknown") + ":" +
                      std::to_string(getpid()) + ":" +
                      program_invocation_short_name;
  for (char& c : label) {
    if (c == '\0') c = '?';
  }
  if (label.size() > kMaxLabelBytes) label.resize(kMaxLabelBytes);
  return label;
}

Status validate_options(const ClientOptions& o) {
  if (Status st = core::validate_label(o.label); !st.ok()) return st;
  if (o.request_timeout <= milliseconds::zero()) {
    return Error(Errc::invalid_argument,
                 "request_timeout " +
                     std::to_string(o.request_timeout.count()) +
                     "ms must be positive");
  }
  if (o.retry_interval < milliseconds::zero()) {
    return Error(Errc::invalid_argument,
                 "retry_interval " + std::to_string(o.retry_interval.count()) +
                     "ms must not be negative");
  }
  if (o.max_retries < 0) {
    return Error(Errc::invalid_argument, "max_retries " +
                                             std::to_string(o.max_retries) +
                                             " must not be negative");
  }
  if (!(o.drift_factor >= 0.0 && o.drift_factor < 0.5)) {
    return Error(Errc::invalid_argument, "drift_factor " +
                                             std::to_string(o.drift_factor) +
                                             " is out of range [0, 0.5)");
  }
  if (o.drift_floor < milliseconds::zero()) {
    return Error(Errc::invalid_argument,
                 "drift_floor " + std::to_string(o.drift_floor.count()) +
                     "ms must not be negative");
  }
  return {};
}

}  // namespace

std::chrono::nanoseconds Client::Impl::drift(milliseconds ttl) const {
  const auto scaled = std::chrono::duration_cast<std::chrono::nanoseconds>(
      std::chrono::duration<double, std::nano>(
          static_cast<double>(std::chrono::nanoseconds(ttl).count()) *
          options.drift_factor));
  return scaled + options.drift_floor;
}

Lease Client::Impl::make_lease(const Grant& g, Clock::time_point sent) const {
  Lease l;
  l.name = g.name;
  l.token = g.token;
  l.fencing_token = g.fencing_token;
  l.ttl = g.ttl;
  l.holds = g.holds;
  l.capacity = g.capacity;
  l.shared = g.shared;
  l.local_deadline =
      sent +
      std::chrono::duration_cast<Clock::time_point::duration>(g.valid_for) -
      std::chrono::duration_cast<Clock::time_point::duration>(drift(g.ttl));
  l.store_expires_at_ms = g.store_expires_at_ms;
  return l;
}

Result<Client> Client::open(std::string_view url, ClientOptions options) {
  if (Status st = validate_options(options); !st.ok()) return st.error();
  auto store = open_store(url);
  if (!store.ok()) return std::move(store).error();
  return wrap(std::shared_ptr<Store>(std::move(*store)), std::move(options));
}

Client Client::wrap(std::shared_ptr<Store> store, ClientOptions options) {
  auto impl = std::make_shared<Impl>();
  impl->options_status = validate_options(options);
  if (impl->options_status.ok() && !store) {
    impl->options_status = Error(Errc::invalid_argument, "store is null");
  }
  impl->label = options.label.empty() ? default_label() : options.label;
  impl->clock = options.clock ? options.clock : Clock::steady();
  impl->store = std::move(store);
  impl->options = std::move(options);
  engine::Policy policy;
  policy.clock = impl->clock;
  policy.request_timeout = impl->options.request_timeout;
  policy.retry_interval = impl->options.retry_interval;
  policy.max_retries = impl->options.max_retries;
  // A grant is handed out only while its local safe deadline is ahead
  // (rule 14). The engine is owned by the Impl, so the pointer outlives it.
  const Impl* self = impl.get();
  policy.fresh = [self](const Grant& g, Clock::time_point sent) {
    return self->make_lease(g, sent).local_deadline > self->clock->now();
  };
  if (impl->store) {
    impl->engine =
        std::make_unique<engine::Engine>(impl->store, std::move(policy));
  }
  return Client(std::move(impl));
}

namespace {
// acquire (shared = false) and acquire_shared (rule 18).
Result<Lease> acquire_mode(const Client::Impl& impl, std::string_view name,
                           milliseconds wait, const AcquireOptions& options,
                           bool shared);
}  // namespace

Result<Lease> Client::try_acquire(std::string_view name,
                                  const AcquireOptions& options) const {
  return acquire(name, milliseconds::zero(), options);
}

Result<Lease> Client::acquire(std::string_view name, milliseconds wait,
                              const AcquireOptions& options) const {
  return acquire_mode(*impl_, name, wait, options, false);
}

Result<Lease> Client::acquire_shared(std::string_view name, milliseconds wait,
                                     const AcquireOptions& options) const {
  return acquire_mode(*impl_, name, wait, options, true);
}

namespace {

Result<Lease> acquire_mode(const Client::Impl& impl, std::string_view name,
                           milliseconds wait, const AcquireOptions& options,
                           bool shared) {
  if (!impl.options_status.ok()) return impl.options_status.error();
  AcquireSpec spec;
  spec.name = std::string(name);
  spec.token = options.token ? *options.token : OwnerToken::random();
  spec.ttl = options.ttl;
  spec.capacity = options.capacity;
  spec.label = options.label.empty() ? impl.label : options.label;
  spec.reentrancy_key = options.reentrancy_key;
  spec.shared = shared;
  if (Status st = core::validate(spec, wait); !st.ok()) return st.error();
  if (shared && !impl.store->supports_shared()) {
    return Error(Errc::unsupported,
                 "shared mode (acquire_shared) is not "
                 "supported by the store " +
                     impl.store->safe_url());
  }
  // Events (client/events.h): the clock is read for them only with an
  // observer; bad input refused above fires none.
  const auto& observer = impl.options.observer;
  const auto start = observer ? impl.clock->now() : Clock::time_point{};
  auto r =
      impl.engine->acquire(std::move(spec), wait, options.stop,
                           client_internal::wait_hook(observer, name, shared));
  if (!r.ok()) {
    if (observer) {
      client_internal::acquire_failed(
          observer, name, shared, r.error(),
          client_internal::since(*impl.clock, start));
    }
    return std::move(r).error();
  }
  Lease lease = impl.make_lease(r->grant, r->sent);
  lease.granted_at = impl.clock->now();
  if (observer) {
    client_internal::granted(observer, lease,
                             client_internal::since(*impl.clock, start));
  }
  return lease;
}

}  // namespace

Result<Lease> Client::extend(const Lease& lease, milliseconds ttl) const {
  const Impl& impl = *impl_;
  if (!impl.options_status.ok()) return impl.options_status.error();
  if (Status st = core::validate_lease_call(lease.name, lease.token, ttl);
      !st.ok()) {
    return st.error();  // bad input: no event
  }
  auto r = client_internal::extend_until(
      impl, lease, ttl, impl.clock->now() + impl.options.request_timeout);
  const auto& observer = impl.options.observer;
  if (!observer) return r;
  if (r.ok()) {
    client_internal::renewed(observer, *r);
  } else if (r.error().code() == Errc::lock_lost) {
    client_internal::lost(
        observer, lease, r.error(), LostReason::store_said,
        client_internal::since(*impl.clock, lease.granted_at));
  } else {
    client_internal::renewal_failed(observer, lease, r.error(),
                                    r.error().retryable());
  }
  return r;
}

namespace client_internal {

Result<Lease> extend_until(const Client::Impl& impl, const Lease& lease,
                           milliseconds ttl, Clock::time_point deadline) {
  if (!impl.options_status.ok()) return impl.options_status.error();
  if (Status st = core::validate_lease_call(lease.name, lease.token, ttl);
      !st.ok()) {
    return st.error();
  }
  return impl.engine->call(
      [&](const CallContext& ctx) -> Result<Lease> {
        const auto sent = impl.clock->now();
        auto g = impl.store->extend(lease.name, lease.token, ttl, ctx);
        if (!g.ok()) return std::move(g).error();
        Lease l = impl.make_lease(*g, sent);
        // A grant's fencing token is fixed when it is granted: an extend
        // never changes it, even where a store reports another one (a
        // Redlock instance that re-granted the lease after a restart
        // reports a token the next grant may reuse). (0: a Lease built by
        // hand, token not known.)
        if (lease.fencing_token != 0) l.fencing_token = lease.fencing_token;
        l.shared = l.shared || lease.shared;  // an extend never changes mode
        l.granted_at = lease.granted_at;      // hold times count from it
        return l;
      },
      true, deadline);
}

Result<bool> release_quietly(const Client::Impl& impl, const Lease& lease) {
  if (!impl.options_status.ok()) return impl.options_status.error();
  if (Status st = core::validate_lease_call(lease.name, lease.token);
      !st.ok()) {
    return st.error();
  }
  return bounded_call(impl, [&](const CallContext& ctx) -> Result<bool> {
    auto r = impl.store->release(lease.name, lease.token, ctx);
    if (!r.ok()) return std::move(r).error();
    return r->was_held;
  });
}

}  // namespace client_internal

Result<bool> Client::release(const Lease& lease) const {
  const Impl& impl = *impl_;
  auto r = client_internal::release_quietly(impl, lease);
  // Only a hold given back is an event: false (nothing held: lost, or
  // released before) and errors are not.
  if (impl.options.observer && r.ok() && *r) {
    client_internal::released(
        impl.options.observer, lease,
        client_internal::since(*impl.clock, lease.granted_at));
  }
  return r;
}

Result<LockInfo> Client::describe(std::string_view name) const {
  const Impl& impl = *impl_;
  if (!impl.options_status.ok()) return impl.options_status.error();
  if (Status st = core::validate_name(name); !st.ok()) return st.error();
  return client_internal::bounded_call(impl, [&](const CallContext& ctx) {
    return impl.store->describe(name, ctx);
  });
}

Result<std::vector<LockInfo>> Client::list(std::string_view prefix,
                                           std::size_t limit) const {
  const Impl& impl = *impl_;
  if (!impl.options_status.ok()) return impl.options_status.error();
  if (Status st = core::validate_prefix(prefix); !st.ok()) return st.error();
  if (limit == 0) {
    return Error(Errc::invalid_argument, "list limit must be at least 1");
  }
  return client_internal::bounded_call(impl, [&](const CallContext& ctx) {
    return impl.store->list(prefix, limit, ctx);
  });
}

Result<std::unique_ptr<Waitable>> Client::watch(std::string_view prefix) const {
  const Impl& impl = *impl_;
  if (!impl.options_status.ok()) return impl.options_status.error();
  if (Status st = core::validate_prefix(prefix); !st.ok()) return st.error();
  return client_internal::bounded_call(impl, [&](const CallContext& ctx) {
    return impl.store->watch(prefix, ctx);
  });
}

namespace {

// The events of an acquire_some / acquire_all that answered `leases`: one
// granted per lease, in the answer's order; a name acquire_some did not
// get (its request may stay queued after the call) is not_acquired.
void multi_events(const Client::Impl& impl,
                  const std::vector<std::string>& names,
                  const std::vector<Lease>& leases, milliseconds wait,
                  Clock::time_point start) {
  const auto& observer = impl.options.observer;
  const auto waited = client_internal::since(*impl.clock, start);
  for (const Lease& l : leases) client_internal::granted(observer, l, waited);
  for (const std::string& n : names) {
    const bool got = std::any_of(leases.begin(), leases.end(),
                                 [&](const Lease& l) { return l.name == n; });
    if (got) continue;
    const Error why(
        Errc::not_acquired,
        "lock " + core::quote_name(n) + " was not granted " +
            (wait == milliseconds::zero() ? std::string("at once")
                                          : "within the acquire_some call"));
    client_internal::acquire_failed(observer, n, false, why, waited);
  }
}

Result<std::vector<Lease>> acquire_multi(const Client::Impl& impl,
                                         const std::vector<std::string>& names,
                                         const OwnerToken& reservation,
                                         milliseconds wait,
                                         const AcquireOptions& options,
                                         bool all_or_nothing) {
  if (!impl.options_status.ok()) return impl.options_status.error();
  if (!options.reentrancy_key.empty()) {
    return Error(Errc::invalid_argument,
                 "reentrancy is not supported for multi-lock requests");
  }
  if (options.token && options.token->is_zero()) {
    return Error(Errc::invalid_argument, "owner token is zero");
  }
  MultiSpec spec;
  spec.names = names;
  spec.reservation = reservation;
  spec.ttl = options.ttl;
  spec.capacity = options.capacity;
  spec.label = options.label.empty() ? impl.label : options.label;
  spec.all_or_nothing = all_or_nothing;
  if (Status st = core::validate(spec, wait); !st.ok()) return st.error();
  const auto& observer = impl.options.observer;
  const auto start = observer ? impl.clock->now() : Clock::time_point{};
  engine::WaitHook hook;
  if (observer) {
    hook = [&](std::optional<std::uint64_t>) {
      for (const std::string& n : names) {
        client_internal::emit(observer, [&](Event& e) {
          e.kind = EventKind::wait_started;
          e.lock = n;
        });
      }
    };
  }
  auto r =
      impl.engine->acquire_multi(spec, wait, options.stop, std::move(hook));
  if (!r.ok()) {
    if (observer) {
      const auto waited = client_internal::since(*impl.clock, start);
      for (const std::string& n : names) {
        client_internal::acquire_failed(observer, n, false, r.error(), waited);
      }
    }
    return std::move(r).error();
  }
  std::vector<Lease> out;
  out.reserve(r->size());
  const auto now = impl.clock->now();
  for (const auto& t : *r) {
    out.push_back(impl.make_lease(t.grant, t.sent));
    out.back().granted_at = now;
  }
  if (observer) multi_events(impl, names, out, wait, start);
  return out;
}

}  // namespace

Result<std::vector<Lease>> Client::acquire_some(
    const std::vector<std::string>& names, const OwnerToken& reservation,
    milliseconds wait, const AcquireOptions& options) const {
  return acquire_multi(*impl_, names, reservation, wait, options, false);
}

Result<std::vector<Lease>> Client::acquire_all(
    const std::vector<std::string>& names, milliseconds wait,
    const AcquireOptions& options) const {
  const OwnerToken reservation =
      options.token ? *options.token : OwnerToken::random();
  return acquire_multi(*impl_, names, reservation, wait, options, true);
}

Counter Client::counter(std::string_view name) const {
  return Counter(*this, std::string(name));
}

namespace client_internal {

std::shared_ptr<SessionCore> default_session(const Client& client) {
  const Client::Impl& impl = impl_of(client);
  std::lock_guard<std::mutex> lk(impl.session_mu);
  auto core = impl.default_session.lock();
  if (!core) {
    core = SessionCore::make(client);
    impl.default_session = core;
  }
  return core;
}

}  // namespace client_internal

const ClientOptions& Client::options() const { return impl_->options; }
const std::string& Client::label() const { return impl_->label; }
bool Client::leases_outlive_client() const {
  return !impl_->store || impl_->store->leases_outlive_client();
}
std::string Client::url() const {
  return impl_->store ? impl_->store->safe_url() : std::string();
}

}  // namespace baton
