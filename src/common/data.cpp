// data.cpp: inputs as a pure function of (seed, tensor, row, col); local shards; the f64
// reference (OpenBLAS dgemm on the regenerated global inputs); comparison with a dtype tolerance.
#include "data.hpp"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <thread>

namespace collmm {
namespace {

uint64_t splitmix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// f(i) for i in [0, n), spread over the host's cores (inputs of 8192-sized benchmarks are
// hundreds of millions of values).
template <class F>
void parallel_rows(int64_t n, F f) {
  const int64_t threads =
      std::min<int64_t>(std::max(1u, std::thread::hardware_concurrency()), std::max<int64_t>(1, n / 64));
  if (threads <= 1) {
    for (int64_t i = 0; i < n; ++i) f(i);
    return;
  }
  std::vector<std::thread> pool;
  for (int64_t t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      for (int64_t i = t; i < n; i += threads) f(i);
    });
  for (auto& th : pool) th.join();
}

}  // namespace

double input_value(uint64_t seed, int tensor, int64_t i, int64_t j, Dtype dtype) {
  uint64_t h = splitmix(seed ^ splitmix(static_cast<uint64_t>(tensor) + 0x51ed));
  h = splitmix(h ^ static_cast<uint64_t>(i));
  h = splitmix(h ^ static_cast<uint64_t>(j));
  const double u = static_cast<double>(h >> 11) / static_cast<double>(1ull << 53);  // [0, 1)
  const double mag = 0.1 + 0.9 * u;
  return round_to(dtype, (h & 1) ? -mag : mag);
}

HostMatrix make_local_a(const Problem& p, int rank, uint64_t seed, Dtype dtype) {
  const LocalShape s = local_shape(p, rank);
  const int64_t row0 = s.a_row0, col0 = s.a_col0;  // where A_r lies in A (the op's row)
  HostMatrix a{s.a_rows, s.a_cols, std::vector<double>(static_cast<size_t>(s.a_rows * s.a_cols))};
  parallel_rows(s.a_rows, [&](int64_t i) {
    for (int64_t j = 0; j < s.a_cols; ++j) a.at(i, j) = input_value(seed, 0, row0 + i, col0 + j, dtype);
  });
  return a;
}

HostMatrix make_global_a(const Problem& p, uint64_t seed, Dtype dtype) {
  Problem whole = p;  // one rank of any op holds all of A
  whole.world = 1;
  return make_local_a(whole, 0, seed, dtype);
}

HostMatrix make_local_b(const Problem& p, int rank, uint64_t seed, Dtype dtype) {
  const LocalShape s = local_shape(p, rank);
  // Global B is [K, N]; B_r is the block at (b_k0, b_n0) (the op's row).
  const int64_t k0 = s.b_k0, n0 = s.b_n0;
  HostMatrix b{s.b_rows, s.b_cols, std::vector<double>(static_cast<size_t>(s.b_rows * s.b_cols))};
  parallel_rows(s.gemm_k, [&](int64_t kk) {
    for (int64_t nn = 0; nn < s.gemm_n; ++nn) {
      const double v = input_value(seed, 1, k0 + kk, n0 + nn, dtype);
      if (p.b_layout == BLayout::kn)
        b.at(kk, nn) = v;
      else
        b.at(nn, kk) = v;
    }
  });
  return b;
}

HostMatrix reference_c(const Problem& p, int rank, uint64_t seed, Dtype dtype) {
  // The rows of global A and the columns of global B this rank's C covers.
  const LocalShape s = local_shape(p, rank);
  const int64_t m0 = s.c_row0, rows = s.c_rows, n0 = s.c_col0, cols = s.c_cols;
  std::vector<double> a(static_cast<size_t>(rows * p.k)), b(static_cast<size_t>(p.k * cols));
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t kk = 0; kk < p.k; ++kk) a[i * p.k + kk] = input_value(seed, 0, m0 + i, kk, dtype);
  for (int64_t kk = 0; kk < p.k; ++kk)
    for (int64_t j = 0; j < cols; ++j) b[kk * cols + j] = input_value(seed, 1, kk, n0 + j, dtype);
  HostMatrix c{rows, cols, std::vector<double>(static_cast<size_t>(rows * cols))};
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(rows), static_cast<int>(cols),
              static_cast<int>(p.k), 1.0, a.data(), static_cast<int>(p.k), b.data(), static_cast<int>(cols), 0.0,
              c.v.data(), static_cast<int>(cols));
  return c;
}

double tolerance(Dtype in, Dtype out, int64_t k) {
  // Errors are measured against |want| + sqrt(k) * 0.35 (the typical size of a sum of k products of
  // inputs in +-[0.1, 1]), so these are relative to a typical output element.
  const double grow = std::max(1.0, std::log2(static_cast<double>(k)));
  switch (out) {
    case Dtype::f64: return 1e-12 * grow;
    case Dtype::f32: return (in == Dtype::tf32 ? 2e-3 : 2e-6) * grow;
    case Dtype::tf32: return 2e-3 * grow;
    case Dtype::f16: return 4e-3;
    case Dtype::bf16:
    case Dtype::fp8_e4m3: return 3e-2;
  }
  return 1e-2;
}

Comparison compare(const std::vector<double>& got, const HostMatrix& want, Dtype in, Dtype out, int64_t k) {
  Comparison c;
  const double scale = std::sqrt(static_cast<double>(k)) * 0.35;
  const double tol = tolerance(in, out, k);
  const size_t n = std::min(got.size(), want.v.size());
  c.wrong = static_cast<int64_t>(want.v.size() - n);  // missing elements count as wrong
  for (size_t i = 0; i < n; ++i) {
    const double err = std::fabs(got[i] - want.v[i]) / (std::fabs(want.v[i]) + scale);
    if (!(err <= tol)) ++c.wrong;  // NaN (never written) fails here too
    if (std::isnan(err) || err > c.max_rel_err) c.max_rel_err = std::isnan(err) ? INFINITY : err;
  }
  return c;
}

}  // namespace collmm
