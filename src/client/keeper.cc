// client/keeper.cc — LeaseKeeper and Session: leases kept alive by a
// SessionCore (client/session_core.h).
#include "baton/keeper.h"

#include <algorithm>
#include <utility>

#include "baton/session.h"
#include "client/client_impl.h"
#include "client/session_core.h"

namespace baton {

using client_internal::KeptEntry;
using client_internal::SessionCore;
using std::chrono::milliseconds;
using std::chrono::steady_clock;

struct LeaseKeeper::State {
  std::shared_ptr<SessionCore> core;
  std::shared_ptr<KeptEntry> entry;
  bool released = false;  // touched only by release()/destructor
};

namespace {

Status validate_keeper_options(const KeeperOptions& o) {
  if (o.renew_interval < milliseconds::zero()) {
    return Error(Errc::invalid_argument,
                 "renew_interval " + std::to_string(o.renew_interval.count()) +
                     "ms must not be negative");
  }
  return {};
}

}  // namespace

Result<LeaseKeeper> LeaseKeeper::acquire(const Client& client,
                                         std::string_view name,
                                         milliseconds wait,
                                         const AcquireOptions& acquire_options,
                                         KeeperOptions keeper_options) {
  if (Status st = validate_keeper_options(keeper_options); !st.ok()) {
    return st.error();
  }
  auto lease = wait > milliseconds::zero()
                   ? client.acquire(name, wait, acquire_options)
                   : client.try_acquire(name, acquire_options);
  if (!lease.ok()) return std::move(lease).error();
  return LeaseKeeper(client, std::move(*lease), std::move(keeper_options));
}

Result<LeaseKeeper> LeaseKeeper::acquire_shared(
    const Client& client, std::string_view name, milliseconds wait,
    const AcquireOptions& acquire_options, KeeperOptions keeper_options) {
  if (Status st = validate_keeper_options(keeper_options); !st.ok()) {
    return st.error();
  }
  auto lease = client.acquire_shared(name, wait, acquire_options);
  if (!lease.ok()) return std::move(lease).error();
  return LeaseKeeper(client, std::move(*lease), std::move(keeper_options));
}

LeaseKeeper::LeaseKeeper(Client client, Lease lease, KeeperOptions options)
    : LeaseKeeper(client_internal::default_session(client), std::move(lease),
                  std::move(options)) {}

LeaseKeeper::LeaseKeeper(std::shared_ptr<SessionCore> core, Lease lease,
                         KeeperOptions options)
    : state_(std::make_unique<State>()) {
  // A negative interval is treated as the default (acquire() refuses it).
  state_->entry = core->keep(
      std::move(lease), std::max(options.renew_interval, milliseconds::zero()),
      std::move(options.on_lost), std::move(options.on_renewed));
  state_->core = std::move(core);
}

LeaseKeeper::LeaseKeeper(LeaseKeeper&&) noexcept = default;

LeaseKeeper& LeaseKeeper::operator=(LeaseKeeper&& other) noexcept {
  if (this != &other) {
    if (state_) (void)release();
    state_ = std::move(other.state_);
  }
  return *this;
}

LeaseKeeper::~LeaseKeeper() {
  if (!state_) return;
  try {
    (void)release();
  } catch (...) {
    // Destructors never throw; the lease will expire by itself.
  }
}

Lease LeaseKeeper::lease() const {
  if (!state_) return Lease{};
  return state_->core->lease(*state_->entry);
}

std::uint64_t LeaseKeeper::fencing_token() const {
  return lease().fencing_token;
}

bool LeaseKeeper::lost() const noexcept {
  if (!state_) return true;
  const KeptEntry& e = *state_->entry;
  if (e.cancelled.load()) return true;
  return state_->core->client_clock().now() >= e.safe_deadline();
}

const std::atomic<bool>& LeaseKeeper::cancelled() const noexcept {
  static const std::atomic<bool> kTrue{true};
  return state_ ? state_->entry->cancelled : kTrue;
}

steady_clock::time_point LeaseKeeper::safe_deadline() const {
  if (!state_) return {};
  return state_->entry->safe_deadline();
}

Result<bool> LeaseKeeper::release() {
  if (!state_) return Error(Errc::lock_lost, "the keeper was moved from");
  State& s = *state_;
  if (s.released) return false;
  s.released = true;
  const Lease current = s.core->lease(*s.entry);
  // A lease already declared lost is not asked for again: the session gives
  // it back in the background, and the caller is not held up by a store
  // that may be the reason it was lost.
  if (!s.core->forget(s.entry)) return false;
  return s.core->client().release(current);
}

Result<Lease> LeaseKeeper::detach() {
  if (!state_) return Error(Errc::lock_lost, "the keeper was moved from");
  State& s = *state_;
  if (s.released) {
    return Error(Errc::lock_lost, "the lease was already released");
  }
  s.released = true;
  const Lease current = s.core->lease(*s.entry);
  if (!s.core->forget(s.entry, /*await_renewal=*/true)) {
    return Error(Errc::lock_lost, "lease on " + current.name +
                                      " was lost before it was detached");
  }
  return current;
}

Session::Session(Client client) : core_(SessionCore::make(std::move(client))) {}

Session::~Session() {
  try {
    for (const Lease& l : core_->forget_all()) {
      (void)core_->client().release(l);
    }
  } catch (...) {
    // Destructors never throw; the leases will expire by themselves.
  }
}

LeaseKeeper Session::keep(Lease lease, KeeperOptions options) {
  return LeaseKeeper(core_, std::move(lease), std::move(options));
}

std::size_t Session::size() const { return core_->size(); }

const Client& Session::client() const { return core_->client(); }

}  // namespace baton
