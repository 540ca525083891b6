// test_nccl.cpp: the NCCL transport on real GPUs, every op x algo in bf16 and f32 (and fp8 for
// the ring; the ring's and bidir's edge in 3 pieces, equal and halving, in bf16), checked against the f64 reference:
//  CudaNcclThreads: one process, -g G (G = 2 and all visible GPUs), one host thread per GPU;
//  CudaNcclMpi:     run under `mpirun -np 2` (or more), one rank per process, GPU by local rank.
// Both need 2+ GPUs and skip with the reason otherwise.
#include <gtest/gtest.h>

#include <algorithm>

#include "backends.hpp"
#include "gpu_case.hpp"
#include "mpi_host.hpp"

namespace collmm {
namespace {

void every_op_and_algo(Executor& ex, bool graph_note) {
  const int P = ex.world_size();
  for (Op op : all_ops())
    for (Algo algo : all_algos())
      for (Dtype d : {Dtype::bf16, Dtype::f32, Dtype::fp8_e4m3}) {
        if (d == Dtype::fp8_e4m3 && algo != Algo::ring) continue;
        Problem p;
        p.op = op, p.world = P;
        if (d == Dtype::fp8_e4m3)
          p.m = 64 * P + 8, p.n = 32 * P, p.k = 64 * P, p.b_layout = BLayout::nk;
        else
          p.m = 37 * P + 5, p.n = 24 * P + 3, p.k = 40 * P + 7;  // uneven blocks: allgatherv/reduce per root
        PlanOptions o;
        o.algo = algo;
        o.gemm_lanes = 2;
        const auto res = test::run_checked(ex, p, o, d, 99, graph_note);
        EXPECT_EQ(res.wrong_c + res.wrong_gathered, 0)
            << to_string(op) << " " << to_string(algo) << " " << to_string(d) << " P=" << P << ": " << res.detail;
        // Equal blocks take the ncclAllGather / ncclReduceScatter path.
        p.m = 64 * P, p.n = 32 * P, p.k = 64 * P;
        const auto even = test::run_checked(ex, p, o, d, 98, graph_note);
        EXPECT_EQ(even.wrong_c + even.wrong_gathered, 0)
            << to_string(op) << " " << to_string(algo) << " " << to_string(d) << " P=" << P << " even: " << even.detail;
        if (d == Dtype::bf16 && (algo == Algo::ring || algo == Algo::bidir)) {  // the edge in pieces
          o.pieces = 3;
          const auto cut = test::run_checked(ex, p, o, d, 97, graph_note);
          EXPECT_EQ(cut.wrong_c + cut.wrong_gathered, 0)
              << to_string(op) << " " << to_string(o) << " P=" << P << ": " << cut.detail;
          o.piece_sizes = PieceSizes::halving;  // 3 pieces: 1/2, 1/4 and 1/4 of a 64-row chunk
          const auto halving = test::run_checked(ex, p, o, d, 96, graph_note);
          EXPECT_EQ(halving.wrong_c + halving.wrong_gathered, 0)
              << to_string(op) << " " << to_string(o) << " P=" << P << ": " << halving.detail;
        }
      }
}

TEST(CudaNcclThreads, OneProcessDrivingGGpus) {
  COLLMM_NEED_GPUS(2);
  std::string why;
  const int gpus = std::min(test::usable_gpus(&why), 8);
  for (int G : {2, gpus}) {
    for (bool graph : {false, true}) {
      BackendOptions o;
      o.backend = Backend::cuda;
      o.transport = CudaTransport::nccl;
      o.gpus = G;
      o.graph = graph;
      o.nccl_max_ctas = graph ? 8 : 0;
      auto ex = make_cuda_executor(o, 0, nullptr);
      ASSERT_EQ(ex->world_size(), G);
      every_op_and_algo(*ex, graph);
    }
    if (G == gpus) break;
  }
}

TEST(CudaNcclMpi, OneRankPerProcess) {
  if (!launched_by_mpi()) GTEST_SKIP() << "not started by mpirun";
  COLLMM_NEED_GPUS(2);
  BackendOptions o;
  o.backend = Backend::cuda;
  o.transport = CudaTransport::nccl;
  auto ex = make_cuda_executor(o, 0, nullptr);  // one executor: MPI is finalized with it
  ASSERT_EQ(ex->local_ranks().size(), 1u);
  every_op_and_algo(*ex, false);
}

}  // namespace
}  // namespace collmm
