// stores/baton/withdrawer.cc — see withdrawer.h.
#include "stores/baton/withdrawer.h"

#include <sys/socket.h>

namespace baton::store::baton_conn {

using std::chrono::steady_clock;

void Withdrawer::ask_ended() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    in_flight_ = false;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Withdrawer::stop() {
  std::lock_guard<std::mutex> lk(mu_);
  if (stopped_) return;
  stopped_ = true;
  if (in_flight_) thread_ = std::thread([this] { run(); });
}

void Withdrawer::run() {
  const auto give_up = steady_clock::now() + kGiveUp;
  std::unique_lock<std::mutex> lk(mu_);
  while (in_flight_) {
    if (steady_clock::now() >= give_up && fd_ >= 0) {
      ::shutdown(fd_, SHUT_RDWR);
      fd_ = -1;
      shut_ = true;
    }
    lk.unlock();
    for (const auto& n : names_) release_(n, token_);
    lk.lock();
    cv_.wait_for(lk, kRepeat, [&] { return !in_flight_; });
  }
}

}  // namespace baton::store::baton_conn
