// server/history_sink.h — records batond's lock history (who held what)
// from the lock table's change notifications, and passes each one on to
// the journal (when there is one).
//
// A lease_put for a (name, owner token) not live yet is a grant; a
// lease_removed ends it: "lost" while the server frees the leases of an
// ended session, "expire" if its expiry had passed, else "release". A
// waiter_left is a wait that ended (granted, withdrawn, timed out or its
// connection gone): a "wait" event from its arrival to then.
// Thread safety: the io thread only (like the table).
#ifndef BATON_SERVER_HISTORY_SINK_H_
#define BATON_SERVER_HISTORY_SINK_H_

#include <map>
#include <string>
#include <utility>

#include "baton/clock.h"
#include "core/lock_table.h"
#include "statuspage/status_page.h"

namespace baton::server {

class HistorySink final : public core::ChangeSink {
 public:
  HistorySink(const Clock& clock, statuspage::History& history)
      : clock_(clock), history_(history) {}
  void set_next(core::ChangeSink* next) { next_ = next; }
  // Learns the leases already live (restored), without recording them.
  void seed(const core::LeaseRecord& lease);
  // While set, removals are recorded as "lost" (a session's leases freed).
  void set_losing(bool losing) { losing_ = losing; }

  void lease_put(const core::LeaseRecord& lease) override;
  void lease_removed(std::string_view name, const OwnerToken& token) override;
  void counter_put(std::string_view name, std::int64_t value) override {
    if (next_ != nullptr) next_->counter_put(name, value);
  }
  // A finished wait: one "wait" event from its arrival to now (the page
  // shades it; a wait still queued comes from the live snapshot).
  void waiter_left(std::string_view name, std::string_view label, bool shared,
                   core::Instant arrival) override;

 private:
  struct Live {
    std::uint64_t fencing_token = 0;
    std::string label;
    bool shared = false;
    core::Instant expiry{};
  };
  const Clock& clock_;
  statuspage::History& history_;
  core::ChangeSink* next_ = nullptr;
  bool losing_ = false;
  std::map<std::pair<std::string, OwnerToken>, Live, std::less<>> live_;
};

}  // namespace baton::server

#endif  // BATON_SERVER_HISTORY_SINK_H_
