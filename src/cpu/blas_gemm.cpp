// blas_gemm.cpp: OpenBLAS calls for the cpu backend's GEMMs and adds.
//
// bf16: cblas_sbgemm (bf16 A and B, f32 C) when the OpenBLAS build exports it (COLLMM_HAVE_SBGEMM,
// found by CMake). Otherwise A's rows and B are widened to f32 (exact: bf16 is the top half of an
// f32) and cblas_sgemm runs: the same products and f32 accumulation, at f32 speed.
#include "blas_gemm.hpp"

#include <cblas.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <vector>

namespace collmm::cpu {
namespace {

blasint to_blasint(int64_t v, const char* what, const char* file, int line) {
  if (v < 0 || v > static_cast<int64_t>(std::numeric_limits<blasint>::max())) {
    std::ostringstream msg;
    msg << file << ":" << line << ": " << what << " = " << v << " does not fit the BLAS integer (max "
        << std::numeric_limits<blasint>::max() << ")";
    throw std::runtime_error(msg.str());
  }
  return static_cast<blasint>(v);
}
#define COLLMM_BLASINT(v) to_blasint((v), #v, __FILE__, __LINE__)

#ifndef COLLMM_HAVE_SBGEMM
// rows x cols bf16 elements with row stride ld -> packed f32.
void widen_bf16(const void* src, int64_t rows, int64_t cols, int64_t ld, std::vector<float>& dst) {
  dst.resize(static_cast<size_t>(rows * cols));
  const auto* s = static_cast<const uint16_t*>(src);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) {
      const uint32_t bits = static_cast<uint32_t>(s[i * ld + j]) << 16;
      std::memcpy(&dst[static_cast<size_t>(i * cols + j)], &bits, sizeof(float));
    }
}
#endif

}  // namespace

bool gemm_supports(Dtype in) { return in == Dtype::f32 || in == Dtype::f64 || in == Dtype::bf16; }

bool have_native_bf16() {
#ifdef COLLMM_HAVE_SBGEMM
  return true;
#else
  return false;
#endif
}

void run_gemm(const GemmCall& g) {
  if (g.m == 0 || g.n == 0) return;
  const blasint m = COLLMM_BLASINT(g.m), n = COLLMM_BLASINT(g.n), k = COLLMM_BLASINT(g.k);
  const blasint lda = COLLMM_BLASINT(g.lda), ldb = COLLMM_BLASINT(g.ldb), ldc = COLLMM_BLASINT(g.ldc);
  const CBLAS_TRANSPOSE tb = g.b_layout == BLayout::nk ? CblasTrans : CblasNoTrans;
  // beta = 0 makes BLAS ignore C's old contents (which may be the NaN poison).
  const double beta = g.accumulate ? 1.0 : 0.0;
  switch (g.in) {
    case Dtype::f64:
      cblas_dgemm(CblasRowMajor, CblasNoTrans, tb, m, n, k, 1.0, static_cast<const double*>(g.a), lda,
                  static_cast<const double*>(g.b), ldb, beta, static_cast<double*>(g.c), ldc);
      return;
    case Dtype::f32:
      cblas_sgemm(CblasRowMajor, CblasNoTrans, tb, m, n, k, 1.0f, static_cast<const float*>(g.a), lda,
                  static_cast<const float*>(g.b), ldb, static_cast<float>(beta), static_cast<float*>(g.c), ldc);
      return;
    case Dtype::bf16: {
#ifdef COLLMM_HAVE_SBGEMM
      cblas_sbgemm(CblasRowMajor, CblasNoTrans, tb, m, n, k, 1.0f, static_cast<const bfloat16*>(g.a), lda,
                   static_cast<const bfloat16*>(g.b), ldb, static_cast<float>(beta), static_cast<float*>(g.c), ldc);
#else
      thread_local std::vector<float> a32, b32;  // one pair per GEMM lane thread
      const int64_t b_rows = g.b_layout == BLayout::nk ? g.n : g.k;
      const int64_t b_cols = g.b_layout == BLayout::nk ? g.k : g.n;
      widen_bf16(g.a, g.m, g.k, g.lda, a32);
      widen_bf16(g.b, b_rows, b_cols, g.ldb, b32);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, tb, m, n, k, 1.0f, a32.data(), k, b32.data(), COLLMM_BLASINT(b_cols),
                  static_cast<float>(beta), static_cast<float*>(g.c), ldc);
#endif
      return;
    }
    default: throw std::runtime_error("cpu backend: no GEMM for " + to_string(g.in) + " inputs");
  }
}

void run_add(Dtype dtype, void* y, const void* x, int64_t count) {
  // axpy takes a BLAS integer count: long slices go in pieces.
  const int64_t piece = std::numeric_limits<blasint>::max();
  for (int64_t done = 0; done < count; done += piece) {
    const blasint n = static_cast<blasint>(std::min(piece, count - done));
    if (dtype == Dtype::f32)
      cblas_saxpy(n, 1.0f, static_cast<const float*>(x) + done, 1, static_cast<float*>(y) + done, 1);
    else if (dtype == Dtype::f64)
      cblas_daxpy(n, 1.0, static_cast<const double*>(x) + done, 1, static_cast<double*>(y) + done, 1);
    else
      throw std::runtime_error("cpu backend: no add for " + to_string(dtype) + " elements");
  }
}

void set_blas_threads(int threads) { openblas_set_num_threads(threads); }

}  // namespace collmm::cpu
