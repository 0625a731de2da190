// engine/settle.cc — Settler (see settle.h).
#include "engine/settle.h"

#include <condition_variable>
#include <list>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "baton/store.h"

namespace baton::engine {

using std::chrono::milliseconds;

struct Settler::State {
  struct Entry {
    OwnerToken token;
    bool claimed = false;    // mu
    bool in_flight = false;  // mu
    bool done = false;       // mu: its thread has nothing left to do
    std::thread thread;      // mu; joined by a later withdraw or ~Settler
  };

  milliseconds request_timeout{0};
  mutable std::mutex mu;
  std::condition_variable cv;
  std::list<Entry> entries;  // mu
  bool closing = false;      // mu: the owner is going; no later rounds

  // Takes the threads of finished entries out (to join outside mu).
  std::vector<std::thread> reap_locked() {
    std::vector<std::thread> out;
    for (auto it = entries.begin(); it != entries.end();) {
      if (!it->done) {
        ++it;
        continue;
      }
      out.push_back(std::move(it->thread));
      it = entries.erase(it);
    }
    return out;
  }

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
      // The first release runs even when the owner is going (it keeps the
      // store alive for it); the later ones only while the owner exists.
      if (entry->claimed || (round > 0 && closing)) break;
      entry->in_flight = true;
      lk.unlock();
      if (!store) store = weak.lock();
      if (store) release_all(*store, names, entry->token);
      store.reset();  // the owner may go meanwhile
      lk.lock();
      entry->in_flight = false;
      cv.notify_all();
      if (round == kSettlePauses.size()) break;
      cv.wait_for(lk, kSettlePauses[round],
                  [&] { return entry->claimed || closing; });
    }
    entry->done = true;
    cv.notify_all();
  }
};

namespace {

// Never the calling thread: ~Settler keeps (detached) the entry of the
// thread it runs on, and reap_locked() takes only entries whose run() has
// set done, after which that thread calls nothing more.
void join_all(std::vector<std::thread>& threads) {
  for (auto& t : threads) {
    if (t.joinable()) t.join();
  }
}

}  // namespace

Settler::Settler(milliseconds request_timeout)
    : state_(std::make_shared<State>()) {
  state_->request_timeout = request_timeout;
}

// Every withdrawal thread is joined here, so none outlives its Client (a
// detached one could still run a release while the process exits and
// read objects already destroyed). Bounded: a first release in flight or
// not yet made takes at most request_timeout per name; pauses end at once.
Settler::~Settler() {
  std::vector<std::thread> threads;
  {
    std::unique_lock<std::mutex> lk(state_->mu);
    state_->closing = true;
    state_->cv.notify_all();
    const auto self = std::this_thread::get_id();
    state_->cv.wait(lk, [&] {
      for (const auto& e : state_->entries) {
        if (!e.done && e.thread.get_id() != self) return false;
      }
      return true;
    });
    for (auto it = state_->entries.begin(); it != state_->entries.end();) {
      if (it->thread.get_id() == self) {
        // This very thread (a Store that ended its own Client): its entry
        // stays, for run() still reads it; the State outlives it.
        it->thread.detach();
        ++it;
        continue;
      }
      threads.push_back(std::move(it->thread));
      it = state_->entries.erase(it);
    }
  }
  join_all(threads);
}

void Settler::withdraw(std::shared_ptr<Store> store,
                       std::vector<std::string> names,
                       const OwnerToken& token) {
  std::vector<std::thread> finished;
  {
    std::lock_guard<std::mutex> lk(state_->mu);
    finished = state_->reap_locked();
    auto entry = state_->entries.emplace(state_->entries.end());
    entry->token = token;
    // Started under mu: run() takes mu before it reads the entry.
    entry->thread = std::thread(
        [s = state_, store = std::move(store), names = std::move(names),
         entry]() mutable { s->run(std::move(store), names, entry); });
  }
  join_all(finished);
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
  std::size_t n = 0;
  for (const auto& e : state_->entries) n += e.done ? 0 : 1;
  return n;
}

}  // namespace baton::engine
