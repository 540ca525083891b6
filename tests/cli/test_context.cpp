// test_context.cpp: the C++ API (collmm/collmm.hpp) under mpirun: ag_gemm, gemm_rs and gemm_ar through a
// Context on every rank, every algorithm, both B layouts, against the f64 reference of data.hpp;
// shapes change between calls (the Context re-plans), a shape one rank disagrees on is refused, and
// automatic calls (timed candidates, the decision kept, measuring off).
#include <gtest/gtest.h>

#include "collmm/collmm.hpp"
#include "data.hpp"
#include "executor.hpp"
#include "tuning.hpp"

using namespace collmm;

namespace {

Context& context() {
  static Context ctx([] {
    BackendOptions o;
    o.threads = 1;
    o.timeout_s = 60;
    return o;
  }());
  return ctx;
}

Comparison run_and_compare(Op op, int64_t m, int64_t n, int64_t k, Dtype dtype, const MatmulOptions& mo,
                           Comparison* gathered_cmp = nullptr) {
  Context& ctx = context();
  const Problem p{.op = op, .m = m, .n = n, .k = k, .world = ctx.world_size(), .b_layout = mo.b_layout};
  const int r = ctx.rank();
  const std::vector<unsigned char> a = encode(make_local_a(p, r, 7, dtype).v, dtype);
  const std::vector<unsigned char> b = encode(make_local_b(p, r, 7, dtype).v, dtype);
  const LocalShape s = local_shape(p, r);
  const Dtype out = ctx.out_dtype(dtype);
  std::vector<unsigned char> c(static_cast<size_t>(s.c_rows * s.c_cols) * dtype_size(out), 0xff);
  std::vector<unsigned char> g(static_cast<size_t>(m * k) * dtype_size(dtype), 0xff);
  if (op == Op::ag_gemm)
    ctx.ag_gemm(m, n, k, dtype, a.data(), b.data(), c.data(), g.data(), mo);
  else if (op == Op::gemm_rs)
    ctx.gemm_rs(m, n, k, dtype, a.data(), b.data(), c.data(), mo);
  else
    ctx.gemm_ar(m, n, k, dtype, a.data(), b.data(), c.data(), mo);
  if (gathered_cmp)
    *gathered_cmp =
        compare(decode(g.data(), static_cast<size_t>(m * k), dtype), make_global_a(p, 7, dtype), dtype, dtype, 1);
  return compare(decode(c.data(), static_cast<size_t>(s.c_rows * s.c_cols), out), reference_c(p, r, 7, dtype), dtype,
                 out, k);
}

TEST(Context, AgGemmEveryAlgorithmMatchesTheReference) {
  for (Algo algo : all_algos())
    for (BLayout layout : {BLayout::kn, BLayout::nk}) {
      MatmulOptions mo;
      mo.plan.algo = algo;
      mo.b_layout = layout;
      Comparison gathered;
      const Comparison c = run_and_compare(Op::ag_gemm, 13, 11, 9, Dtype::f32, mo, &gathered);
      EXPECT_EQ(c.wrong, 0) << to_string(algo) << " " << to_string(layout);
      EXPECT_EQ(gathered.wrong, 0) << to_string(algo) << " gathered A";
    }
}

TEST(Context, GemmRsEveryAlgorithmMatchesTheReference) {
  for (Algo algo : all_algos())
    for (BLayout layout : {BLayout::kn, BLayout::nk}) {
      MatmulOptions mo;
      mo.plan.algo = algo;
      mo.b_layout = layout;
      const Comparison c = run_and_compare(Op::gemm_rs, 14, 6, 10, Dtype::f64, mo);
      EXPECT_EQ(c.wrong, 0) << to_string(algo) << " " << to_string(layout);
    }
}

TEST(Context, GemmArEveryAlgorithmMatchesTheReference) {
  for (Algo algo : all_algos())
    for (BLayout layout : {BLayout::kn, BLayout::nk}) {
      MatmulOptions mo;
      mo.plan.algo = algo;
      mo.b_layout = layout;
      const Comparison c = run_and_compare(Op::gemm_ar, 14, 6, 11, Dtype::f32, mo);
      EXPECT_EQ(c.wrong, 0) << to_string(algo) << " " << to_string(layout);
    }
}

TEST(Context, RepeatedAndChangingShapes) {
  MatmulOptions mo;
  for (int64_t m : {8, 8, 17, 8})
    EXPECT_EQ(run_and_compare(Op::ag_gemm, m, 5, 4, Dtype::f32, mo).wrong, 0) << "M=" << m;
}

TEST(Context, ShapesThatDisagreeAreRefusedOnEveryRank) {
  Context& ctx = context();
  const int64_t m = ctx.rank() == 0 ? 12 : 9;  // rank 0 differs (with one rank there is nothing to disagree on)
  std::vector<float> a(64, 1.f), b(64, 1.f), c(256);
  if (ctx.world_size() == 1) GTEST_SKIP() << "one rank";
  try {
    ctx.ag_gemm(m, 4, 4, Dtype::f32, a.data(), b.data(), c.data());
    FAIL() << "no UsageError";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("ranks disagree on M: rank 0 has 12"), std::string::npos) << e.what();
  }
}

// Null pointers are refused (every rank passes the same ones here) before anything runs.
TEST(Context, NullPointersAreUsageErrors) {
  Context& ctx = context();
  std::vector<float> a(64, 1.f), b(64, 1.f), c(256);
  auto message = [](auto call) {
    try {
      call();
    } catch (const UsageError& e) {
      return std::string(e.what());
    }
    return std::string("no UsageError");
  };
  EXPECT_EQ(message([&] { ctx.ag_gemm(8, 4, 4, Dtype::f32, nullptr, b.data(), c.data()); }),
            "collmm::Context::ag_gemm: a is a null pointer");
  EXPECT_EQ(message([&] { ctx.ag_gemm(8, 4, 4, Dtype::f32, a.data(), nullptr, c.data()); }),
            "collmm::Context::ag_gemm: b is a null pointer");
  EXPECT_EQ(message([&] { ctx.gemm_rs(8, 4, 4, Dtype::f32, a.data(), b.data(), nullptr); }),
            "collmm::Context::gemm_rs: c is a null pointer");
  EXPECT_EQ(run_and_compare(Op::ag_gemm, 8, 5, 4, Dtype::f32, MatmulOptions{}).wrong, 0) << "usable afterwards";
}

// Automatic calls: with measuring on, the first call of a shape times the model's best candidates
// (every rank takes the same pick) and the result is right; later calls keep the decision; with a
// tuning cache the timed candidates are recorded; with measuring off, the model's pick.
TEST(Context, AutomaticChoiceMeasuredThenKept) {
  Context& ctx = context();
  const std::string cache = testing::TempDir() + "/context_auto_" + std::to_string(ctx.world_size()) + ".json";
  if (ctx.rank() == 0) std::remove(cache.c_str());
  AutoSettings settings;
  settings.tune_cache = cache;
  ctx.set_auto(settings);
  MatmulOptions mo;
  mo.choice = AlgoChoice::automatic;
  mo.b_layout = BLayout::nk;
  Comparison gathered;
  EXPECT_EQ(run_and_compare(Op::ag_gemm, 30, 12, 8, Dtype::f32, mo, &gathered).wrong, 0);
  EXPECT_EQ(gathered.wrong, 0);
  const AutoDecision first = ctx.last_auto();
  if (ctx.world_size() > 1) {
    EXPECT_EQ(first.source, "measured");
    EXPECT_NE(first.printed.find("# auto measured: "), std::string::npos) << first.printed;
    if (ctx.rank() == 0) {
      const TuningCache written = load_tuning_cache(cache);
      EXPECT_GE(written.entries.size(), 2u);
      for (const TuningEntry& e : written.entries) EXPECT_EQ(e.source, "auto");
    }
  }
  // Every rank took the same decision.
  const std::vector<std::string> all = ctx.executor().host().allgather(to_string(first.options));
  for (const std::string& o : all) EXPECT_EQ(o, all[0]);
  // Kept: the same shape again is not timed again, and still right.
  EXPECT_EQ(run_and_compare(Op::ag_gemm, 30, 12, 8, Dtype::f32, mo).wrong, 0);
  EXPECT_EQ(ctx.last_auto().printed, first.printed);
  EXPECT_EQ(run_and_compare(Op::gemm_rs, 30, 12, 9, Dtype::f64, mo).wrong, 0);

  // Off: the model's pick, nothing timed.
  settings.measure.measure = AutoMeasure::off;
  settings.tune_cache.clear();
  ctx.set_auto(settings);
  EXPECT_EQ(run_and_compare(Op::gemm_rs, 20, 10, 6, Dtype::f32, mo).wrong, 0);
  EXPECT_EQ(ctx.last_auto().source, "model");
  EXPECT_EQ(ctx.last_auto().printed.find("# auto measured: "), std::string::npos) << ctx.last_auto().printed;
  ctx.set_auto(AutoSettings{});
}

}  // namespace
