// engine/engine.cc — Engine: construction, retry pacing and messages.
#include "engine/engine.h"

#include <algorithm>
#include <condition_variable>
#include <mutex>

#include "core/duration.h"
#include "core/jitter.h"

namespace baton::engine {

Engine::Engine(std::shared_ptr<Store> store, Policy policy)
    : store_(std::move(store)), policy_(std::move(policy)) {
  if (!policy_.clock) policy_.clock = Clock::steady();
  settler_ = std::make_shared<Settler>(policy_.request_timeout);
}

Engine::~Engine() = default;

Error Engine::no_answer(const Error& cause) const {
  return Error(Errc::unavailable,
               "no answer from " + store_->safe_url() + " within " +
                   core::format_duration(policy_.request_timeout) + ": " +
                   cause.message());
}

milliseconds Engine::backoff(int attempt) const {
  const milliseconds cap{2000};
  milliseconds base = std::max(policy_.retry_interval, milliseconds{1});
  for (int i = 1; i < attempt && base < cap; ++i) base *= 2;
  base = std::min(base, cap);
  return core::jittered(base, 0.5, 1.0);
}

std::optional<milliseconds> Engine::retry_pause(const Error& e, int* attempt,
                                                time_point until,
                                                bool waiting) const {
  if (e.code() != Errc::unavailable) return std::nullopt;
  const milliseconds hint = e.retry_after();
  milliseconds pause = hint;
  if (hint <= milliseconds::zero() || !waiting) {
    if (*attempt > policy_.max_retries) return std::nullopt;
    if (hint <= milliseconds::zero()) pause = backoff(*attempt);
    ++*attempt;
  }
  if (policy_.clock->now() + pause >= until) return std::nullopt;
  return pause;
}

void Engine::sleep_until(time_point t, const std::stop_token& stop) const {
  if (!stop.stop_possible()) {
    policy_.clock->sleep_until(t);
    return;
  }
  std::mutex mu;
  std::condition_variable cv;
  std::unique_lock<std::mutex> lk(mu);
  std::stop_callback wake(stop, [&] {
    std::lock_guard<std::mutex> g(mu);
    cv.notify_all();
  });
  while (!stop.stop_requested() && policy_.clock->now() < t) {
    policy_.clock->wait_until(cv, lk, t);
  }
}

}  // namespace baton::engine
