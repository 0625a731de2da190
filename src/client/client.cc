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
#include "client/cancel.h"
#include "client/client_impl.h"
#include "client/session_core.h"
#include "client/settle.h"
#include "core/duration.h"
#include "core/request.h"
#include "core/validate.h"
#include "stores/call_deadline.h"
#include "stores/registry.h"

namespace baton {
namespace {

using client_internal::with_retry;
using std::chrono::milliseconds;
using std::chrono::steady_clock;

// Waits at least this long count as "forever".
using core::kForeverWait;

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

// The instant a wait of `wait` from `start` ends (max() = never).
steady_clock::time_point wait_end(steady_clock::time_point start,
                                  milliseconds wait) {
  if (wait >= kForeverWait) return steady_clock::time_point::max();
  return start + wait;
}

// What is left of a wait ending at `end`, as one store call may wait it:
// stores accept waits of at most kMaxTtl (7 days); longer waits ("forever")
// are made of several store calls with the same owner token.
milliseconds remaining(steady_clock::time_point end) {
  const auto now = steady_clock::now();
  if (now >= end) return milliseconds::zero();
  if (end - now >= kMaxTtl) return kMaxTtl;
  return std::chrono::ceil<milliseconds>(end - now);
}

// Calls `attempt(wait, sent)` with what is left of a wait ending at `end`
// (or 0 for a try), again after a `timeout` while the wait is not over.
// `sent` is the local time (on the client's clock) just before each store
// call (rule 14).
template <typename F>
auto wait_until(const Client::Impl& impl, steady_clock::time_point end,
                bool is_try, F attempt) {
  for (;;) {
    const auto sent = impl.clock->now();
    auto r = attempt(is_try ? milliseconds::zero() : remaining(end), sent);
    if (is_try || r.ok() || r.error().code() != Errc::timeout ||
        steady_clock::now() >= end) {
      return r;
    }
  }
}

constexpr auto kNoDeadline = steady_clock::time_point::max();

// Rule 7: a blocking acquire returns at most this long after its wait ends.
// The store is asked to wait until the end; the grace covers the reply's
// trip back. Past it, the store call gives up (stores/call_deadline.h).
constexpr milliseconds kReplyGrace{50};

// The call deadline of an acquire ending at `end`: a try answers within
// request_timeout; a blocking acquire within its wait plus the reply's
// trip; a wait without end has none.
steady_clock::time_point call_deadline_for(const Client::Impl& impl,
                                           steady_clock::time_point end,
                                           bool is_try) {
  if (is_try) return steady_clock::now() + impl.options.request_timeout;
  if (end == kNoDeadline) return kNoDeadline;
  return end + kReplyGrace;
}

// An acquire that gave up at its call deadline may still have been queued
// or granted by the store: withdraw it by owner token in the background
// (client/settle.h), so that the caller's answer is not delayed by a store
// that is slow or gone. A try cut short answers `unavailable` (the store
// did not answer), a blocking acquire `timeout` (its wait is over).
template <typename R>
void settle_abandoned(const Client::Impl& impl, R& result, bool is_try,
                      std::vector<std::string> names, const OwnerToken& token) {
  if (result.ok() || !store::call_deadline_passed()) return;
  const Errc code = result.error().code();
  if (code != Errc::timeout && code != Errc::unavailable) return;
  if (is_try) result = client_internal::no_answer(impl, result.error());
  impl.settler->withdraw(impl.store, std::move(names), token);
}

// Gives back what a cancelled call was granted meanwhile.
void give_back(const Client::Impl& impl, const std::vector<Lease>& leases) {
  for (const Lease& l : leases) {
    (void)client_internal::bounded_call(
        impl, [&] { return impl.store->release(l.name, l.token); });
  }
}
void give_back(const Client::Impl& impl, const Lease& lease) {
  give_back(impl, std::vector<Lease>{lease});
}

// One acquire call: `attempt(wait, sent)` under the call deadline, retried
// after `unavailable` and, for a blocking acquire, after a store call's
// `timeout` while the wait goes on; then an abandoned request is withdrawn
// by `token` (read after the call: an attempt may have replaced it). A stop
// requested on `stop` (client/cancel.h) withdraws the request and answers
// `cancelled`.
template <typename F>
auto run_acquire(const Client::Impl& impl, milliseconds wait,
                 const std::vector<std::string>& names, const OwnerToken& token,
                 const std::stop_token& stop, F attempt) {
  using R = decltype(attempt(milliseconds{}, Clock::time_point{}));
  if (stop.stop_requested()) return R(client_internal::cancelled_error(names));
  // A repeat of an abandoned call (rule 17) must not be withdrawn.
  impl.settler->claim(token);
  const auto end = wait_end(steady_clock::now(), wait);
  const bool is_try = wait == milliseconds::zero();
  const auto call_deadline = call_deadline_for(impl, end, is_try);
  const store::CallDeadlineScope scope(call_deadline);
  client_internal::Canceller cancel(impl.store, impl.options.request_timeout,
                                    is_try ? std::stop_token{} : stop, names,
                                    token);
  auto guarded = [&](milliseconds w, Clock::time_point sent) -> R {
    if (cancel.requested()) return R(client_internal::cancelled_error(names));
    cancel.set_token(token);  // an attempt may have replaced it
    return attempt(w, sent);
  };
  auto r = with_retry(impl, is_try ? call_deadline : end,
                      [&] { return wait_until(impl, end, is_try, guarded); });
  cancel.finish();
  if (cancel.requested()) {
    if (r.ok()) give_back(impl, *r);
    // The helper's last release may have come before the request was
    // queued: one more, now that the call has returned.
    for (const auto& n : names) {
      (void)client_internal::bounded_call(
          impl, [&] { return impl.store->release(n, token); });
    }
    return R(client_internal::cancelled_error(names));
  }
  settle_abandoned(impl, r, is_try, names, token);
  return r;
}

}  // namespace

std::chrono::nanoseconds Client::Impl::drift(milliseconds ttl) const {
  const auto scaled = std::chrono::duration_cast<std::chrono::nanoseconds>(
      std::chrono::duration<double, std::nano>(
          static_cast<double>(std::chrono::nanoseconds(ttl).count()) *
          options.drift_factor));
  return scaled + options.drift_floor;
}

Lease Client::Impl::make_lease(const store::Grant& g,
                               Clock::time_point sent) const {
  Lease l;
  l.name = g.name;
  l.token = g.token;
  l.fencing_token = g.fencing_token;
  l.ttl = g.ttl;
  l.holds = g.holds;
  l.capacity = g.capacity;
  l.shared = g.shared;
  l.local_deadline =
      sent + std::chrono::duration_cast<steady_clock::duration>(g.valid_for) -
      std::chrono::duration_cast<steady_clock::duration>(drift(g.ttl));
  l.store_expires_at_ms = g.store_expires_at_ms;
  return l;
}

milliseconds Client::Impl::backoff(int attempt) const {
  const milliseconds cap{2000};
  milliseconds base = std::max(options.retry_interval, milliseconds{1});
  for (int i = 1; i < attempt && base < cap; ++i) base *= 2;
  base = std::min(base, cap);
  thread_local std::mt19937_64 rng{std::random_device{}()};
  std::uniform_int_distribution<long long> dist(base.count() / 2, base.count());
  return milliseconds{dist(rng)};
}

Result<Client> Client::open(std::string_view url, ClientOptions options) {
  if (Status st = validate_options(options); !st.ok()) return st.error();
  auto store = store::open_store(url);
  if (!store.ok()) return std::move(store).error();
  return wrap(std::shared_ptr<store::Store>(std::move(*store)),
              std::move(options));
}

Client Client::wrap(std::shared_ptr<store::Store> store,
                    ClientOptions options) {
  auto impl = std::make_shared<Impl>();
  impl->options_status = validate_options(options);
  if (impl->options_status.ok() && !store) {
    impl->options_status = Error(Errc::invalid_argument, "store is null");
  }
  impl->label = options.label.empty() ? default_label() : options.label;
  impl->clock = options.clock ? options.clock : Clock::steady();
  impl->store = std::move(store);
  impl->settler =
      std::make_shared<client_internal::Settler>(options.request_timeout);
  impl->options = std::move(options);
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
  store::AcquireSpec spec;
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
  return run_acquire(
      impl, wait, {spec.name}, spec.token, options.stop,
      [&](milliseconds w, Clock::time_point sent) -> Result<Lease> {
        auto g = impl.store->acquire(spec, w);
        if (!g.ok()) return std::move(g).error();
        Lease l = impl.make_lease(*g, sent);
        if (l.local_deadline > impl.clock->now()) return l;
        // The grant arrived after its safe deadline (a reply delayed longer
        // than the TTL): never hand out a lease that is already over
        // (rule 14). Give it back; that lease has ended, so a further
        // attempt within the wait is a new request with a new owner token
        // (stores refuse an ended token, rule 17).
        (void)impl.store->release(spec.name, spec.token);
        spec.token = OwnerToken::random();
        return Error(Errc::timeout,
                     "the grant of \"" + spec.name +
                         "\" arrived after its safe deadline (the store's "
                         "reply took longer than the TTL)");
      });
}

}  // namespace

Result<Lease> Client::extend(const Lease& lease, milliseconds ttl) const {
  const Impl& impl = *impl_;
  return client_internal::extend_until(
      impl, lease, ttl, impl.clock->now() + impl.options.request_timeout);
}

namespace client_internal {

Error no_answer(const Client::Impl& impl, const Error& cause) {
  return Error(Errc::unavailable,
               "no answer from " + impl.store->safe_url() + " within " +
                   core::format_duration(impl.options.request_timeout) + ": " +
                   cause.message());
}

Result<Lease> extend_until(const Client::Impl& impl, const Lease& lease,
                           milliseconds ttl, Clock::time_point deadline) {
  if (!impl.options_status.ok()) return impl.options_status.error();
  if (Status st = core::validate_lease_call(lease.name, lease.token, ttl);
      !st.ok()) {
    return st.error();
  }
  // `deadline` is on the client's clock; store I/O waits on the steady one.
  const auto steady_deadline =
      steady_clock::now() + std::max(Clock::time_point::duration::zero(),
                                     deadline - impl.clock->now());
  const store::CallDeadlineScope scope(steady_deadline);
  auto r = with_retry(impl, steady_deadline, [&]() -> Result<Lease> {
    const auto sent = impl.clock->now();
    auto g = impl.store->extend(lease.name, lease.token, ttl);
    if (!g.ok()) return std::move(g).error();
    Lease l = impl.make_lease(*g, sent);
    // A grant's fencing token is fixed when it is granted: an extend never
    // changes it, even where a store reports another one (a Redlock
    // instance that re-granted the lease after a restart; torture seed
    // 14057 saw that token reused by the next grant). (0: a Lease built by
    // hand, token not known.)
    if (lease.fencing_token != 0) l.fencing_token = lease.fencing_token;
    l.shared = l.shared || lease.shared;  // an extend never changes the mode
    return l;
  });
  return cut_short(impl, std::move(r));
}

}  // namespace client_internal

Result<bool> Client::release(const Lease& lease) const {
  const Impl& impl = *impl_;
  if (!impl.options_status.ok()) return impl.options_status.error();
  if (Status st = core::validate_lease_call(lease.name, lease.token);
      !st.ok()) {
    return st.error();
  }
  return client_internal::bounded_call(impl, [&]() -> Result<bool> {
    auto r = impl.store->release(lease.name, lease.token);
    if (!r.ok()) return std::move(r).error();
    return r->was_held;
  });
}

Result<LockInfo> Client::describe(std::string_view name) const {
  const Impl& impl = *impl_;
  if (!impl.options_status.ok()) return impl.options_status.error();
  if (Status st = core::validate_name(name); !st.ok()) return st.error();
  return client_internal::bounded_call(
      impl, [&] { return impl.store->describe(name); });
}

Result<std::vector<LockInfo>> Client::list(std::string_view prefix,
                                           std::size_t limit) const {
  const Impl& impl = *impl_;
  if (!impl.options_status.ok()) return impl.options_status.error();
  if (!prefix.empty()) {
    if (Status st = core::validate_name(prefix, "name prefix"); !st.ok()) {
      return st.error();
    }
  }
  if (limit == 0) {
    return Error(Errc::invalid_argument, "list limit must be at least 1");
  }
  return client_internal::bounded_call(
      impl, [&] { return impl.store->list(prefix, limit); });
}

namespace {

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
  store::MultiSpec spec;
  spec.names = names;
  spec.reservation = reservation;
  spec.ttl = options.ttl;
  spec.capacity = options.capacity;
  spec.label = options.label.empty() ? impl.label : options.label;
  spec.all_or_nothing = all_or_nothing;
  if (Status st = core::validate(spec, wait); !st.ok()) return st.error();
  return run_acquire(impl, wait, spec.names, spec.reservation, options.stop,
                     [&](milliseconds w,
                         Clock::time_point sent) -> Result<std::vector<Lease>> {
                       auto gs = impl.store->acquire_multi(spec, w);
                       if (!gs.ok()) return std::move(gs).error();
                       std::vector<Lease> out;
                       out.reserve(gs->size());
                       bool late = false;
                       for (const auto& g : *gs) {
                         out.push_back(impl.make_lease(g, sent));
                         late |= out.back().local_deadline <= impl.clock->now();
                       }
                       if (!late) return out;
                       // As in acquire: never hand out a lease that is
                       // already over (rule 14; torture checker 3 saw
                       // acquire_all return one on a loaded machine).
                       // Give back the whole answer: a partial grant of
                       // acquire_all is no grant.
                       for (const Lease& l : out) {
                         (void)impl.store->release(l.name, l.token);
                       }
                       return Error(Errc::timeout,
                                    "a grant arrived after its safe "
                                    "deadline (the store's reply took "
                                    "longer than the TTL); all were given "
                                    "back");
                     });
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
    core = std::make_shared<SessionCore>(client);
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
