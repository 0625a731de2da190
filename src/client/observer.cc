// client/observer.cc — the names of observer events (baton/observer.h).
#include "baton/observer.h"

namespace baton {

std::string_view to_string(EventKind kind) noexcept {
  switch (kind) {
    case EventKind::wait_started:
      return "wait_started";
    case EventKind::granted:
      return "granted";
    case EventKind::not_acquired:
      return "not_acquired";
    case EventKind::timed_out:
      return "timed_out";
    case EventKind::cancelled:
      return "cancelled";
    case EventKind::failed:
      return "failed";
    case EventKind::renewed:
      return "renewed";
    case EventKind::renewal_failed:
      return "renewal_failed";
    case EventKind::lost:
      return "lost";
    case EventKind::released:
      return "released";
    case EventKind::became_leader:
      return "became_leader";
    case EventKind::stopped_leading:
      return "stopped_leading";
    case EventKind::new_leader:
      return "new_leader";
  }
  return "unknown";
}

std::string_view to_string(LostReason reason) noexcept {
  switch (reason) {
    case LostReason::store_said:
      return "store_said";
    case LostReason::deadline_passed:
      return "deadline_passed";
  }
  return "unknown";
}

}  // namespace baton
