// nccl_host_comm.cpp: HostComm over NCCL (see nccl_host_comm.hpp). Small all-gathers are staged
// through pinned host memory and device buffers kept between calls (grown when a call needs more).
// Each is waited for with a deadline: the stream and the communicator's asynchronous error are
// polled, napping between polls. A wait past the timeout or an NCCL error aborts the communicator
// and ends this process (under torchrun, the job) with a message naming the rank and the phase.
#include "nccl_host_comm.hpp"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <stdexcept>
#include <string>
#include <vector>

#include "cuda_check.hpp"
#include "poll.hpp"

namespace collmm::cuda {
namespace {

class NcclHostComm : public HostComm {
 public:
  NcclHostComm(ncclComm_t comm, int device, int timeout_s, bool owned)
      : comm_(comm), device_(device), timeout_s_(timeout_s), owned_(owned) {
    COLLMM_NCCL(ncclCommUserRank(comm_, &rank_));
    COLLMM_NCCL(ncclCommCount(comm_, &size_));
    COLLMM_CUDA(cudaSetDevice(device_));
    COLLMM_CUDA(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  }
  ~NcclHostComm() override {
    cudaSetDevice(device_);
    cudaStreamDestroy(stream_);
    cudaFree(send_);
    cudaFree(recv_);
    cudaFreeHost(host_);
    if (owned_) ncclCommDestroy(comm_);
  }
  int proc() const override { return rank_; }
  int procs() const override { return size_; }
  void barrier() override { gather_bytes(std::vector<char>(1, 0)); }

  std::vector<std::string> allgather(const std::string& mine) override {
    const std::vector<int64_t> lens = gather_lengths(static_cast<int64_t>(mine.size()));
    int64_t most = 0;
    for (int64_t l : lens) most = std::max(most, l);
    std::vector<char> padded(static_cast<size_t>(most > 0 ? most : 1), '\0');
    std::memcpy(padded.data(), mine.data(), mine.size());
    const std::vector<char> all = gather_bytes(padded);
    std::vector<std::string> out;
    for (int q = 0; q < size_; ++q) out.emplace_back(all.data() + q * padded.size(), static_cast<size_t>(lens[q]));
    return out;
  }

  std::vector<double> allgather(const std::vector<double>& mine) override {
    std::vector<char> bytes(mine.size() * sizeof(double) + 1);
    std::memcpy(bytes.data(), mine.data(), mine.size() * sizeof(double));
    const std::vector<char> all = gather_bytes(bytes);
    std::vector<double> out(mine.size() * size_);
    for (int q = 0; q < size_; ++q)
      std::memcpy(out.data() + q * mine.size(), all.data() + q * bytes.size(), mine.size() * sizeof(double));
    return out;
  }

  [[noreturn]] void abort(int code) override {
    ncclCommAbort(comm_);
    std::_Exit(code);
  }

 private:
  std::vector<int64_t> gather_lengths(int64_t mine) {
    std::vector<char> b(sizeof mine);
    std::memcpy(b.data(), &mine, sizeof mine);
    const std::vector<char> all = gather_bytes(b);
    std::vector<int64_t> out(size_);
    std::memcpy(out.data(), all.data(), all.size());
    return out;
  }

  // Room for `bytes` per rank: device send and receive buffers and a pinned host buffer for both
  // directions, kept between calls.
  void reserve(size_t bytes) {
    if (bytes <= capacity_) return;
    const size_t cap = std::max(bytes, size_t(4096));
    cudaFree(send_);
    cudaFree(recv_);
    cudaFreeHost(host_);
    send_ = recv_ = host_ = nullptr;
    capacity_ = 0;
    COLLMM_CUDA(cudaMalloc(&send_, cap));
    COLLMM_CUDA(cudaMalloc(&recv_, cap * size_));
    COLLMM_CUDA(cudaMallocHost(&host_, cap * size_));
    capacity_ = cap;
  }

  // Every rank gives the same number of bytes; returns them in rank order.
  std::vector<char> gather_bytes(const std::vector<char>& mine) {
    COLLMM_CUDA(cudaSetDevice(device_));
    reserve(mine.size());
    std::memcpy(host_, mine.data(), mine.size());
    COLLMM_CUDA(cudaMemcpyAsync(send_, host_, mine.size(), cudaMemcpyHostToDevice, stream_));
    COLLMM_NCCL(ncclAllGather(send_, recv_, mine.size(), ncclUint8, comm_, stream_));
    COLLMM_CUDA(cudaMemcpyAsync(host_, recv_, mine.size() * size_, cudaMemcpyDeviceToHost, stream_));
    wait();
    const char* h = static_cast<const char*>(host_);
    return std::vector<char>(h, h + mine.size() * size_);
  }

  // The stream done, or the job ended: past the deadline, or on an NCCL error (a peer aborted).
  void wait() {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s_);
    const bool done = poll_until(
        [&] {
          const cudaError_t e = cudaStreamQuery(stream_);
          if (e == cudaSuccess) return true;
          if (e != cudaErrorNotReady) COLLMM_CUDA(e);
          ncclResult_t async = ncclSuccess;
          COLLMM_NCCL(ncclCommGetAsyncError(comm_, &async));
          if (async != ncclSuccess && async != ncclInProgress)
            fail(std::string("NCCL reports ") + ncclGetErrorString(async) + " (a rank failed or aborted)");
          return false;
        },
        deadline, kHostPace);
    if (!done)
      fail("no answer from every rank within " + std::to_string(timeout_s_) + " s (--timeout): a rank died or hangs");
  }

  [[noreturn]] void fail(const std::string& why) {
    const std::string what =
        "collmm cuda: rank " + std::to_string(rank_) + " of " + std::to_string(size_) + ": in " + phase() + ": " + why;
    if (!owned_) {
      ncclCommAbort(comm_);
      throw std::runtime_error(what + "; the NCCL communicator was aborted");
    }
    std::cerr << what + "; aborting\n" << std::flush;
    abort(3);
  }

  ncclComm_t comm_;
  int device_, timeout_s_, rank_ = 0, size_ = 1;
  bool owned_;  // the communicator is this object's: destroyed with it, and a failure ends the process
  cudaStream_t stream_ = nullptr;
  void *send_ = nullptr, *recv_ = nullptr, *host_ = nullptr;
  size_t capacity_ = 0;  // bytes per rank the buffers hold
};

}  // namespace

std::unique_ptr<HostComm> make_nccl_host_comm(ncclComm_t comm, int device, int timeout_s) {
  return std::make_unique<NcclHostComm>(comm, device, timeout_s, true);
}

std::unique_ptr<HostComm> borrow_nccl_host_comm(ncclComm_t comm, int device, int timeout_s) {
  return std::make_unique<NcclHostComm>(comm, device, timeout_s, false);
}

}  // namespace collmm::cuda
