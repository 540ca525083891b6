// test_host.cpp: the host transport (--transport host: one GPU rank whose peers are played by
// pinned host memory). Every op x algo (and the ag_gemm ring's merges, the ring's edge in 2 pieces
// and bidir's in 3, and in pieces of halving size: the ring's in 3, bidir's in 2) x dtype, P = 1..8, every
// rank r, uneven M: C, the gathered A and what the rank sent to its played peers checked against
// the f64 reference and the job's dataflow. Then lanes, posting orders, B layouts, graph replay,
// the kernel-copy mode and comm priority at P = 4; step filters; wrong staged data is caught;
// usage errors. Skips (with the reason) where no GPU is usable.
#include <gtest/gtest.h>

#include "backends.hpp"
#include "gpu_case.hpp"

namespace collmm {
namespace {

std::unique_ptr<Executor> host_executor(int world, int rank, const char* copy = "engine", bool graph = false,
                                        bool priority = false) {
  BackendOptions o;
  o.backend = Backend::cuda;
  o.transport = CudaTransport::host;
  o.world = world;
  o.rank = rank;
  o.link_copy = parse_link_copy(copy);
  o.graph = graph;
  o.comm_priority = priority;
  return make_cuda_executor(o, 0, nullptr);
}

std::vector<PlanOptions> every_algo(Op op) {
  std::vector<PlanOptions> list;
  for (Algo algo : all_algos()) {
    PlanOptions o;
    o.algo = algo;
    list.push_back(o);
    if (op == Op::ag_gemm && algo == Algo::ring) o.merge = 2, list.push_back(o);
    o.merge = 1;
    if (algo == Algo::ring) o.pieces = 2, list.push_back(o);
    if (algo == Algo::bidir) o.pieces = 3, list.push_back(o);
    o.piece_sizes = PieceSizes::halving;  // 2^(S-1) rows: uneven_problem's chunks have 7 or more
    if (algo == Algo::ring) o.pieces = 3, list.push_back(o);
    if (algo == Algo::bidir) o.pieces = 2, list.push_back(o);
  }
  return list;
}

std::string name(const Problem& p, const PlanOptions& o, Dtype d, int r) {
  return to_string(p.op) + " " + to_string(o) + " " + to_string(d) + " P=" + std::to_string(p.world) + " rank " +
         std::to_string(r);
}

void expect_right(Executor& ex, const Problem& p, const PlanOptions& o, Dtype d, int r, uint64_t seed,
                  bool repeat = false) {
  test::CaseResult res;
  try {
    res = test::run_checked(ex, p, o, d, seed, repeat);
  } catch (const std::exception& e) {
    ADD_FAILURE() << name(p, o, d, r) << ": " << e.what();
    return;
  }
  EXPECT_EQ(res.wrong_c + res.wrong_gathered + res.wrong_sent, 0) << name(p, o, d, r) << ": " << res.detail;
  EXPECT_TRUE(res.detail.empty()) << name(p, o, d, r) << ": " << res.detail;
}

TEST(CudaHost, EveryOpAlgoDtypeOnEveryRankOfOneToEight) {
  COLLMM_NEED_GPUS(1);
  int cases = 0;
  for (int P = 1; P <= 8; ++P)
    for (int r = 0; r < P; ++r) {
      auto ex = host_executor(P, r);
      for (Op op : all_ops())
        for (const PlanOptions& o : every_algo(op))
          for (Dtype d : {Dtype::f64, Dtype::f32, Dtype::tf32, Dtype::f16, Dtype::bf16, Dtype::fp8_e4m3}) {
            expect_right(*ex, test::uneven_problem(op, P, d), o, d, r, 500 + P);
            ++cases;
          }
    }
  EXPECT_EQ(cases, 36 * 25 * 6);  // ag_gemm 9 configurations, gemm_rs and gemm_ar 8 each
}

TEST(CudaHost, LanesPostingLayoutsGraphsCopyModesPriority) {
  COLLMM_NEED_GPUS(1);
  for (int r : {0, 3})
    for (const char* copy : {"engine", "sm"})
      for (bool graph : {false, true}) {
        auto ex = host_executor(4, r, copy, graph, graph);
        for (Op op : all_ops())
          for (PlanOptions o : every_algo(op))
            for (Post post : {Post::comm_first, Post::gemm_first})
              for (BLayout bl : {BLayout::kn, BLayout::nk}) {
                Problem p = test::uneven_problem(op, 4, Dtype::bf16);
                p.b_layout = bl;
                p.m = 64 * 4 + 8, p.n = 96 * 4, p.k = 80 * 4;
                o.post = post, o.gemm_lanes = bl == BLayout::kn ? 1 : 3;
                SCOPED_TRACE(std::string(copy) + (graph ? " graph" : "") + " " + to_string(post) + " " + to_string(bl));
                expect_right(*ex, p, o, Dtype::bf16, r, 9, /*repeat=*/graph);
              }
      }
}

TEST(CudaHost, StepFiltersSkipStepsOfTheGivenPlan) {
  COLLMM_NEED_GPUS(1);
  auto ex = host_executor(4, 2);
  for (Op op : all_ops())
    for (Algo algo : all_algos()) {
      PlanOptions o;
      o.algo = algo;
      const Plan plan = make_plan(test::uneven_problem(op, 4, Dtype::bf16), o, 2);
      ex->prepare({plan}, Dtype::bf16);
      for (StepFilter f : {StepFilter::all, StepFilter::gemm_only, StepFilter::comm_only}) {
        const auto runs = ex->run(f, true);
        ASSERT_EQ(runs.at(0).steps.size(), plan.steps.size());
        for (size_t s = 0; s < plan.steps.size(); ++s) {
          const bool gemm = plan.steps[s].kind == StepKind::gemm;
          const StepTime& t = runs[0].steps[s];
          EXPECT_EQ(t.start_us >= 0, f == StepFilter::all || (f == StepFilter::gemm_only) == gemm)
              << to_string(op) << " " << to_string(algo) << " step " << s;
          if (t.start_us >= 0) {
            EXPECT_LE(t.start_us, t.end_us);
          }
        }
      }
    }
}

TEST(CudaHost, WrongStagedDataIsCaught) {
  COLLMM_NEED_GPUS(1);
  for (Op op : all_ops()) {
    auto ex = host_executor(3, 1);
    PlanOptions o;
    o.algo = Algo::ring;
    const test::CaseResult res =
        test::run_checked(*ex, test::uneven_problem(op, 3, Dtype::f32), o, Dtype::f32, 5, false, 6);
    EXPECT_GT(res.wrong_c + res.wrong_gathered, 0) << to_string(op);
    EXPECT_GT(res.wrong_sent, 0) << to_string(op) << ": what the rank forwards is checked against the peers' own data";
  }
}

TEST(CudaHost, UsageErrorsAndTheHeader) {
  COLLMM_NEED_GPUS(1);
  EXPECT_THROW(host_executor(4, 4), UsageError);
  EXPECT_THROW(host_executor(0, 0), UsageError);
  EXPECT_THROW(host_executor(2, 0, "dma"), UsageError);
  auto ex = host_executor(4, 1);
  EXPECT_NE(ex->timing_note().find("rank 1 of 4"), std::string::npos) << ex->timing_note();
  EXPECT_NE(ex->timing_note().find("host memory"), std::string::npos) << ex->timing_note();
  EXPECT_EQ(ex->local_ranks(), std::vector<int>{1});
  EXPECT_EQ(ex->world_size(), 4);
  const Plan wrong_rank = make_plan(test::uneven_problem(Op::ag_gemm, 4, Dtype::bf16), {}, 2);
  EXPECT_THROW(ex->prepare({wrong_rank}, Dtype::bf16), UsageError);
}

}  // namespace
}  // namespace collmm
