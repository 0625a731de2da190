// engine/messages.cc — see messages.h.
#include "engine/messages.h"

#include "core/validate.h"

namespace baton::engine {

Error not_granted(std::string_view name, std::chrono::milliseconds wait) {
  return Error(Errc::timeout, "lock " + core::quote_name(name) +
                                  " was not granted within " +
                                  std::to_string(wait.count()) + "ms");
}

Error not_all_granted(std::size_t n, std::chrono::milliseconds wait) {
  return Error(Errc::timeout, "not all of the " + std::to_string(n) +
                                  " locks were granted within " +
                                  std::to_string(wait.count()) + "ms");
}

Error cut_at_deadline(std::string_view name, std::chrono::milliseconds wait,
                      std::string_view store, const Error& cause) {
  return Error(Errc::timeout,
               not_granted(name, wait).message() + ": no answer from " +
                   std::string(store) +
                   " before the call deadline (the end of the wait + 50ms): " +
                   cause.message());
}

Error cancelled(const std::vector<std::string>& names) {
  std::string what;
  for (const auto& n : names) {
    what += (what.empty() ? "" : ", ") + core::quote_name(n);
  }
  return Error(Errc::cancelled, "the wait for " + what +
                                    " was cancelled (stop requested); the "
                                    "request was withdrawn");
}

Error arrived_late(std::string_view name) {
  return Error(Errc::timeout,
               "the grant of " + core::quote_name(name) +
                   " arrived after its safe deadline (the store's reply "
                   "took longer than the TTL)");
}

Error arrived_late_multi() {
  return Error(Errc::timeout,
               "a grant arrived after its safe deadline (the store's reply "
               "took longer than the TTL); all were given back");
}

Error not_free(std::string_view name) {
  return Error(Errc::not_acquired,
               "lock " + core::quote_name(name) + " is not free");
}

}  // namespace baton::engine
