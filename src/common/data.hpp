// data.hpp: test and benchmark data. Inputs are a pure function of (seed, tensor, row, col),
// so any process can make any rank's shard, or the whole gathered matrix for a reference, without
// moving data. Values are random, non-zero, and exactly representable in the dtype they are made
// for. Also: element encoding (f64/f32/f16/bf16/fp8 <-> double), the f64 reference, and the
// comparison with a tolerance fit for the dtype.
#pragma once

#include <cstdint>
#include <vector>

#include "collmm/plan.hpp"

namespace collmm {

// A host matrix of doubles, row-major.
struct HostMatrix {
  int64_t rows = 0, cols = 0;
  std::vector<double> v;
  double& at(int64_t i, int64_t j) { return v[static_cast<size_t>(i * cols + j)]; }
  double at(int64_t i, int64_t j) const { return v[static_cast<size_t>(i * cols + j)]; }
};

// The value of global A (tensor 0) or global B (tensor 1, indexed [k][n] whatever the layout):
// uniform in +-[0.1, 1], rounded to `dtype` (fp8 inputs are scaled to fit e4m3 exactly).
double input_value(uint64_t seed, int tensor, int64_t i, int64_t j, Dtype dtype);

// This rank's A_r and B_r exactly as the plan's buffers kBufA and kBufB hold them.
HostMatrix make_local_a(const Problem&, int rank, uint64_t seed, Dtype dtype);
HostMatrix make_local_b(const Problem&, int rank, uint64_t seed, Dtype dtype);
// The global A [M, K] (for ag_gemm's gathered output check).
HostMatrix make_global_a(const Problem&, uint64_t seed, Dtype dtype);

// The expected C_r, computed independently: the global inputs regenerated and one f64 GEMM
// (OpenBLAS dgemm) over the rows and columns this rank owns.
HostMatrix reference_c(const Problem&, int rank, uint64_t seed, Dtype dtype);

// Raw elements <-> doubles. The output dtype of a backend is what decode is told.
std::vector<unsigned char> encode(const std::vector<double>&, Dtype);
std::vector<double> decode(const void* bytes, size_t count, Dtype);
double round_to(Dtype, double);

struct Comparison {
  int64_t wrong = 0;       // outside the tolerance, NaN, or never written
  double max_rel_err = 0;  // max |got - want| / (|want| + scale)
};
// Relative tolerance for an output of `out` dtype from inputs of `in` dtype over a sum of k terms.
double tolerance(Dtype in, Dtype out, int64_t k);
// Elementwise comparison; errors are relative to max(|want|, sqrt(k) * typical term).
Comparison compare(const std::vector<double>& got, const HostMatrix& want, Dtype in, Dtype out, int64_t k);

}  // namespace collmm
