// op_args.hpp: what the ops (ops.cpp) check of one rank's own arguments before the ranks agree, and
// what they read from the numbers every rank sent (agree_and_gather's rows: one row per rank).
// Each check returns the first problem found, as a message, or "": a rank sends it to the others,
// so every rank raises it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "collmm/types.hpp"

namespace collmm::torch_ext {

// "[2, 3, 4]"
std::string dims(at::IntArrayRef sizes);
// "None" or the number.
std::string optional_int(std::optional<int64_t> v);

// How B can be read in place: as [K, N] row-major (kn), as the transpose of a row-major [N, K]
// (nk), or either (a B of one row or column), sent to the other ranks as a number; none: neither.
enum LayoutFit { kn_only = 0, nk_only = 1, either = 2 };
std::optional<LayoutFit> layout_fit(const at::Tensor& b);

// `dim` of a tensor of `rank` dims in [0, rank - 1) (not the last: K), or -1.
int64_t leading_dim(int64_t dim, int64_t rank);
// `dim` of a tensor of `rank` dims in [0, rank) (negative dims count from the end), or -1.
int64_t any_dim(int64_t dim, int64_t rank);

// One rank's own arguments.
// `dim_name` null: A has no dim gathered or scattered (gemm_ar), and may have 1 dim.
// `cols_split`: A's columns are this rank's part of a K split over the ranks (gemm_rs), which may
// be none (torch.chunk gives the last ranks none where K < P * ceil(K / P) leaves them nothing).
std::string check_a(const at::Tensor& a, const char* name, int64_t dim, const char* dim_name, bool cols_split);
// `k` < 0: B's rows are checked later (they are every rank's K, gathered).
std::string check_b(const at::Tensor& b, const at::Tensor& a, const std::string& name, int64_t k);
std::string check_reduce_op(const std::string& reduce_op);
// `algo`: "auto" or an entry of the command lines' --algo ("ring", "ring:pieces4h"; algo_entries.hpp)
// that `op`'s algorithm takes whole (no op: any entry the parser reads). Its message names the
// accepted spellings.
std::string check_algo(const std::string& algo, std::optional<Op> op);
// The algorithm of `algo` without its options ("ring:pieces4h" -> "ring", "auto" as it is): what the
// backward's other op runs (the options were chosen for the forward's op). `algo` passed check_algo.
std::string algorithm_of(const std::string& algo);

// From every rank's numbers (`all[q][at]`), each throwing UsageError where the ranks' do not fit:
// the layout every rank reads its B with: the one that some rank's B needs (kn when none does);
BLayout agreed_layout(const std::vector<std::vector<double>>& all, size_t at, const std::string& what);
// Every rank's count (`all[q][at]`: its columns of a split N or K), in rank order.
std::vector<int64_t> rank_counts(const std::vector<std::vector<double>>& all, size_t at);

// Every rank's size along the gathered (scattered) dim, as agreed (the first number each rank sent):
// as plan rows (times `rest`, the rows per slice), their sum and a "3, 3, 2" text for messages.
struct RankSizes {
  std::vector<int64_t> sizes, rows;
  int64_t total = 0;
  std::string text() const;
};
RankSizes rank_sizes(const std::vector<std::vector<double>>& all, int64_t rest);

}  // namespace collmm::torch_ext
