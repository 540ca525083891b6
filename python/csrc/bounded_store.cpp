// bounded_store.cpp: store requests bounded by a deadline (bounded_store.hpp).
#include "bounded_store.hpp"

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

namespace collmm::torch_ext {

// The thread and its queue. The thread holds a reference to this: where it is left inside a
// request, it lives (detached) until the request returns, then ends.
struct BoundedStore::Thread {
  std::mutex mutex;
  std::condition_variable wake, idle;
  std::deque<std::function<void()>> queue;
  bool running = false;  // inside a request
  bool stop = false;
  Clock::time_point since;  // the deadline of the last request handed over
  std::thread thread;

  bool busy() const { return running || !queue.empty(); }

  static void loop(std::shared_ptr<Thread> self) {
    std::unique_lock<std::mutex> lock(self->mutex);
    for (;;) {
      self->wake.wait(lock, [&] { return !self->queue.empty() || self->stop; });
      if (self->queue.empty()) return;
      std::function<void()> run = std::move(self->queue.front());
      self->queue.pop_front();
      self->running = true;
      lock.unlock();
      run();  // a packaged_task: what it throws goes to the caller's future
      lock.lock();
      self->running = false;
      if (!self->busy()) self->idle.notify_all();
    }
  }
};

BoundedStore::BoundedStore(c10::intrusive_ptr<c10d::Store> store) : store_(std::move(store)) {}

BoundedStore::~BoundedStore() {
  if (!thread_) return;
  std::unique_lock<std::mutex> lock(thread_->mutex);
  thread_->stop = true;
  thread_->queue.clear();
  if (thread_->running) {  // inside a request that may never return: it ends the thread when it does
    thread_->thread.detach();
    return;
  }
  lock.unlock();
  thread_->wake.notify_one();
  thread_->thread.join();
}

void BoundedStore::submit(std::function<void()> run, Clock::time_point deadline, bool after_stuck) {
  if (!thread_) {
    thread_ = std::make_shared<Thread>();
    thread_->thread = std::thread(&Thread::loop, thread_);
  }
  {
    std::unique_lock<std::mutex> lock(thread_->mutex);
    // The thread may still be finishing the last request, whose caller has its result: it is idle
    // in a moment. A request left behind (its deadline passed) is not waited for.
    if (!after_stuck && thread_->busy() && thread_->since > Clock::now()) {
      if (deadline == Clock::time_point::max())
        thread_->idle.wait(lock, [&] { return !thread_->busy(); });
      else
        thread_->idle.wait_until(lock, deadline, [&] { return !thread_->busy(); });
    }
    if (!after_stuck && thread_->busy()) {
      const double late = std::chrono::duration<double>(Clock::now() - thread_->since).count();
      throw StoreStuck("the store has not answered a request whose deadline passed " + std::to_string(late) + " s ago");
    }
    if (!thread_->busy()) thread_->since = deadline;
    thread_->queue.push_back(std::move(run));
  }
  thread_->wake.notify_one();
}

bool BoundedStore::stuck() const {
  if (!thread_) return false;
  std::lock_guard<std::mutex> lock(thread_->mutex);
  return thread_->busy() && thread_->since <= Clock::now();
}

void BoundedStore::stuck_now() { throw StoreStuck("the store did not answer by the deadline"); }

}  // namespace collmm::torch_ext
