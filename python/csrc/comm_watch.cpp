// comm_watch.cpp: the bound on collmm's own NCCL transfers (comm_watch.hpp).
#include "comm_watch.hpp"

#include <dlfcn.h>

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <list>
#include <thread>
#include <vector>

namespace collmm::torch_ext {
namespace {

// The calling thread's CUDA stream-capture mode set to relaxed (cudaThreadExchangeStreamCaptureMode,
// from the libcudart torch loaded), as c10d's watchdog does for its own queries. Its cudaEventQuery
// calls then neither fail nor invalidate a CUDA graph another thread captures in the global mode
// (torch.cuda.graph's default).
void relax_capture_mode() {
  using Exchange = int (*)(int*);
  for (const char* lib : {"libcudart.so.13", "libcudart.so.12", "libcudart.so"}) {
    void* so = dlopen(lib, RTLD_NOW | RTLD_NOLOAD);
    auto exchange = so ? reinterpret_cast<Exchange>(dlsym(so, "cudaThreadExchangeStreamCaptureMode")) : nullptr;
    if (!exchange) continue;
    int mode = 2;  // cudaStreamCaptureModeRelaxed
    exchange(&mode);
    return;
  }
  std::fprintf(stderr,
               "collmm: no cudaThreadExchangeStreamCaptureMode in this process: collmm's NCCL watchdog may "
               "break a CUDA graph captured while it polls\n");
}

// Set at exit: the thread stops polling (CUDA and torch are being torn down).
std::atomic<bool> g_exiting{false};

struct Watched {
  c10::Event done;
  std::chrono::steady_clock::time_point deadline;
  std::chrono::milliseconds bound;
  std::string what;
  c10::weak_intrusive_ptr<c10d::Backend> backend;
  std::shared_ptr<Failure> failure;
};

class Watch {
 public:
  // Called by the issuing thread once per run: a lock and a push (the thread is woken only when
  // the list was empty; it polls on its own every 20 ms otherwise).
  void add(Watched w) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (watched_.size() >= kMaxWatched) return;  // the oldest ones bound the host's lead anyway
    const bool was_empty = watched_.empty();
    watched_.push_back(std::move(w));
    if (!thread_started_) {
      thread_started_ = true;
      std::atexit([] { g_exiting = true; });
      std::thread([this] { loop(); }).detach();  // lives as long as the process (never destroyed)
    }
    if (was_empty) wake_.notify_one();
  }
  c10::Event take(c10::Device device) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto it = free_.begin(); it != free_.end(); ++it)
      if (it->device_index() == device.index()) {
        c10::Event e = std::move(*it);
        free_.erase(it);
        return e;
      }
    return c10::Event(device.type(), c10::EventFlag::BACKEND_DEFAULT);
  }

 private:
  static constexpr size_t kMaxWatched = 4096;

  // Takes the list, queries its events without the lock (the issuing thread never waits for a
  // poll), puts back what is still running, every 20 ms while there is any.
  void loop() {
    relax_capture_mode();
    for (;;) {
      std::list<Watched> polled;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [this] { return !watched_.empty(); });
        polled.swap(watched_);
      }
      if (g_exiting) return;
      const auto now = std::chrono::steady_clock::now();
      std::vector<c10::Event> finished;
      for (auto it = polled.begin(); it != polled.end();) {
        bool done = true;
        try {
          done = it->done.query();
        } catch (const std::exception&) {  // the device is gone: nothing to watch
        }
        if (done) {
          finished.push_back(std::move(it->done));
          it = polled.erase(it);
        } else if (now > it->deadline) {
          give_up(*it);
          it = polled.erase(it);
        } else {
          ++it;
        }
      }
      {
        std::lock_guard<std::mutex> lock(mutex_);
        watched_.splice(watched_.begin(), polled);  // older first, as they came
        for (c10::Event& e : finished)
          if (free_.size() < 64) free_.push_back(std::move(e));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }

  static void give_up(Watched& w) {
    const std::string why = w.what + " has not finished on the device " + std::to_string(w.bound.count() / 1000.0) +
                            " s after it was enqueued: a peer stopped or died (its transfers never came). collmm "
                            "aborted the group's NCCL communicator: every later call on this group raises";
    std::fprintf(stderr, "%s\n", why.c_str());
    std::fflush(stderr);
    w.failure->set(why);
    if (c10::intrusive_ptr<c10d::Backend> backend = w.backend.lock()) {
      try {
        backend->abort();
      } catch (const std::exception& e) {
        std::fprintf(stderr, "collmm: aborting the group's backend failed: %s\n", e.what());
      }
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_;
  std::list<Watched> watched_;
  std::vector<c10::Event> free_;
  bool thread_started_ = false;
};

Watch& the_watch() {
  static Watch& w = *new Watch();  // never destroyed: its thread may be polling at exit
  return w;
}

}  // namespace

void watch_comm(c10::Event done, std::chrono::milliseconds bound, std::string what,
                c10::weak_intrusive_ptr<c10d::Backend> backend, std::shared_ptr<Failure> failure) {
  the_watch().add(Watched{std::move(done), std::chrono::steady_clock::now() + bound, bound, std::move(what),
                          std::move(backend), std::move(failure)});
}

c10::Event watch_event(c10::Device device) { return the_watch().take(device); }

}  // namespace collmm::torch_ext
