// collmm/collmm.hpp: the C++ API. A Context starts a backend (for cpu: MPI, one rank per process)
// and runs ag_gemm / gemm_rs on the caller's local shards, with the communication overlapped with
// the GEMM by the chosen algorithm. Buffers are host memory, row-major, of the element type given
// (C of context.out_dtype(dtype)); the executor copies them in and out around each call.
//
//   #include "collmm/collmm.hpp"
//   collmm::Context ctx;                     // MPI_Init; rank() and world_size() from the job
//   ctx.ag_gemm(M, N, K, collmm::Dtype::f32, a_local, b_local, c_local);
//
// Both calls are collective: every rank calls them in the same order with the same sizes, dtype and
// options (checked across ranks whenever these change; a UsageError names what differs).
// Sizes are global; rank r's shard of a dimension D is block_size(D, P, r) long starting at
// block_offset(D, P, r) (types.hpp: the first D % P ranks get one more).
#pragma once

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "collmm/executor.hpp"

namespace collmm {

// How the collective and the GEMM are combined; the defaults are the ring, comm posted first.
struct MatmulOptions {
  PlanOptions plan;                // the algorithm and its options (types.hpp)
  BLayout b_layout = BLayout::kn;  // nk: B_r as torch.nn.Linear stores weights
};

class Context {
 public:
  // Starts the backend named in `options` (make_executor); the process must drive one rank.
  explicit Context(const BackendOptions& options = {}, int argc = 0, char** argv = nullptr);
  explicit Context(std::unique_ptr<Executor> executor);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  int rank() const;
  int world_size() const;
  Dtype out_dtype(Dtype in) const;
  Executor& executor();

  // Both calls are collective (every rank calls them with the same sizes and options) and throw
  // UsageError for a bad call: a null a, b or c (found on the rank that passes it, before any data
  // moves), sizes or options the ranks disagree on or that no plan can split (found on every rank).

  // Column-parallel linear: C_r = AllGather(A) @ B_r.
  //   a        [M_r, K]           rows block r of A, M_r = block_size(M, P, r)
  //   b        [K, N_r] (kn) or [N_r, K] (nk), columns block r of B, N_r = block_size(N, P, r)
  //   c        [M, N_r]           out
  //   gathered [M, K]             out, optional: the all-gathered A
  // Result, for every i < M, j < N_r:
  //   c[i][j] = sum over k of A[i][k] * B[k][block_offset(N, P, r) + j]
  //   where row i of A is row (i - block_offset(M, P, q)) of rank q's `a`, q the rank owning row i.
  void ag_gemm(int64_t m, int64_t n, int64_t k, Dtype dtype, const void* a, const void* b, void* c,
               void* gathered = nullptr, const MatmulOptions& options = {});

  // Row-parallel linear: C_r = rows block r of (sum over q of A_q @ B_q).
  //   a  [M, K_r]                 columns block r of A, K_r = block_size(K, P, r)
  //   b  [K_r, N] (kn) or [N, K_r] (nk), rows block r of B
  //   c  [M_r, N]                 out, M_r = block_size(M, P, r)
  // Result, for every i < M_r, j < N:
  //   c[i][j] = sum over q < P, kk < K_q of a_q[block_offset(M, P, r) + i][kk] * b_q[kk][j]
  //   with a_q, b_q rank q's inputs (b_q read as [K_q, N] whatever its layout).
  void gemm_rs(int64_t m, int64_t n, int64_t k, Dtype dtype, const void* a, const void* b, void* c,
               const MatmulOptions& options = {});

 private:
  static void check_pointers(const char* op, const void* a, const void* b,
                             const void* c);  // throws UsageError on a null one
  // Plans and prepares when the problem, options or dtype changed since the last call.
  void prepare(const Problem& problem, const MatmulOptions& options, Dtype dtype);
  int gathered_buffer() const;  // the prepared plan's gathered A
  // One run on the caller's buffers: (buffer id, memory); memory nullptr leaves the buffer the executor's.
  void run_on(const std::vector<std::pair<int, const void*>>& inputs,
              const std::vector<std::pair<int, void*>>& outputs);

  std::unique_ptr<Executor> executor_;
  struct Prepared;
  std::unique_ptr<Prepared> prepared_;
};

}  // namespace collmm
