// test_gemm.cpp: the cuBLASLt GEMM engine alone: row slices at odd offsets written straight into
// C, accumulation (beta = 1), both B layouts, every dtype, an SM count target, the timed algorithm
// choice; against an f64 host GEMM of the same (dtype-rounded) inputs.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "cuda_check.hpp"
#include "data.hpp"
#include "gpu_case.hpp"
#include "lt_gemm.hpp"

namespace collmm::cuda {
namespace {

std::vector<double> random_values(size_t n, Dtype d, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> u(0.1, 1.0);
  std::vector<double> v(n);
  for (auto& x : v) x = round_to(d, (gen() & 1 ? -1 : 1) * u(gen));
  return v;
}

void* upload(const std::vector<double>& v, Dtype d) {
  const auto bytes = encode(v, d);
  void* p = nullptr;
  COLLMM_CUDA(cudaMalloc(&p, bytes.size()));
  COLLMM_CUDA(cudaMemcpy(p, bytes.data(), bytes.size(), cudaMemcpyHostToDevice));
  return p;
}

struct Case {
  Dtype dtype;
  BLayout layout;
  bool accumulate;
  int sm_target;
  GemmAlgo choice;
  int64_t m = 29, row0 = 7;
  bool fp8_scales = false;  // scales 2 (A) and 0.5 (B): the product is unchanged only if both apply
};

// C is [rows_c, n]; the GEMM covers rows [row0, row0 + m) of C and of A (A is [rows_c, k]).
void check_or_throw(const Case& c) {
  const int64_t row0 = c.row0, m = c.m, rows_c = row0 + m + 9, n = c.dtype == Dtype::fp8_e4m3 ? 48 : 37,
                k = c.dtype == Dtype::fp8_e4m3 ? 64 : 53;
  const Dtype out = output_dtype(GemmLibrary::cublaslt, c.dtype);
  const auto a = random_values(rows_c * k, c.dtype, 1), b = random_values(k * n, c.dtype, 2);
  const auto c0 = random_values(rows_c * n, out, 3);
  void *da = upload(a, c.dtype), *db = upload(b, c.dtype), *dc = upload(c0, out);
  GemmEngine eng(0, size_t(8) << 20);
  eng.set_sm_target(c.sm_target);
  eng.set_algo_choice(c.choice);
  if (c.fp8_scales) eng.set_fp8_scales(2.0f, 0.5f);
  void* ws = nullptr;
  COLLMM_CUDA(cudaMalloc(&ws, eng.workspace_bytes()));
  GemmArgs g;
  g.m = m, g.n = n, g.k = k;
  g.a = static_cast<char*>(da) + row0 * k * dtype_size(c.dtype);
  g.b = db;
  g.c = static_cast<char*>(dc) + row0 * n * dtype_size(out);
  g.lda = k, g.ldb = c.layout == BLayout::kn ? n : k, g.ldc = n;
  g.dtype = c.dtype, g.b_layout = c.layout, g.accumulate = c.accumulate;
  // b holds B[kk][nn] at kk * n + nn; for nk the device copy must be B^T.
  if (c.layout == BLayout::nk) {
    std::vector<double> bt(k * n);
    for (int64_t kk = 0; kk < k; ++kk)
      for (int64_t nn = 0; nn < n; ++nn) bt[nn * k + kk] = b[kk * n + nn];
    cudaFree(db);
    db = upload(bt, c.dtype);
    g.b = db;
  }
  for (int rep = 0; rep < 2; ++rep) {  // the second call comes from the cache
    if (rep == 1) {
      const auto bytes = encode(c0, out);
      COLLMM_CUDA(cudaMemcpy(dc, bytes.data(), bytes.size(), cudaMemcpyHostToDevice));
    }
    eng.gemm(g, nullptr, ws);
    COLLMM_CUDA(cudaDeviceSynchronize());
    std::vector<unsigned char> got_bytes(rows_c * n * dtype_size(out));
    COLLMM_CUDA(cudaMemcpy(got_bytes.data(), dc, got_bytes.size(), cudaMemcpyDeviceToHost));
    const auto got = decode(got_bytes.data(), rows_c * n, out);
    HostMatrix want{rows_c, n, c0};
    for (int64_t i = row0; i < row0 + m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double s = c.accumulate ? c0[i * n + j] : 0.0;
        for (int64_t kk = 0; kk < k; ++kk) s += a[i * k + kk] * b[kk * n + j];
        want.at(i, j) = s;
      }
    const Comparison cmp = compare(got, want, c.dtype, out, k);
    EXPECT_EQ(cmp.wrong, 0) << to_string(c.dtype) << " " << to_string(c.layout) << (c.accumulate ? " accumulate" : "")
                            << " sm_target=" << c.sm_target << " rep " << rep << ": max rel err " << cmp.max_rel_err;
  }
  cudaFree(da), cudaFree(db), cudaFree(dc), cudaFree(ws);
}

void check(const Case& c) {
  try {
    check_or_throw(c);
  } catch (const std::exception& e) {
    ADD_FAILURE() << to_string(c.dtype) << " " << to_string(c.layout) << (c.accumulate ? " accumulate" : "")
                  << " sm_target=" << c.sm_target << " m=" << c.m << " row0=" << c.row0 << ": " << e.what();
  }
}

TEST(CudaGemm, EveryDtypeLayoutAndAccumulate) {
  COLLMM_NEED_GPUS(1);
  for (Dtype d : {Dtype::f64, Dtype::f32, Dtype::tf32, Dtype::f16, Dtype::bf16, Dtype::fp8_e4m3})
    for (BLayout l : {BLayout::kn, BLayout::nk}) {
      if (d == Dtype::fp8_e4m3 && l == BLayout::kn) continue;
      for (bool acc : {false, true}) check({d, l, acc, 0, GemmAlgo::heuristic});
    }
}

// fp8 chunks: which row counts and offsets cuBLASLt takes (every failing one is reported).
TEST(CudaGemm, Fp8RowCountsAndOffsets) {
  COLLMM_NEED_GPUS(1);
  for (int64_t m : {16, 29, 32})
    for (int64_t row0 : {0, 7, 8, 16}) check({Dtype::fp8_e4m3, BLayout::nk, false, 0, GemmAlgo::heuristic, m, row0});
}

TEST(CudaGemm, Fp8PerTensorScales) {
  COLLMM_NEED_GPUS(1);
  check({Dtype::fp8_e4m3, BLayout::nk, false, 0, GemmAlgo::heuristic, 29, 7, true});
  check({Dtype::fp8_e4m3, BLayout::nk, true, 0, GemmAlgo::heuristic, 32, 0, true});
}

TEST(CudaGemm, SmTargetAndTimedChoice) {
  COLLMM_NEED_GPUS(1);
  check({Dtype::bf16, BLayout::kn, false, 100, GemmAlgo::heuristic});
  check({Dtype::bf16, BLayout::kn, true, 0, GemmAlgo::timed});
  check({Dtype::f16, BLayout::nk, false, 64, GemmAlgo::timed});
}

TEST(CudaGemm, Fp8WithBAsKnIsAUsageError) {
  COLLMM_NEED_GPUS(1);
  GemmEngine eng(0, size_t(1) << 20);
  GemmArgs g;
  g.m = g.n = g.k = 16;
  g.lda = g.ldb = g.ldc = 16;
  g.dtype = Dtype::fp8_e4m3;
  g.b_layout = BLayout::kn;
  EXPECT_THROW(eng.gemm(g, nullptr, nullptr), UsageError);
}

}  // namespace
}  // namespace collmm::cuda
