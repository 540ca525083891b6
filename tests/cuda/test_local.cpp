// test_local.cpp: every op x algo x dtype on P = 1..8 ranks emulated on the visible GPU(s)
// (--transport local), checked against the f64 reference; plus lanes/posting variants, graph
// replay, step filters, and the usage errors. Skips (with the reason) where no GPU is usable.
#include <gtest/gtest.h>

#include "backends.hpp"
#include "gpu_case.hpp"

namespace collmm {
namespace {

std::unique_ptr<Executor> local_executor(int world, bool graph = false, const char* gemm_algo = "heuristic") {
  BackendOptions o;
  o.gemm_algo = parse_gemm_algo(gemm_algo);
  o.backend = Backend::cuda;
  o.transport = CudaTransport::local;
  o.world = world;
  o.graph = graph;
  return make_cuda_executor(o, 0, nullptr);
}

TEST(CudaLocal, EveryOpAlgoDtypeOnOneToEightRanks) {
  COLLMM_NEED_GPUS(1);
  int cases = 0;
  for (int P = 1; P <= 8; ++P) {
    auto ex = local_executor(P);
    for (Op op : all_ops())
      for (Algo algo : all_algos())
        for (Dtype d : {Dtype::f64, Dtype::f32, Dtype::tf32, Dtype::f16, Dtype::bf16, Dtype::fp8_e4m3}) {
          const Problem p = test::uneven_problem(op, P, d);
          PlanOptions o;
          o.algo = algo;
          test::CaseResult res;
          try {
            res = test::run_checked(*ex, p, o, d, 1000 + P);
          } catch (const std::exception& e) {
            ADD_FAILURE() << to_string(op) << " " << to_string(algo) << " " << to_string(d) << " P=" << P << ": "
                          << e.what();
            continue;
          }
          EXPECT_EQ(res.wrong_c + res.wrong_gathered, 0)
              << to_string(op) << " " << to_string(algo) << " " << to_string(d) << " P=" << P << ": " << res.detail;
          EXPECT_TRUE(res.detail.empty()) << res.detail;
          ++cases;
        }
  }
  EXPECT_EQ(cases, 8 * 3 * 4 * 6);
}

TEST(CudaLocal, LanesPostingAndBLayouts) {
  COLLMM_NEED_GPUS(1);
  auto ex = local_executor(4);
  for (Op op : all_ops())
    for (Algo algo : all_algos())
      for (Post post : {Post::comm_first, Post::gemm_first})
        for (int lanes : {1, 3})
          for (BLayout bl : {BLayout::kn, BLayout::nk}) {
            Problem p = test::uneven_problem(op, 4, Dtype::bf16);
            p.b_layout = bl;
            p.m = 64 * 4 + 8, p.n = 96 * 4, p.k = 80 * 4;
            PlanOptions o;
            o.algo = algo, o.post = post, o.gemm_lanes = lanes;
            test::CaseResult res;
            try {
              res = test::run_checked(*ex, p, o, Dtype::bf16, 7);
            } catch (const std::exception& e) {
              ADD_FAILURE() << to_string(op) << " " << to_string(algo) << " lanes=" << lanes << ": " << e.what();
              continue;
            }
            EXPECT_EQ(res.wrong_c + res.wrong_gathered, 0)
                << to_string(op) << " " << to_string(algo) << " " << to_string(post) << " lanes=" << lanes << " "
                << to_string(bl) << ": " << res.detail;
          }
}

// The ag_gemm ring with merged GEMMs, P = 2..8, uneven M, both B layouts, bf16 and fp8.
TEST(CudaLocal, MergedRing) {
  COLLMM_NEED_GPUS(1);
  for (int P = 2; P <= 8; ++P) {
    auto ex = local_executor(P);
    for (int merge : {2, 3, P})
      for (Dtype d : {Dtype::bf16, Dtype::fp8_e4m3}) {
        Problem p = test::uneven_problem(Op::ag_gemm, P, d);
        p.m = 64 * P + 8 * (P - 1);
        PlanOptions o;
        o.algo = Algo::ring;
        o.merge = merge;
        test::CaseResult res;
        try {
          res = test::run_checked(*ex, p, o, d, 40 + P);
        } catch (const std::exception& e) {
          ADD_FAILURE() << "merge " << merge << " " << to_string(d) << " P=" << P << ": " << e.what();
          continue;
        }
        EXPECT_EQ(res.wrong_c + res.wrong_gathered, 0)
            << "merge " << merge << " " << to_string(d) << " P=" << P << ": " << res.detail;
      }
  }
}

// The ring's and bidir's exposed edge in 2 and 4 pieces, equal and of halving size, P = 2..8, uneven
// M, bf16 and fp8.
TEST(CudaLocal, RingsWithTheEdgeInPieces) {
  COLLMM_NEED_GPUS(1);
  for (int P = 2; P <= 8; ++P) {
    auto ex = local_executor(P);
    for (Op op : all_ops())
      for (Algo algo : {Algo::ring, Algo::bidir})
        for (int pieces : {2, 4})
          for (Dtype d : {Dtype::bf16, Dtype::fp8_e4m3}) {
            Problem p = test::uneven_problem(op, P, d);
            p.m = 64 * P + 8 * (P - 1);
            PlanOptions o;
            o.algo = algo;
            o.pieces = pieces;
            o.piece_sizes = d == Dtype::bf16 ? PieceSizes::equal : PieceSizes::halving;
            const std::string what =
                to_string(op) + " " + to_string(o) + " " + to_string(d) + " P=" + std::to_string(P);
            test::CaseResult res;
            try {
              res = test::run_checked(*ex, p, o, d, 60 + P);
            } catch (const std::exception& e) {
              ADD_FAILURE() << what << ": " << e.what();
              continue;
            }
            EXPECT_EQ(res.wrong_c + res.wrong_gathered, 0) << what << ": " << res.detail;
          }
  }
}

TEST(CudaLocal, GraphCaptureAndReplay) {
  COLLMM_NEED_GPUS(1);
  for (int P : {1, 3, 4}) {
    auto ex = local_executor(P, true, P == 3 ? "timed" : "heuristic");
    for (Op op : all_ops())
      for (Algo algo : all_algos()) {
        PlanOptions o;
        o.algo = algo;
        o.gemm_lanes = 2;
        test::CaseResult res;
        try {
          res = test::run_checked(*ex, test::uneven_problem(op, P, Dtype::bf16), o, Dtype::bf16, 11, /*repeat=*/true);
        } catch (const std::exception& e) {
          ADD_FAILURE() << to_string(op) << " " << to_string(algo) << " P=" << P << " (graph): " << e.what();
          continue;
        }
        EXPECT_EQ(res.wrong_c + res.wrong_gathered, 0)
            << to_string(op) << " " << to_string(algo) << " P=" << P << " (graph): " << res.detail;
      }
  }
}

TEST(CudaLocal, StepFiltersSkipStepsAndStampThemNotRun) {
  COLLMM_NEED_GPUS(1);
  auto ex = local_executor(4);
  Problem p = test::uneven_problem(Op::ag_gemm, 4, Dtype::bf16);
  PlanOptions o;
  std::vector<Plan> plans;
  for (int r : ex->local_ranks()) plans.push_back(make_plan(p, o, r));
  ex->prepare(plans, Dtype::bf16);
  for (StepFilter f : {StepFilter::gemm_only, StepFilter::comm_only}) {
    const auto runs = ex->run(f, true);
    ASSERT_EQ(runs.size(), 4u);
    for (size_t i = 0; i < runs.size(); ++i)
      for (size_t s = 0; s < plans[i].steps.size(); ++s) {
        const bool gemm = plans[i].steps[s].kind == StepKind::gemm;
        const bool ran = runs[i].steps[s].start_us >= 0;
        EXPECT_EQ(ran, f == StepFilter::gemm_only ? gemm : !gemm) << "rank " << i << " step " << s;
      }
  }
}

TEST(CudaLocal, UsageErrors) {
  COLLMM_NEED_GPUS(1);
  auto ex = local_executor(2);
  Problem p = test::uneven_problem(Op::ag_gemm, 2, Dtype::fp8_e4m3);
  p.b_layout = BLayout::kn;
  std::vector<Plan> plans{make_plan(p, {}, 0), make_plan(p, {}, 1)};
  EXPECT_THROW(ex->prepare(plans, Dtype::fp8_e4m3), UsageError);  // fp8 needs B as [N, K]
  std::vector<Plan> one{make_plan(p, {}, 0)};
  EXPECT_THROW(ex->prepare(one, Dtype::bf16), UsageError);    // plans for 1 of 2 ranks
  EXPECT_THROW(ex->run(StepFilter::all, false), UsageError);  // nothing prepared
  BackendOptions bad;
  bad.transport = CudaTransport::local;
  EXPECT_THROW(make_cuda_executor(bad, 0, nullptr), UsageError);  // world not given
  std::string why;
  auto shared = local_executor(test::usable_gpus(&why) + 1);  // two ranks share a GPU
  EXPECT_NE(shared->timing_note().find("not overlap figures"), std::string::npos) << shared->timing_note();
}

}  // namespace
}  // namespace collmm
