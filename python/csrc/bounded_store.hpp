// bounded_store.hpp: requests to a c10d Store, each bounded by a deadline. c10d's own bound is not
// enough. TCPStore's client, after a wait that timed out, asks its server to cancel the wait and
// reads the answer without a bound; every other request reads its answer without one too. So a
// stopped server (rank 0 SIGSTOPped under torchrun or init_method tcp://: it hosts the TCPStore)
// holds the caller until the server runs again.
//
// So each request runs on a thread of this object's own, and the caller waits for its result until
// the deadline. A request that outlives it stays with that thread (nothing can take it back). The
// caller gets StoreStuck, and so does every later request while the thread is still inside it.
// The exception is one posted (post()), which runs when the thread is free again.
// The thread and what a request uses (the store, the request's own copies of its keys and values)
// are shared with it. So a request left behind touches nothing the caller owns, and the thread is
// detached, not joined, when this object goes while one is inside.
#pragma once

#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <stdexcept>
#include <string>

#include <torch/csrc/distributed/c10d/Store.hpp>

namespace collmm::torch_ext {

// The store did not answer a request by its deadline, or is still inside one that did not.
class StoreStuck : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class BoundedStore {
 public:
  using Clock = std::chrono::steady_clock;
  explicit BoundedStore(c10::intrusive_ptr<c10d::Store> store);
  ~BoundedStore();
  BoundedStore(const BoundedStore&) = delete;
  BoundedStore& operator=(const BoundedStore&) = delete;

  // Whether the thread is inside a request whose deadline passed (every call() raises StoreStuck).
  bool stuck() const;

  // fn(store) on the thread; its result, or its exception, by `deadline`; else StoreStuck. `fn`
  // must own whatever it uses (capture by value): it may run on after this call threw.
  template <class F>
  auto call(F fn, Clock::time_point deadline) -> decltype(fn(std::declval<c10d::Store&>())) {
    using R = decltype(fn(std::declval<c10d::Store&>()));
    auto task = std::make_shared<std::packaged_task<R()>>([store = store_, fn = std::move(fn)] { return fn(*store); });
    std::future<R> result = task->get_future();
    submit([task] { (*task)(); }, deadline, false);
    if (deadline == Clock::time_point::max())
      result.wait();
    else if (result.wait_until(deadline) != std::future_status::ready)
      stuck_now();
    return result.get();
  }

  // fn(store) on the thread as soon as it is free, after a request left behind too (which may
  // never return): a request whose answer the caller may do without. Its future says when it ran.
  template <class F>
  std::future<void> post(F fn, Clock::time_point deadline) {
    auto task = std::make_shared<std::packaged_task<void()>>([store = store_, fn = std::move(fn)] { fn(*store); });
    std::future<void> done = task->get_future();
    submit([task] { (*task)(); }, deadline, true);
    return done;
  }

 private:
  struct Thread;
  // Queues `run` for the thread; StoreStuck where it is still inside an earlier request whose
  // deadline passed, unless `after_stuck`.
  void submit(std::function<void()> run, Clock::time_point deadline, bool after_stuck);
  [[noreturn]] void stuck_now();

  c10::intrusive_ptr<c10d::Store> store_;
  std::shared_ptr<Thread> thread_;  // started at the first request
};

}  // namespace collmm::torch_ext
