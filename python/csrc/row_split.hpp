// row_split.hpp: the caller's split of the rows over the ranks, as collmm's plans take it. A plan
// splits M as block_size(M, P, q) (collmm/types.hpp). Any other split (a sequence of s rows
// sharded over P ranks with a batch of b > 1 each holds block_size(s, P, q) * b rows) runs as the
// plan of P equal blocks of the largest rank's rows: each rank's rows padded with zero rows to that
// size on the way in, the padding rows dropped on the way out (one copy each way; at most
// P * (most - fewest) rows of GEMM more).
#pragma once

#include <vector>

#include <ATen/ATen.h>

#include "collmm/types.hpp"

namespace collmm::torch_ext {

struct RowSplit {
  std::vector<int64_t> rows;  // per rank
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

}  // namespace collmm::torch_ext
