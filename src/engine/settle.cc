// engine/settle.cc — Settler (see settle.h).
#include "engine/settle.h"

#include <condition_variable>
#include <list>
#include <mutex>
#include <thread>
#include <utility>

#include "baton/store.h"

namespace baton::engine {

using std::chrono::milliseconds;

struct Settler::State {
  struct Entry {
    OwnerToken token;
    bool claimed = false;    // mu
    bool in_flight = false;  // mu
  };

  milliseconds request_timeout{0};
  mutable std::mutex mu;
  std::condition_variable cv;
  std::list<Entry> entries;  // mu

  void release_all(Store& store, const std::vector<std::string>& names,
                   const OwnerToken& token) const {
    for (const auto& n : names) {
      const CallContext ctx(std::chrono::steady_clock::now() + request_timeout);
      (void)store.release(n, token, ctx);
    }
  }

  // The background thread of one withdrawal.
  void run(std::shared_ptr<Store> store, const std::vector<std::string>& names,
           std::list<Entry>::iterator entry) {
    const std::weak_ptr<Store> weak = store;
    std::unique_lock<std::mutex> lk(mu);
    for (std::size_t round = 0;; ++round) {
      if (entry->claimed) break;
      entry->in_flight = true;
      lk.unlock();
      if (!store) store = weak.lock();
      if (store) release_all(*store, names, entry->token);
      store.reset();  // the owner may go meanwhile
      lk.lock();
      entry->in_flight = false;
      cv.notify_all();
      if (round == kSettlePauses.size()) break;
      cv.wait_for(lk, kSettlePauses[round], [&] { return entry->claimed; });
    }
    entries.erase(entry);
    cv.notify_all();
  }
};

Settler::Settler(milliseconds request_timeout)
    : state_(std::make_shared<State>()) {
  state_->request_timeout = request_timeout;
}

Settler::~Settler() = default;

void Settler::withdraw(std::shared_ptr<Store> store,
                       std::vector<std::string> names,
                       const OwnerToken& token) {
  std::list<State::Entry>::iterator entry;
  {
    std::lock_guard<std::mutex> lk(state_->mu);
    entry = state_->entries.insert(state_->entries.end(), {token});
  }
  std::thread([s = state_, store = std::move(store), names = std::move(names),
               entry]() mutable {
    s->run(std::move(store), names, entry);
  }).detach();
}

void Settler::claim(const OwnerToken& token) {
  std::unique_lock<std::mutex> lk(state_->mu);
  for (auto& e : state_->entries) {
    if (e.token == token) e.claimed = true;
  }
  state_->cv.notify_all();
  state_->cv.wait(lk, [&] {
    for (const auto& e : state_->entries) {
      if (e.token == token && e.in_flight) return false;
    }
    return true;
  });
}

std::size_t Settler::pending() const {
  std::lock_guard<std::mutex> lk(state_->mu);
  return state_->entries.size();
}

}  // namespace baton::engine
