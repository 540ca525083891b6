// op_args.cpp: the ops' checks of one rank's arguments and their reading of the agreed numbers
// (op_args.hpp).
#include "op_args.hpp"

#include <sstream>

#include "algo_entries.hpp"
#include "torch_util.hpp"

namespace collmm::torch_ext {

std::string dims(at::IntArrayRef sizes) {
  std::ostringstream s;
  s << sizes;
  return s.str();
}

std::optional<LayoutFit> layout_fit(const at::Tensor& b) {
  const bool kn = b.is_contiguous(), nk = b.t().is_contiguous();
  if (kn && nk) return either;
  if (kn) return kn_only;
  if (nk) return nk_only;
  return std::nullopt;
}

BLayout agreed_layout(const std::vector<std::vector<double>>& all, size_t at, const std::string& what) {
  bool any_kn = false, any_nk = false;
  for (const auto& q : all) {
    any_kn = any_kn || q[at] == static_cast<double>(kn_only);
    any_nk = any_nk || q[at] == static_cast<double>(nk_only);
  }
  if (!(any_kn && any_nk)) return any_nk ? BLayout::nk : BLayout::kn;
  std::ostringstream kn, nk;
  for (size_t q = 0; q < all.size(); ++q) {
    if (all[q][at] == static_cast<double>(kn_only)) kn << (kn.str().empty() ? "" : ", ") << q;
    if (all[q][at] == static_cast<double>(nk_only)) nk << (nk.str().empty() ? "" : ", ") << q;
  }
  throw UsageError("ranks disagree on " + what + " layout: rank(s) " + kn.str() + " pass a row-major [K, N], rank(s) " +
                   nk.str() + " the transpose of a row-major [N, K] (w.t()); pass the same kind on every rank");
}

int64_t leading_dim(int64_t dim, int64_t rank) {
  const int64_t d = any_dim(dim, rank);
  return d < rank - 1 ? d : -1;
}

int64_t any_dim(int64_t dim, int64_t rank) {
  const int64_t d = dim < 0 ? dim + rank : dim;
  return d >= 0 && d < rank ? d : -1;
}

std::string check_a(const at::Tensor& a, const char* name, int64_t dim, const char* dim_name, bool cols_split) {
  std::ostringstream e;
  const int64_t fewest = dim_name ? 2 : 1;
  if (a.dim() < fewest)
    e << name << " must have " << fewest << " or more dims (got " << dims(a.sizes()) << ")";
  else if (a.size(-1) == 0 && !cols_split)
    e << name << " " << dims(a.sizes()) << " has no columns";
  else if (!dtype_of(a.scalar_type()))
    e << name << " is " << a.scalar_type() << "; collmm has float32, float64, bfloat16";
  else if (dim_name && any_dim(dim, a.dim()) < 0)
    e << dim_name << " must be a dim of " << name << " (" << -a.dim() << " to " << a.dim() - 1 << "); got " << dim
      << " for " << dims(a.sizes());
  return e.str();
}

std::string check_b(const at::Tensor& b, const at::Tensor& a, const std::string& name, int64_t k) {
  std::ostringstream e;
  if (b.dim() != 2)
    e << name << " must be 2-D (got " << dims(b.sizes()) << ")";
  else if (b.device() != a.device())
    e << name << " is on " << b.device() << ", A on " << a.device();
  else if (b.scalar_type() != a.scalar_type())
    e << name << " is " << b.scalar_type() << ", A is " << a.scalar_type();
  else if (k >= 0 && b.size(0) != k)
    e << name << " has " << b.size(0) << " rows; A has " << k << " columns";
  else if (!layout_fit(b))
    e << name << " " << dims(b.sizes()) << " with strides " << dims(b.strides())
      << " is neither row-major [K, N] nor the transpose of a row-major [N, K] (w.t()); a column slice of a"
      << " weight is neither: pass " << name << ".contiguous() (or w[rows].t() of the weight's rows)";
  return e.str();
}

std::string check_reduce_op(const std::string& reduce_op) {
  return reduce_op == "sum" || reduce_op == "avg" ? "" : "reduce_op must be sum or avg (got " + reduce_op + ")";
}

std::string check_algo(const std::string& algo, std::optional<Op> op) {
  if (algo == "auto") return {};
  try {
    const ListedConfig c = parse_listed_config(algo);
    if (op) entry_options(*op, algo);
    if (!c.deprecation.empty()) {
      TORCH_WARN_ONCE("collmm: algo ", c.deprecation);
    }
  } catch (const UsageError& e) {
    const std::string why = e.what();  // naming the accepted spellings once
    return "algo " + why +
           (why.find(kEntrySpelling) == std::string::npos ? "; algo is auto or " + std::string(kEntrySpelling) : "");
  }
  return {};
}

std::string algorithm_of(const std::string& algo) {
  return algo == "auto" ? algo : to_string(parse_listed_config(algo).options.algo);
}

std::vector<int64_t> rank_counts(const std::vector<std::vector<double>>& all, size_t at) {
  std::vector<int64_t> counts;
  for (const auto& q : all) counts.push_back(static_cast<int64_t>(q[at]));
  return counts;
}

std::string RankSizes::text() const {
  std::string t;
  for (size_t q = 0; q < sizes.size(); ++q) t += (q ? ", " : "") + std::to_string(sizes[q]);
  return t;
}

RankSizes rank_sizes(const std::vector<std::vector<double>>& all, int64_t rest) {
  RankSizes r;
  for (const auto& q : all) {
    const auto size = static_cast<int64_t>(q[0]);
    r.sizes.push_back(size);
    r.rows.push_back(size * rest);
    r.total += size;
  }
  return r;
}

std::string optional_int(std::optional<int64_t> v) { return v ? std::to_string(*v) : "None"; }

}  // namespace collmm::torch_ext
