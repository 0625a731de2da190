// client/events.cc — delivering observer events (client/events.h).
#include "client/events.h"

#include <utility>

namespace baton::client_internal {

void deliver(Observer& observer, const Event& e) noexcept {
  try {
    observer.on_event(e);
  } catch (...) {
    // Dropped: an observer must not change a call's result (observer.h).
  }
}

std::chrono::microseconds since(const Clock& clock, Clock::time_point from) {
  if (from == Clock::time_point{}) return std::chrono::microseconds::zero();
  const auto now = clock.now();
  if (now <= from) return std::chrono::microseconds::zero();
  return std::chrono::duration_cast<std::chrono::microseconds>(now - from);
}

EventKind acquire_failure(const Error& error) {
  switch (error.code()) {
    case Errc::not_acquired:
      return EventKind::not_acquired;
    case Errc::timeout:
      return EventKind::timed_out;
    case Errc::cancelled:
      return EventKind::cancelled;
    default:
      return EventKind::failed;
  }
}

engine::WaitHook wait_hook(const std::shared_ptr<Observer>& observer,
                           std::string_view lock, bool shared) {
  if (!observer) return {};
  return [&observer, lock, shared](std::optional<std::uint64_t> position) {
    emit(observer, [&](Event& e) {
      e.kind = EventKind::wait_started;
      e.lock = lock;
      e.queue_position = position;
      e.shared = shared;
    });
  };
}

}  // namespace baton::client_internal
