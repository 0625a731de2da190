// client/elector.cc — leader election on the lock `group` (capacity 1).
//
// campaign() waits in the lock's FIFO queue with one owner token, so the
// candidate keeps its place for the whole campaign. Once elected, the term's
// lease is kept alive by the client's default session (client/session_core.h):
// renewal and the lost notice are the same as a LeaseKeeper's. The
// elector's own thread only observes: while a campaign waits it describes
// the lock every retry_interval and reports leader changes, and it runs
// on_elected once a campaign wins.
#include "baton/elector.h"

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <utility>

#include "client/client_impl.h"
#include "client/events.h"
#include "client/session_core.h"
#include "core/validate.h"

namespace baton {

using client_internal::KeptEntry;
using client_internal::SessionCore;
using std::chrono::milliseconds;
using std::chrono::steady_clock;

// Named (not anonymous): Elector::State, declared in a public header, has a
// member of this type.
namespace elector_detail {
enum class Mode { idle, observing, leading };
}  // namespace elector_detail
using elector_detail::Mode;

struct Elector::State {
  explicit State(Client c) : client(std::move(c)) {}

  Client client;
  std::string group;
  ElectorOptions options;
  milliseconds interval{0};

  mutable std::mutex mu;
  std::condition_variable cv;
  Mode mode = Mode::idle;                // guarded by mu
  bool stopping = false;                 // guarded by mu
  bool campaigning = false;              // guarded by mu
  bool withdraw = false;                 // guarded by mu: resign() mid-campaign
  bool elected_notified = false;         // guarded by mu
  std::uint64_t term = 0;                // guarded by mu: bumps on changes
  std::shared_ptr<SessionCore> session;  // guarded by mu, while leading
  std::shared_ptr<KeptEntry> kept;       // guarded by mu, while leading
  OwnerToken campaign_token;             // guarded by mu
  std::string last_leader;               // guarded by mu
  // The on_lost calls running on the session's notice thread. ~Elector
  // waits for them: the session no longer knows the term by then (kept is
  // reset first), so it does not wait itself. Shared, so that an on_lost
  // that destroys its own elector can still leave.
  struct Notices {
    std::mutex mu;
    std::condition_variable cv;
    int running = 0;
    std::thread::id thread;
  };
  const std::shared_ptr<Notices> notices = std::make_shared<Notices>();
  std::atomic<bool> leader{false};
  std::atomic<bool> cancelled{false};
  std::thread thread;

  void run();
  void observe_once(std::unique_lock<std::mutex>& lk);
  void on_term_lost(std::uint64_t t, const Error& why);
  // stopped_leading for the term of `lease` (`why` null: resigned).
  void stopped_leading(const Lease& lease, const Error* why) const;
  const std::shared_ptr<Observer>& observer() const {
    return client_internal::impl_of(client).options.observer;
  }
};

void Elector::State::stopped_leading(const Lease& lease,
                                     const Error* why) const {
  const auto& o = observer();
  client_internal::emit(o, [&](Event& e) {
    e.kind = EventKind::stopped_leading;
    e.lock = group;
    e.lease = &lease;
    e.error = why;
    e.held = client_internal::since(*client_internal::impl_of(client).clock,
                                    lease.granted_at);
  });
}

void Elector::State::observe_once(std::unique_lock<std::mutex>& lk) {
  const std::uint64_t t = term;
  lk.unlock();
  auto info = client.describe(group);
  std::string label;
  if (info.ok() && !info->holders.empty()) label = info->holders[0].label;
  lk.lock();
  if (term != t || mode != Mode::observing || label.empty() ||
      label == last_leader) {
    return;
  }
  last_leader = label;
  lk.unlock();
  client_internal::emit(observer(), [&](Event& e) {
    e.kind = EventKind::new_leader;
    e.lock = group;
    e.leader_label = label;
  });
  if (options.on_new_leader) options.on_new_leader(label);
  lk.lock();
}

// The session's notice for term `t` (on the session's notice thread).
void Elector::State::on_term_lost(std::uint64_t t, const Error& why) {
  const std::shared_ptr<Notices> n = notices;
  Lease held;
  {
    std::lock_guard<std::mutex> lk(mu);
    if (term != t) return;  // resigned or re-elected meanwhile
    if (observer() && kept) held = session->lease(*kept);
    ++term;
    mode = Mode::idle;
    kept.reset();
    session.reset();
    leader.store(false);
    cancelled.store(true);
    std::lock_guard<std::mutex> nlk(n->mu);
    ++n->running;
    n->thread = std::this_thread::get_id();
  }
  cv.notify_all();
  const Error lost(why.code(), "leadership of " + core::quote_name(group) +
                                   ": " + why.message());
  if (observer()) stopped_leading(held, &lost);
  if (options.on_lost) options.on_lost(lost);
  // Only `n` from here on: on_lost may have destroyed this elector.
  std::lock_guard<std::mutex> nlk(n->mu);
  --n->running;
  n->cv.notify_all();
}

void Elector::State::run() {
  std::unique_lock<std::mutex> lk(mu);
  auto next_observe = steady_clock::now();
  while (!stopping) {
    const std::uint64_t t = term;
    switch (mode) {
      case Mode::idle:
        cv.wait(lk, [&] { return stopping || mode != Mode::idle; });
        next_observe = steady_clock::now();
        break;
      case Mode::observing:
        if (cv.wait_until(lk, next_observe,
                          [&] { return stopping || term != t; })) {
          break;
        }
        observe_once(lk);
        next_observe = steady_clock::now() + interval;
        break;
      case Mode::leading:
        if (!elected_notified) {
          const Lease l = session->lease(*kept);
          lk.unlock();
          client_internal::emit(observer(), [&](Event& e) {
            e.kind = EventKind::became_leader;
            e.lock = group;
            e.lease = &l;
          });
          if (options.on_elected) options.on_elected(l);
          lk.lock();
          elected_notified = true;
          cv.notify_all();
        }
        cv.wait(lk, [&] { return stopping || term != t; });
        break;
    }
  }
}

Elector::Elector(Client client, std::string group, ElectorOptions options)
    : state_(std::make_unique<State>(std::move(client))) {
  State& s = *state_;
  s.group = std::move(group);
  s.options = std::move(options);
  s.interval = s.options.retry_interval > milliseconds::zero()
                   ? s.options.retry_interval
                   : std::max(milliseconds{1}, s.options.ttl / 3);
  s.thread = std::thread([&s] { s.run(); });
}

Elector::~Elector() {
  try {
    (void)resign();
  } catch (...) {
  }
  {
    std::lock_guard<std::mutex> lk(state_->mu);
    state_->stopping = true;
  }
  state_->cv.notify_all();
  {
    // An on_lost still running reads the options: wait for it, unless this
    // is that very call destroying its own elector.
    State::Notices& n = *state_->notices;
    std::unique_lock<std::mutex> lk(n.mu);
    n.cv.wait(lk, [&] {
      return n.running == 0 || n.thread == std::this_thread::get_id();
    });
  }
  if (state_->thread.joinable()) state_->thread.join();
}

Status Elector::campaign(milliseconds wait, std::stop_token stop) {
  State& s = *state_;
  if (Status st = core::validate_name(s.group, "election group"); !st.ok()) {
    return st;
  }
  if (Status st = core::validate_ttl(s.options.ttl); !st.ok()) return st;
  if (Status st = core::validate_wait(wait); !st.ok()) return st;
  AcquireOptions ao;
  ao.ttl = s.options.ttl;
  ao.capacity = 1;
  ao.label = s.options.label;
  ao.stop = std::move(stop);
  {
    std::lock_guard<std::mutex> lk(s.mu);
    if (s.mode == Mode::leading) return {};
    if (s.campaigning) {
      return Error(Errc::invalid_argument, "a campaign for " +
                                               core::quote_name(s.group) +
                                               " is already running");
    }
    s.campaigning = true;
    s.withdraw = false;
    s.campaign_token = OwnerToken::random();
    ao.token = s.campaign_token;
    s.cancelled.store(false);
    ++s.term;
    s.mode = Mode::observing;
  }
  s.cv.notify_all();
  auto lease = s.client.acquire(s.group, wait, ao);
  std::unique_lock<std::mutex> lk(s.mu);
  s.campaigning = false;
  if (lease.ok() && (s.withdraw || s.stopping)) {
    lk.unlock();
    (void)s.client.release(*lease);
    lk.lock();
    lease = Error(Errc::not_acquired, "the campaign was resigned");
  }
  ++s.term;
  if (!lease.ok()) {
    s.mode = Mode::idle;
    return lease.error();
  }
  const std::uint64_t t = s.term;
  s.session = client_internal::default_session(s.client);
  // retry_interval 0: the session renews every third of the lease's
  // window (which a store may make shorter than the TTL).
  s.kept = s.session->keep(
      *lease, std::max(s.options.retry_interval, milliseconds::zero()),
      [&s, t](const Error& why) { s.on_term_lost(t, why); },
      s.options.on_renewed);
  s.last_leader = s.client.label();
  if (!s.options.label.empty()) s.last_leader = s.options.label;
  s.elected_notified = false;
  s.mode = Mode::leading;
  s.leader.store(true);
  s.cv.notify_all();
  s.cv.wait(lk,
            [&] { return s.elected_notified || s.term != t || s.stopping; });
  return {};
}

Status Elector::resign() {
  State& s = *state_;
  std::unique_lock<std::mutex> lk(s.mu);
  if (s.campaigning) {
    s.withdraw = true;
    Lease pending;
    pending.name = s.group;
    pending.token = s.campaign_token;
    lk.unlock();
    (void)s.client.release(pending);  // withdraws the queued request
    return {};
  }
  if (!s.kept) return {};
  auto session = std::move(s.session);
  auto kept = std::move(s.kept);
  ++s.term;
  s.mode = Mode::idle;
  s.leader.store(false);
  s.cancelled.store(true);
  lk.unlock();
  s.cv.notify_all();
  const Lease held = session->lease(*kept);
  if (!session->forget(kept)) return {};  // already lost: nothing to free
  if (s.observer()) s.stopped_leading(held, nullptr);
  auto r = s.client.release(held);
  if (!r.ok()) return r.error();
  return {};
}

Result<LeaderInfo> Elector::observe() const {
  const State& s = *state_;
  auto info = s.client.describe(s.group);
  if (!info.ok()) return std::move(info).error();
  if (info->holders.empty()) {
    return Error(Errc::not_acquired,
                 "election " + core::quote_name(s.group) + " has no leader");
  }
  const HolderInfo& h = info->holders.front();
  return LeaderInfo{h.label, h.fencing_token, h.time_left};
}

bool Elector::is_leader() const noexcept { return state_->leader.load(); }

const std::atomic<bool>& Elector::cancelled() const noexcept {
  return state_->cancelled;
}

std::optional<Lease> Elector::lease() const {
  std::lock_guard<std::mutex> lk(state_->mu);
  if (!state_->kept) return std::nullopt;
  return state_->session->lease(*state_->kept);
}

steady_clock::time_point Elector::safe_deadline() const {
  std::lock_guard<std::mutex> lk(state_->mu);
  if (!state_->kept) return {};
  return state_->kept->safe_deadline();
}

}  // namespace baton
