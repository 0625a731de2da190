// engine/settle.h — withdraws the requests of abandoned acquires.
//
// An acquire that gave up at its call deadline (a store that is slow or
// gone) may still be queued or granted by the store later: the request was
// sent, and a slow server can commit it after the caller stopped waiting —
// even after a first withdrawal found nothing (PostgreSQL runs a statement
// whose connection was closed to its end). So the Settler releases the
// abandoned token on its names at once and again after each pause of
// kSettlePauses (about 5 s in all, shorter than any lease a late grant
// could leave): a request committed late is withdrawn a moment later, not
// left to wait out a heartbeat or a TTL (rule 7). Releasing a token that
// holds nothing changes nothing (rule 4).
//
// A caller may repeat an acquire with the same owner token (rule 17):
// claim(token) first stops the withdrawals of that token and waits for a
// release in flight, so that no late withdrawal frees the new lease.
//
// The first release keeps the store alive; the later ones run only while
// the Client that owns the store still exists. ~Settler waits for the
// first releases still to make (each bounded by the request timeout), ends
// the pauses and joins every thread: no withdrawal outlives its Client.
//
// Thread safety: all members may be called from any thread.
#ifndef BATON_ENGINE_SETTLE_H_
#define BATON_ENGINE_SETTLE_H_

#include <array>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "baton/lease.h"

namespace baton {
class Store;
}

namespace baton::engine {

// The pauses between the releases of an abandoned token.
inline constexpr std::array<std::chrono::milliseconds, 4> kSettlePauses{
    std::chrono::milliseconds{100}, std::chrono::milliseconds{400},
    std::chrono::milliseconds{1500}, std::chrono::milliseconds{3000}};

class Settler {
 public:
  // Each release is bounded by `request_timeout`.
  explicit Settler(std::chrono::milliseconds request_timeout);
  ~Settler();
  Settler(const Settler&) = delete;
  Settler& operator=(const Settler&) = delete;

  // Withdraws `token` from `names` on `store` in the background (and joins
  // the threads of withdrawals already finished).
  void withdraw(std::shared_ptr<Store> store, std::vector<std::string> names,
                const OwnerToken& token);
  // A new call uses `token`: no further withdrawal of it; returns once a
  // release of it in flight has finished.
  void claim(const OwnerToken& token);
  // Withdrawals not yet finished (tests).
  std::size_t pending() const;

 private:
  struct State;
  std::shared_ptr<State> state_;
};

}  // namespace baton::engine

#endif  // BATON_ENGINE_SETTLE_H_
