// collmm/collmm.hpp: the C++ API. A Context starts a backend (for cpu: MPI, one rank per process)
// and runs ag_gemm / gemm_rs / gemm_ar on the caller's local shards, with the communication
// overlapped with the GEMM by the chosen algorithm. Buffers are host memory, row-major, of the
// element type given (C of context.out_dtype(dtype)). The cpu backend runs the plan on them in
// place (Executor::bind: A and B read, C and the gathered A written, no copy). Where the executor
// cannot bind (cuda, for now) the inputs are written in before each call and the outputs read back
// after it.
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
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "collmm/backend_options.hpp"
#include "collmm/measure_settings.hpp"
#include "collmm/types.hpp"

namespace collmm {

// The backend a Context drives (internal: src/common/executor.hpp).
class Executor;

// Where a call's plan options come from: `plan` as given, or auto. Auto is the cost model's pick for
// the shape, refined (AutoSettings::measure on, the default) by timing its best few candidates on
// the call's own inputs the first time the shape runs (src/sim/measured_choice.hpp).
enum class AlgoChoice { given, automatic };

// How the collective and the GEMM are combined; the defaults are the ring, comm posted first.
struct MatmulOptions {
  PlanOptions plan;                // the algorithm and its options (types.hpp); unused with automatic
  BLayout b_layout = BLayout::kn;  // nk: B_r as torch.nn.Linear stores weights
  AlgoChoice choice = AlgoChoice::given;
};

// What AlgoChoice::automatic decides with. The decision of a (op, M, N, K, P, dtype, B layout) is
// made once per Context and kept; with measuring on, its first call costs up to max_candidates x
// (warmup + iters) runs (default 4 x 4) before the call itself.
struct AutoSettings {
  std::string profile;     // the cost model's profile (name or file); "": cpu-2core on cpu, h200-nvlink on cuda
  std::string tune_cache;  // a tuning cache file: its measured picks are used, and what auto times is recorded
  MeasureSettings measure;
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
  // The settings of later automatic calls (shapes already decided keep their decision).
  void set_auto(const AutoSettings& settings);
  // The last automatic call's decision: its options, source ("model" or "measured") and printout.
  const AutoDecision& last_auto() const;

  // The calls are collective (every rank calls them with the same sizes and options) and throw
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

  // Row-parallel linear with a replicated output: C = sum over q of A_q @ B_q, on every rank.
  //   a, b as gemm_rs's
  //   c  [M, N]                   out
  // Result, for every i < M, j < N:
  //   c[i][j] = sum over q < P, kk < K_q of a_q[i][kk] * b_q[kk][j]
  void gemm_ar(int64_t m, int64_t n, int64_t k, Dtype dtype, const void* a, const void* b, void* c,
               const MatmulOptions& options = {});

 private:
  static void check_pointers(const char* op, const void* a, const void* b,
                             const void* c);  // throws UsageError on a null one
  // gemm_rs and gemm_ar: A, B in, C out.
  void summed(Op op, int64_t m, int64_t n, int64_t k, Dtype dtype, const void* a, const void* b, void* c,
              const MatmulOptions& options);
  // Plans and prepares when the problem, options or dtype changed since the last call.
  void prepare(const Problem& problem, const MatmulOptions& options, Dtype dtype);
  int gathered_buffer() const;  // the prepared plan's gathered A
  // The caller's buffers of one call for the prepared plan: (buffer id, memory); memory nullptr
  // leaves the buffer the executor's.
  struct CallBuffers {
    std::vector<std::pair<int, const void*>> inputs;
    std::vector<std::pair<int, void*>> outputs;
  };
  // Binds (cpu) or writes in (cuda) the inputs and outputs for the runs that follow.
  void attach(const CallBuffers& buffers);
  // One run on the caller's buffers (the outputs read back where they are not bound).
  void run_on(const CallBuffers& buffers);
  // The options of this call: as given, or auto's decision, whose candidates are timed on the
  // call's own buffers (`buffers` gives them for the plan prepared at the time) on a shape's first call.
  MatmulOptions options_for_call(const Problem& problem, const MatmulOptions& options, Dtype dtype,
                                 const std::function<CallBuffers()>& buffers);

  std::unique_ptr<Executor> executor_;
  struct Prepared;
  std::unique_ptr<Prepared> prepared_;
};

}  // namespace collmm
