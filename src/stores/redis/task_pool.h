// stores/redis/task_pool.h — reusable threads for Redlock's parallel calls
// (internal). run_all() runs n tasks at once: task 0 on the calling thread,
// the others on pooled threads (started on demand, kept for reuse, so a
// call costs no thread creation in the steady state). Tasks never wait for
// other tasks, so the pool cannot deadlock; it grows to the peak number of
// concurrently running tasks. Each task gets its own copy of the caller's
// CallContext, so every task's I/O — hence the whole round — ends by the
// caller's deadline.
//
// Thread safety: safe for concurrent use; the destructor joins the threads
// (no task may be running).
#ifndef BATON_STORES_REDIS_TASK_POOL_H_
#define BATON_STORES_REDIS_TASK_POOL_H_

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "baton/store.h"

namespace baton::store::redis {

class TaskPool {
 public:
  TaskPool() = default;
  ~TaskPool() {
    {
      std::lock_guard<std::mutex> lk(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& t : threads_) t.join();
  }
  TaskPool(const TaskPool&) = delete;
  TaskPool& operator=(const TaskPool&) = delete;

  using Task = std::function<void(std::size_t, const CallContext&)>;

  // Runs task(0, ctx) .. task(n - 1, ctx) in parallel; returns when all
  // finished.
  void run_all(std::size_t n, const CallContext& ctx, const Task& task) {
    std::mutex done_mu;
    std::condition_variable done_cv;
    std::size_t left = n > 0 ? n - 1 : 0;
    {
      std::lock_guard<std::mutex> lk(mu_);
      for (std::size_t i = 1; i < n; ++i) {
        queue_.push_back([&, i, ctx] {  // the context travels as a copy
          task(i, ctx);
          std::lock_guard<std::mutex> dl(done_mu);
          if (--left == 0) done_cv.notify_one();
        });
      }
      // One thread per queued task that no idle thread will take.
      while (idle_ < queue_.size()) {
        ++idle_;
        threads_.emplace_back([this] { work(); });
      }
    }
    cv_.notify_all();
    if (n > 0) task(0, ctx);
    std::unique_lock<std::mutex> dl(done_mu);
    done_cv.wait(dl, [&] { return left == 0; });
  }

 private:
  void work() {
    std::unique_lock<std::mutex> lk(mu_);
    for (;;) {
      cv_.wait(lk, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping
      auto job = std::move(queue_.front());
      queue_.pop_front();
      --idle_;
      lk.unlock();
      job();
      lk.lock();
      ++idle_;
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;  // mu_
  std::size_t idle_ = 0;                     // mu_: threads not running a job
  bool stop_ = false;                        // mu_
  std::vector<std::thread> threads_;         // mu_ (joined by the destructor)
};

}  // namespace baton::store::redis

#endif  // BATON_STORES_REDIS_TASK_POOL_H_
