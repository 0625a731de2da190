// engine/messages.h — every message a wait can produce, written once.
//
// Thread safety: pure functions.
#ifndef BATON_ENGINE_MESSAGES_H_
#define BATON_ENGINE_MESSAGES_H_

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "baton/error.h"

namespace baton::engine {

// timeout: `lock "x" was not granted within 250ms`.
Error not_granted(std::string_view name, std::chrono::milliseconds wait);
// timeout: `not all of the 3 locks were granted within 250ms`.
Error not_all_granted(std::size_t n, std::chrono::milliseconds wait);
// timeout: the wait ended with a store call that did not answer before
// the call deadline (the end of the wait + the reply's grace).
Error cut_at_deadline(std::string_view name, std::chrono::milliseconds wait,
                      std::string_view store, const Error& cause);
// cancelled: the wait for "a", "b" was cancelled; the request was withdrawn.
Error cancelled(const std::vector<std::string>& names);
// timeout: a grant that arrived after its own safe deadline was given back.
Error arrived_late(std::string_view name);
Error arrived_late_multi();
// not_acquired: a try the store queued (a store bug, answered as busy).
Error not_free(std::string_view name);

}  // namespace baton::engine

#endif  // BATON_ENGINE_MESSAGES_H_
