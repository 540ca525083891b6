// peer_inputs.hpp: the whole job's inputs on the GPU, from which the host transport makes what a
// rank's peers send it. They are the global A [M, K] and, for gemm_rs and gemm_ar, the global B as
// [K, N] (or [N, K] for fp8 GEMMs, which cuBLASLt wants "TN"). They are in the input dtype, made
// from the bench's seed (data.hpp: every value is a pure function of (seed, tensor, row, col)).
// materialize() computes the rows one transfer carries (check::peer_traffic) on the GPU. Rows of A
// are copied; running sums of partials are GEMMs of the ranks' blocks of A and B summed into one
// buffer.
#pragma once

#include <cuda_runtime.h>

#include <memory>

#include "lt_gemm.hpp"
#include "peer_traffic.hpp"

namespace collmm::cuda {

class PeerInputs {
 public:
  PeerInputs(int device, const Problem&, uint64_t seed, Dtype dtype);
  ~PeerInputs();
  PeerInputs(const PeerInputs&) = delete;
  PeerInputs& operator=(const PeerInputs&) = delete;

  // Whether these are the inputs of that job (the same problem and dtype: ProblemKey, and seed).
  bool same(const Problem&, uint64_t seed, Dtype) const;
  // The rows of `t` (each `cols` wide, of the GEMM output dtype for sums, of the input dtype for rows of
  // A) into `dst` (host memory), row t of the transfer at dst + t * cols * element size. Synchronous.
  void materialize(const check::LinkTransfer& t, int64_t cols, void* dst);

 private:
  void copy_rows(const check::LinkTransfer& t, int64_t cols, char* dst);
  void sum_partials(const check::LinkTransfer& t, int64_t cols, char* dst);

  int device_;
  Problem p_;
  uint64_t seed_;
  Dtype dtype_;
  void* a_ = nullptr;    // global A [M, K]
  void* b_ = nullptr;    // gemm_rs, gemm_ar: global B
  void* sum_ = nullptr;  // a running sum being made
  size_t sum_bytes_ = 0;
  void* workspace_ = nullptr;
  cudaStream_t stream_ = nullptr;
  std::unique_ptr<GemmEngine> engine_;
};

}  // namespace collmm::cuda
