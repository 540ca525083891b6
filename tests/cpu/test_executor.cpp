// test_executor.cpp: the cpu executor's contract beyond numbers: StepFilter runs (and times) only
// the steps it names, timestamps honour lane order and waits, dtypes it lacks are refused, ranks
// that disagree are told so on every rank, and misuse of the buffer API is an error.
#include <gtest/gtest.h>

#include <thread>

#include <sched.h>

#include <cmath>

#include "cpu_test_env.hpp"

namespace collmm::cpu_test {
namespace {

bool ran(const StepTime& t) { return t.start_us >= 0 && t.end_us >= t.start_us; }
bool not_run(const StepTime& t) { return t.start_us == -1 && t.end_us == -1; }

Plan prepared(Op op, Algo algo, int gemm_lanes = 1) {
  const int P = world();
  const Problem p{.op = op, .m = 5 * P + 1, .n = 2 * P + 1, .k = 3 * P + 2, .world = P, .b_layout = BLayout::kn};
  PlanOptions o;
  o.algo = algo;
  o.gemm_lanes = gemm_lanes;
  Plan plan = make_plan(p, o, rank());
  executor().prepare({plan}, Dtype::f32);
  const auto a = encode(make_local_a(p, rank(), 3, Dtype::f32).v, Dtype::f32);
  const auto b = encode(make_local_b(p, rank(), 3, Dtype::f32).v, Dtype::f32);
  executor().write(0, kBufA, a.data(), a.size());
  executor().write(0, kBufB, b.data(), b.size());
  executor().poison();
  return plan;
}

TEST(StepFilter, GemmOnlyAndCommOnlyRunAndTimeOnlyTheirSteps) {
  for (Op op : all_ops())
    for (Algo algo : all_algos()) {
      const Plan plan = prepared(op, algo);
      for (StepFilter f : {StepFilter::gemm_only, StepFilter::comm_only}) {
        const std::vector<RankRun> runs = executor().run(f, true);
        ASSERT_EQ(runs.size(), 1u);
        EXPECT_EQ(runs[0].rank, rank());
        ASSERT_EQ(runs[0].steps.size(), plan.steps.size());
        EXPECT_GE(runs[0].total_us, 0);
        for (size_t i = 0; i < plan.steps.size(); ++i) {
          const bool gemm = plan.steps[i].kind == StepKind::gemm;
          const bool wanted = f == StepFilter::gemm_only ? gemm : !gemm;
          EXPECT_TRUE(wanted ? ran(runs[0].steps[i]) : not_run(runs[0].steps[i]))
              << to_string(op) << " " << to_string(algo) << (f == StepFilter::gemm_only ? " gemm_only" : " comm_only")
              << " step " << i << ": " << describe(plan.steps[i]);
        }
      }
    }
}

// With the comm skipped, ag_gemm's ring computes only its own chunk correctly: C rows of other
// chunks are computed from the poisoned gathered A, so they stay NaN. This shows the filter skips
// the transfers rather than merely not timing them.
TEST(StepFilter, GemmOnlyReallySkipsTheTransfers) {
  if (world() == 1) GTEST_SKIP() << "with one rank there is nothing to transfer";
  const Plan plan = prepared(Op::ag_gemm, Algo::ring);
  executor().run(StepFilter::gemm_only, false);
  const BufferSpec& cs = plan.buffers[kBufC];
  std::vector<float> c(static_cast<size_t>(cs.rows * cs.cols));
  executor().read(0, kBufC, c.data(), c.size() * sizeof(float));
  const int64_t own0 = block_offset(plan.problem.m, world(), rank());
  const int64_t own1 = own0 + block_size(plan.problem.m, world(), rank());
  for (int64_t i = 0; i < cs.rows; ++i) {
    const bool own = i >= own0 && i < own1;
    EXPECT_EQ(std::isnan(c[static_cast<size_t>(i * cs.cols)]), !own) << "row " << i;
  }
}

TEST(Timestamps, EveryStepTimedAfterItsWaitsAndItsLanePredecessor) {
  for (Op op : all_ops())
    for (Algo algo : all_algos())
      for (int lanes : {1, 2}) {
        const Plan plan = prepared(op, algo, lanes);
        const std::vector<RankRun> runs = executor().run(StepFilter::all, true);
        const std::vector<StepTime>& t = runs.at(0).steps;
        ASSERT_EQ(t.size(), plan.steps.size());
        std::vector<int> last_on_lane(static_cast<size_t>(plan.lanes), -1);
        for (size_t i = 0; i < t.size(); ++i) {
          const Step& s = plan.steps[i];
          EXPECT_TRUE(ran(t[i])) << "step " << i;
          EXPECT_LE(t[i].end_us, runs[0].total_us) << "step " << i;
          for (int w : s.waits)
            EXPECT_GE(t[i].start_us, t[static_cast<size_t>(w)].end_us) << "step " << i << " waits " << w;
          const int prev = last_on_lane[static_cast<size_t>(s.lane)];
          if (prev >= 0) {
            EXPECT_GE(t[i].start_us, t[static_cast<size_t>(prev)].end_us) << "lane order at " << i;
          }
          last_on_lane[static_cast<size_t>(s.lane)] = static_cast<int>(i);
        }
        EXPECT_TRUE(executor().run(StepFilter::all, false).at(0).steps.empty());
      }
}

TEST(Dtypes, SupportsF32F64Bf16AndRefusesTheRest) {
  Executor& ex = executor();
  EXPECT_TRUE(ex.supports(Dtype::f32));
  EXPECT_TRUE(ex.supports(Dtype::f64));
  EXPECT_TRUE(ex.supports(Dtype::bf16));
  EXPECT_EQ(ex.out_dtype(Dtype::f32), Dtype::f32);
  EXPECT_EQ(ex.out_dtype(Dtype::f64), Dtype::f64);
  EXPECT_EQ(ex.out_dtype(Dtype::bf16), Dtype::f32);
  for (Dtype d : {Dtype::f16, Dtype::tf32, Dtype::fp8_e4m3}) {
    EXPECT_FALSE(ex.supports(d)) << to_string(d);
    const Plan plan = make_plan(
        {.op = Op::ag_gemm, .m = 2L * world(), .n = 4L * world(), .k = 3, .world = world(), .b_layout = BLayout::kn},
        {}, rank());
    EXPECT_THROW(ex.prepare({plan}, d), UsageError) << to_string(d);
  }
  EXPECT_EQ(ex.backend(), "cpu");
  // The note is empty unless the rank is pinned to one core (as mpirun -np 1 or 2 does) or the
  // node has more ranks than cores (each rank has at least one BLAS thread; one node here).
  cpu_set_t set;
  ASSERT_EQ(sched_getaffinity(0, sizeof(set), &set), 0);
  const bool crowded = world() > static_cast<int>(std::thread::hardware_concurrency());
  EXPECT_EQ(ex.timing_note().empty(), CPU_COUNT(&set) >= 2 && !crowded) << ex.timing_note();
  EXPECT_EQ(ex.local_ranks(), std::vector<int>{rank()});
  EXPECT_EQ(ex.host().procs(), world());
}

TEST(Agreement, RanksWithDifferentShapesAreToldOnEveryRank) {
  if (world() == 1) GTEST_SKIP() << "one rank cannot disagree with itself";
  const int P = world();
  const int64_t m = rank() == P - 1 ? 3 * P : 2 * P;  // the last rank has another M
  const Plan plan =
      make_plan({.op = Op::ag_gemm, .m = m, .n = 2L * P, .k = 4, .world = P, .b_layout = BLayout::kn}, {}, rank());
  try {
    executor().prepare({plan}, Dtype::f32);
    ADD_FAILURE() << "prepare accepted ranks that disagree on M";
  } catch (const UsageError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("disagree on M"), std::string::npos) << what;
    EXPECT_NE(what.find("rank " + std::to_string(P - 1) + " has " + std::to_string(3 * P)), std::string::npos) << what;
    EXPECT_EQ(what.find("N:"), std::string::npos) << what;  // only what differs is named
  }
}

TEST(Agreement, DifferentDtypesAndAlgorithmsAreNamed) {
  if (world() == 1) GTEST_SKIP() << "one rank cannot disagree with itself";
  const int P = world();
  PlanOptions o;
  o.algo = rank() == 0 ? Algo::ring : Algo::bidir;
  const Plan plan =
      make_plan({.op = Op::gemm_rs, .m = 2L * P, .n = 3, .k = 2L * P, .world = P, .b_layout = BLayout::kn}, o, rank());
  try {
    executor().prepare({plan}, rank() == 0 ? Dtype::f32 : Dtype::f64);
    ADD_FAILURE() << "prepare accepted ranks that disagree on dtype and algorithm";
  } catch (const UsageError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("dtype: rank 0 has f32, rank 1 has f64"), std::string::npos) << what;
    EXPECT_NE(what.find("algorithm: rank 0 has ring, rank 1 has bidir"), std::string::npos) << what;
  }
}

TEST(Buffers, WrongSizesAndIndicesAreErrors) {
  const Plan plan = prepared(Op::gemm_rs, Algo::ring);
  const BufferSpec& as = plan.buffers[kBufA];
  std::vector<float> a(static_cast<size_t>(as.rows * as.cols));
  EXPECT_NO_THROW(executor().write(0, kBufA, a.data(), a.size() * sizeof(float)));
  EXPECT_THROW(executor().write(0, kBufA, a.data(), a.size() * sizeof(float) - 4), UsageError);
  EXPECT_THROW(executor().write(1, kBufA, a.data(), a.size() * sizeof(float)), UsageError);
  EXPECT_THROW(executor().read(0, static_cast<int>(plan.buffers.size()), a.data(), 4), std::runtime_error);
}

TEST(Poison, FillsCWithNaNAndLeavesInputsAlone) {
  const Plan plan = prepared(Op::ag_gemm, Algo::sequential);
  executor().poison();
  const BufferSpec& cs = plan.buffers[kBufC];
  std::vector<float> c(static_cast<size_t>(cs.rows * cs.cols));
  executor().read(0, kBufC, c.data(), c.size() * sizeof(float));
  for (float v : c) EXPECT_TRUE(std::isnan(v));
  const BufferSpec& as = plan.buffers[kBufA];
  std::vector<float> a(static_cast<size_t>(as.rows * as.cols));
  executor().read(0, kBufA, a.data(), a.size() * sizeof(float));
  EXPECT_EQ(decode(a.data(), a.size(), Dtype::f32), make_local_a(plan.problem, rank(), 3, Dtype::f32).v);
}

// bind(): every algorithm runs on the caller's memory: C lands in the caller's vector (the
// executor's own C stays poisoned after an unbind), and a wrong size is refused.
TEST(Bind, RunsOnTheCallersMemory) {
  ASSERT_TRUE(executor().can_bind());
  for (Op op : all_ops())
    for (Algo algo : all_algos()) {
      const Plan plan = prepared(op, algo);
      const Problem& p = plan.problem;
      const auto a = encode(make_local_a(p, rank(), 5, Dtype::f32).v, Dtype::f32);
      const auto b = encode(make_local_b(p, rank(), 5, Dtype::f32).v, Dtype::f32);
      const BufferSpec& cs = plan.buffers[kBufC];
      std::vector<float> c(static_cast<size_t>(cs.rows * cs.cols), std::nanf(""));
      executor().bind(0, kBufA, const_cast<unsigned char*>(a.data()), a.size());
      executor().bind(0, kBufB, const_cast<unsigned char*>(b.data()), b.size());
      executor().bind(0, kBufC, c.data(), c.size() * sizeof(float));
      EXPECT_THROW(executor().bind(0, kBufC, c.data(), c.size() * sizeof(float) - 4), UsageError);
      executor().run(StepFilter::all, false);
      const Comparison cmp = compare(std::vector<double>(c.begin(), c.end()), reference_c(p, rank(), 5, Dtype::f32),
                                     Dtype::f32, Dtype::f32, p.k);
      EXPECT_EQ(cmp.wrong, 0) << to_string(op) << " " << to_string(algo) << ": C in the caller's memory";
      executor().bind(0, kBufC, nullptr, 0);  // the executor's own C again: poisoned by prepared(), untouched
      std::vector<float> own(c.size());
      executor().read(0, kBufC, own.data(), own.size() * sizeof(float));
      for (float v : own) EXPECT_TRUE(std::isnan(v)) << to_string(op) << " " << to_string(algo);
    }
}

}  // namespace
}  // namespace collmm::cpu_test
