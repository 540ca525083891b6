// mpi_host.cpp: MPI_COMM_WORLD as a HostComm whose every collective is bounded by a deadline;
// MPI init with the thread-level check; node-local rank and size; the checked-call helper.
#include "mpi_host.hpp"

#include <sys/resource.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <memory>
#include <sstream>

#include "collmm/types.hpp"
#include "fault_point.hpp"

namespace collmm {
namespace {

const char* level_name(int level) {
  switch (level) {
    case MPI_THREAD_SINGLE: return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED: return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED: return "MPI_THREAD_SERIALIZED";
    case MPI_THREAD_MULTIPLE: return "MPI_THREAD_MULTIPLE";
  }
  return "unknown";
}

int g_users = 0;         // live MpiHostComm objects; MPI_Finalize when the last goes
bool g_we_init = false;  // MPI was initialized here (not by the caller, whose MPI stays up)

class MpiHostComm : public HostComm {
 public:
  explicit MpiHostComm(int timeout_s) : timeout_s_(timeout_s) {
    ++g_users;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    // The notices' own communicator (a caller's receives on MPI_COMM_WORLD never see them), made
    // without blocking: a rank that never comes leaves it unmade, and the waits name no rank then.
    MPI_Request request;
    if (size_ > 1 && MPI_Comm_idup(MPI_COMM_WORLD, &notices_, &request) == MPI_SUCCESS &&
        mpi_wait_until(request, std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s_))) {
      arrived_.assign(static_cast<size_t>(size_), 0);
      inbox_.assign(static_cast<size_t>(size_), 0);
      receives_.assign(static_cast<size_t>(size_), MPI_REQUEST_NULL);
      for (int q = 0; q < size_; ++q)
        if (q != rank_) post_receive(q);
    }
  }
  // MPI_Finalize waits for every process: a bounded barrier first, so that a process stopped or
  // gone while the others finish ends the job instead of leaving them waiting. Destroyed while an
  // exception unwinds (a failure on this process, its message not yet printed): no finalize at all;
  // the process exits after printing, un-finalized, and mpirun ends the whole job.
  ~MpiHostComm() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (--g_users > 0 || finalized || !g_we_init || std::uncaught_exceptions() > 0) {
      if (!finalized) stop_notices();
      return;
    }
    set_phase("the end of the job (waiting for every rank before MPI_Finalize)");
    try {
      barrier();
    } catch (const std::exception& e) {
      std::cerr << ("collmm: rank " + std::to_string(rank_) + ": " + e.what() + "; aborting the job\n") << std::flush;
      abort(3);
    }
    stop_notices();
    fault_point("mpi_finalize", rank_);
    // MPI_Finalize waits for every process too (Open MPI's closing fence): a rank that stops now
    // would hold the others there forever. MPI can no longer abort the job: this process exits
    // non-zero and the launcher ends the rest.
    const DeadlineGuard guard(timeout_s_,
                              "collmm: rank " + std::to_string(rank_) + " of " + std::to_string(size_) +
                                  ": MPI_Finalize did not finish within " + std::to_string(timeout_s_) +
                                  " s (--timeout): another rank stopped or hangs at the end of the job; exiting",
                              [] { std::_Exit(3); });
    MPI_Finalize();
  }
  int proc() const override { return rank_; }
  int procs() const override { return size_; }
  void barrier() override {
    MPI_Request request;
    COLLMM_MPI(MPI_Ibarrier(MPI_COMM_WORLD, &request));
    wait(request);
  }

  std::vector<std::string> allgather(const std::string& mine) override {
    std::vector<int> lens, displs;
    const int total = gather_lengths(static_cast<int>(mine.size()), lens, displs);
    std::string all(static_cast<size_t>(total), '\0');
    MPI_Request request;
    COLLMM_MPI(MPI_Iallgatherv(mine.data(), static_cast<int>(mine.size()), MPI_CHAR, all.data(), lens.data(),
                               displs.data(), MPI_CHAR, MPI_COMM_WORLD, &request));
    wait(request);
    std::vector<std::string> out;
    for (int i = 0; i < size_; ++i) out.push_back(all.substr(displs[i], lens[i]));
    return out;
  }

  std::vector<double> allgather(const std::vector<double>& mine) override {
    std::vector<int> lens, displs;
    const int total = gather_lengths(static_cast<int>(mine.size()), lens, displs);
    std::vector<double> all(static_cast<size_t>(total));
    MPI_Request request;
    COLLMM_MPI(MPI_Iallgatherv(mine.data(), static_cast<int>(mine.size()), MPI_DOUBLE, all.data(), lens.data(),
                               displs.data(), MPI_DOUBLE, MPI_COMM_WORLD, &request));
    wait(request);
    return all;
  }

  [[noreturn]] void abort(int code) override {
    MPI_Abort(MPI_COMM_WORLD, code);
    std::_Exit(code);
  }

 private:
  // Every process's length; their offsets; the total.
  int gather_lengths(int mine, std::vector<int>& lens, std::vector<int>& displs) {
    lens.assign(static_cast<size_t>(size_), 0);
    displs.assign(static_cast<size_t>(size_), 0);
    MPI_Request request;
    COLLMM_MPI(MPI_Iallgather(&mine, 1, MPI_INT, lens.data(), 1, MPI_INT, MPI_COMM_WORLD, &request));
    wait(request);
    int total = 0;
    for (int i = 0; i < size_; ++i) displs[i] = total, total += lens[i];
    return total;
  }

  // A collective that does not complete within the timeout: a peer died or hangs. Say where, end the job.
  // After process 0's local work the wait is longer by that work's bound (process 0 ends itself,
  // saying so, when the work outlives it), so only a stopped or hung rank exhausts it.
  // The message gives the CPU time the wait took, so that tests can tell napping from spinning.
  void wait(MPI_Request& request) {
    announce();
    const double cpu0 = thread_cpu_seconds();
    const int bound_s = timeout_s_ + local_bound_s();
    const bool done = mpi_wait_until(request, std::chrono::steady_clock::now() + std::chrono::seconds(bound_s));
    const std::string after = local_work().empty()
                                  ? ""
                                  : ", after process 0's local work (" + local_work() + ", which process 0 bounds by " +
                                        std::to_string(local_bound_s()) + " s itself) and --timeout";
    local_work_done();
    if (done) return;
    char cpu[64];
    std::snprintf(cpu, sizeof cpu, "%.2f", thread_cpu_seconds() - cpu0);
    std::cerr << ("collmm: rank " + std::to_string(rank_) + " of " + std::to_string(size_) + ": no answer from " +
                  silent_ranks() + " within " + std::to_string(bound_s) + " s" +
                  (after.empty() ? " (--timeout)" : after) + " in " + phase() +
                  ": a rank died or hangs; aborting the job (this wait took " + cpu + " CPU s)\n")
              << std::flush;
    abort(3);
  }

  // Every collective is announced to every peer (its number, on notices_), so that a wait that
  // runs out names the ranks whose notice of it never came: "rank 1", "ranks 1, 3".
  void announce() {
    if (notices_ == MPI_COMM_NULL) return;
    ++entered_;
    take_notices();
    std::erase_if(sent_, [](Sent& s) {
      int done = 0;
      MPI_Testall(static_cast<int>(s.requests.size()), s.requests.data(), &done, MPI_STATUSES_IGNORE);
      return done != 0;
    });
    sent_.push_back(Sent{std::make_unique<long long>(entered_), {}});
    Sent& s = sent_.back();
    for (int q = 0; q < size_; ++q) {
      if (q == rank_) continue;
      s.requests.emplace_back();
      MPI_Isend(s.count.get(), 1, MPI_LONG_LONG, q, kNoticeTag, notices_, &s.requests.back());
    }
  }
  void post_receive(int q) {
    MPI_Irecv(&inbox_[static_cast<size_t>(q)], 1, MPI_LONG_LONG, q, kNoticeTag, notices_,
              &receives_[static_cast<size_t>(q)]);
  }
  // Every notice that has come: each peer's latest count.
  void take_notices() {
    for (int q = 0; q < size_; ++q) {
      if (q == rank_) continue;
      for (int done = 1; done;) {
        MPI_Test(&receives_[static_cast<size_t>(q)], &done, MPI_STATUS_IGNORE);
        if (!done) break;
        arrived_[static_cast<size_t>(q)] = inbox_[static_cast<size_t>(q)];
        post_receive(q);
      }
    }
  }
  // The ranks that have not entered this rank's latest collective, as words ("every rank" when
  // they cannot be told).
  std::string silent_ranks() {
    if (notices_ == MPI_COMM_NULL) return "every rank";
    take_notices();
    std::string list;
    int n = 0;
    for (int q = 0; q < size_; ++q)
      if (q != rank_ && arrived_[static_cast<size_t>(q)] < entered_) list += (n++ ? ", " : "") + std::to_string(q);
    return n == 0 ? "every rank" : (n == 1 ? "rank " : "ranks ") + list;
  }
  void stop_notices() {
    if (notices_ == MPI_COMM_NULL) return;
    for (MPI_Request& r : receives_)
      if (r != MPI_REQUEST_NULL) {
        MPI_Cancel(&r);
        MPI_Wait(&r, MPI_STATUS_IGNORE);  // a cancelled receive completes at once
      }
    for (Sent& s : sent_)
      for (MPI_Request& r : s.requests)
        if (r != MPI_REQUEST_NULL) MPI_Request_free(&r);  // completed by MPI in the background
    sent_.clear();
    notices_ = MPI_COMM_NULL;  // not freed: MPI_Comm_free is collective, and a peer may be gone
  }

  static constexpr int kNoticeTag = 7201;
  struct Sent {
    std::unique_ptr<long long> count;  // the number sent, alive until its sends complete
    std::vector<MPI_Request> requests;
  };
  int timeout_s_ = 300;
  int rank_ = 0, size_ = 1;
  MPI_Comm notices_ = MPI_COMM_NULL;
  long long entered_ = 0;              // collectives this rank has entered
  std::vector<long long> arrived_;     // per peer: the collectives it has entered, as its notices say
  std::vector<long long> inbox_;       // per peer: the receive buffer of its next notice
  std::vector<MPI_Request> receives_;  // per peer: the posted receive of its next notice
  std::vector<Sent> sent_;
};

}  // namespace

void mpi_check(int code, const char* call, const char* file, int line) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(code, text, &len);
  std::ostringstream msg;
  msg << file << ":" << line << ": " << call << " failed: " << std::string(text, static_cast<size_t>(len));
  throw std::runtime_error(msg.str());
}

bool mpi_wait_until(MPI_Request& request, std::chrono::steady_clock::time_point deadline, PollPace pace) {
  return poll_until(
      [&] {
        int done = 0;
        COLLMM_MPI(MPI_Test(&request, &done, MPI_STATUS_IGNORE));
        return done != 0;
      },
      deadline, pace);
}

std::unique_ptr<HostComm> make_mpi_host_comm(int needed, int timeout_s) {
  if (timeout_s < 1) throw UsageError("--timeout must be >= 1 s (got " + std::to_string(timeout_s) + ")");
  int initialized = 0, provided = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    fault_point("mpi_init");
    // MPI_Init waits for every process of the job: one that never gets there (stopped, stuck in
    // its start) would hold the others forever. MPI cannot abort before it is up: this process
    // exits non-zero and the launcher ends the rest.
    const int rank = launcher_rank();
    const DeadlineGuard guard(timeout_s,
                              "collmm: rank " + (rank < 0 ? std::string("?") : std::to_string(rank)) +
                                  ": MPI_Init did not finish within " + std::to_string(timeout_s) +
                                  " s (--timeout): another rank of the job did not start or hangs; exiting",
                              [] { std::_Exit(3); });
    MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
    g_we_init = true;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  } else {
    MPI_Query_thread(&provided);
  }
  if (provided < needed) {
    std::ostringstream msg;
    msg << "the MPI library provides " << level_name(provided) << " but collmm needs " << level_name(needed)
        << " (its comm lane calls MPI from its own thread); use an MPI built with thread support";
    throw UsageError(msg.str());
  }
  return std::make_unique<MpiHostComm>(timeout_s);
}

static MPI_Comm node_comm() {
  static MPI_Comm node = MPI_COMM_NULL;
  if (node == MPI_COMM_NULL)
    COLLMM_MPI(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
  return node;
}

int mpi_node_size() {
  int n = 1;
  MPI_Comm_size(node_comm(), &n);
  return n;
}

int mpi_node_rank() {
  int r = 0;
  MPI_Comm_rank(node_comm(), &r);
  return r;
}

bool launched_by_mpi() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MPI_LOCALNRANKS"})
    if (std::getenv(v)) return true;
  return false;
}

}  // namespace collmm
