// nccl_host_comm.cpp: HostComm over NCCL (see nccl_host_comm.hpp).
#include "nccl_host_comm.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "check.hpp"

namespace collmm::cuda {
namespace {

class NcclHostComm : public HostComm {
 public:
  NcclHostComm(ncclComm_t comm, int device) : comm_(comm), device_(device) {
    COLLMM_NCCL(ncclCommUserRank(comm_, &rank_));
    COLLMM_NCCL(ncclCommCount(comm_, &size_));
    COLLMM_CUDA(cudaSetDevice(device_));
    COLLMM_CUDA(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  }
  ~NcclHostComm() override {
    cudaSetDevice(device_);
    cudaStreamDestroy(stream_);
    ncclCommDestroy(comm_);
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

  // Every rank gives the same number of bytes; returns them in rank order.
  std::vector<char> gather_bytes(const std::vector<char>& mine) {
    COLLMM_CUDA(cudaSetDevice(device_));
    char *send = nullptr, *recv = nullptr;
    COLLMM_CUDA(cudaMalloc(&send, mine.size()));
    COLLMM_CUDA(cudaMalloc(&recv, mine.size() * size_));
    COLLMM_CUDA(cudaMemcpy(send, mine.data(), mine.size(), cudaMemcpyHostToDevice));
    COLLMM_NCCL(ncclAllGather(send, recv, mine.size(), ncclUint8, comm_, stream_));
    COLLMM_CUDA(cudaStreamSynchronize(stream_));
    std::vector<char> all(mine.size() * size_);
    COLLMM_CUDA(cudaMemcpy(all.data(), recv, all.size(), cudaMemcpyDeviceToHost));
    cudaFree(send);
    cudaFree(recv);
    return all;
  }

  ncclComm_t comm_;
  int device_, rank_ = 0, size_ = 1;
  cudaStream_t stream_ = nullptr;
};

}  // namespace

std::unique_ptr<HostComm> make_nccl_host_comm(ncclComm_t comm, int device) {
  return std::make_unique<NcclHostComm>(comm, device);
}

}  // namespace collmm::cuda
