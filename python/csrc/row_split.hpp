// row_split.hpp: the caller's split of a dimension over the ranks, as collmm's plans take it. A
// plan splits M (and ag_gemm's N, gemm_rs's K) as block_size(total, P, q) (collmm/types.hpp). Any
// other split runs as the plan of P equal blocks of the largest rank's size. Examples: a sequence
// of s rows sharded over P ranks with a batch of b > 1 (each holds block_size(s, P, q) * b rows); a
// weight sharded as torch.chunk splits it. Each rank's part is padded with zeros to that size on
// the way in, the padding dropped on the way out. That is one copy each way, and at most
// P * (most - fewest) rows or columns of GEMM more. The rows are M; the columns of ag_gemm's B (N)
// and of gemm_rs's A and rows of its B (K) are split the same way, each rank's N_r or K_r its own.
#pragma once

#include <vector>

#include <ATen/ATen.h>

#include "collmm/types.hpp"

namespace collmm::torch_ext {

struct RowSplit {
  std::vector<int64_t> rows;  // per rank (rows, or columns where the split is of N or K)
  int64_t total = 0, most = 0;
  bool collmm_split = true;  // rows[q] == block_size(total, P, q): the plan takes them as they are

  explicit RowSplit(std::vector<int64_t> per_rank) : rows(std::move(per_rank)) {
    const int p = static_cast<int>(rows.size());
    for (int64_t r : rows) total += r, most = std::max(most, r);
    for (int q = 0; q < p; ++q) collmm_split = collmm_split && rows[static_cast<size_t>(q)] == block_size(total, p, q);
  }
  int world() const { return static_cast<int>(rows.size()); }
  // The M of the plan: the total, or P blocks of `most` rows.
  int64_t plan_rows() const { return collmm_split ? total : most * world(); }
  int64_t offset(int q) const {
    int64_t o = 0;
    for (int i = 0; i < q; ++i) o += rows[static_cast<size_t>(i)];
    return o;
  }

  // [total, ...] (every rank's rows, in rank order) as the plan's [plan_rows, ...]: rank q's rows
  // at q * most, zero rows after them.
  at::Tensor spread(const at::Tensor& t) const {
    if (collmm_split) return t;
    at::Tensor out = at::zeros({plan_rows(), t.size(1)}, t.options());
    for (int q = 0; q < world(); ++q)
      out.narrow(0, q * most, rows[static_cast<size_t>(q)]).copy_(t.narrow(0, offset(q), rows[static_cast<size_t>(q)]));
    return out;
  }
  // The plan's [plan_rows, ...] back as [total, ...]: the padding rows dropped.
  at::Tensor compact(const at::Tensor& t) const {
    if (collmm_split) return t;
    std::vector<at::Tensor> parts;
    for (int q = 0; q < world(); ++q) parts.push_back(t.narrow(0, q * most, rows[static_cast<size_t>(q)]));
    return at::cat(parts);
  }
};

// `t` with zeros appended along `dim` up to `size` (a new contiguous tensor), or `t` when it has that size.
inline at::Tensor zero_padded(const at::Tensor& t, int64_t dim, int64_t size) {
  if (t.size(dim) == size) return t;
  std::vector<int64_t> sizes = t.sizes().vec();
  sizes[static_cast<size_t>(dim)] = size;
  at::Tensor out = at::zeros(sizes, t.options());
  out.narrow(dim, 0, t.size(dim)).copy_(t);
  return out;
}

// A B [K, N] (as the op reads it) padded with zeros along `dim` (0: K, 1: N) up to `size`, stored
// as `layout` reads it: row-major [K, N] (kn) or the transpose of a row-major [N, K] (nk).
inline at::Tensor zero_padded_b(const at::Tensor& b, int64_t dim, int64_t size, BLayout layout) {
  if (b.size(dim) == size) return b;
  return layout == BLayout::nk ? zero_padded(b.t(), 1 - dim, size).t() : zero_padded(b, dim, size);
}

}  // namespace collmm::torch_ext
