// types.cpp: names of the enums, the plan's and the backend settings' (collmm/backend_options.hpp;
// Op's and Algo's are their tables': plan/ops.cpp, plan/algorithms.cpp), the block split of a
// dimension over ranks, the field lists' text and order, and the checks every op shares.
#include "collmm/types.hpp"

#include <algorithm>
#include <array>
#include <tuple>

#include "collmm/backend_options.hpp"
#include "collmm/ops.hpp"
#include "collmm/sizes.hpp"
#include "enum_names.hpp"

namespace collmm {
namespace {

template <class E>
using Names = EnumNames<E>;

const Names<Post> kPosts{{{Post::comm_first, "comm-first"}, {Post::gemm_first, "gemm-first"}}};
const Names<PieceSizes> kPieceSizes{{{PieceSizes::equal, "equal"}, {PieceSizes::halving, "halving"}}};
const Names<BLayout> kLayouts{{{BLayout::kn, "kn"}, {BLayout::nk, "nk"}}};
const Names<Dtype> kDtypes{{{Dtype::f64, "f64"},
                            {Dtype::f32, "f32"},
                            {Dtype::tf32, "tf32"},
                            {Dtype::f16, "f16"},
                            {Dtype::bf16, "bf16"},
                            {Dtype::fp8_e4m3, "fp8"}}};
const Names<Backend> kBackends{{{Backend::cpu, "cpu"}, {Backend::cuda, "cuda"}}};
const Names<CudaTransport> kTransports{
    {{CudaTransport::nccl, "nccl"}, {CudaTransport::local, "local"}, {CudaTransport::host, "host"}}};
const Names<LinkCopy> kLinkCopies{{{LinkCopy::engine, "engine"}, {LinkCopy::sm, "sm"}}};
const Names<GemmAlgo> kGemmAlgos{{{GemmAlgo::heuristic, "heuristic"}, {GemmAlgo::timed, "timed"}}};

}  // namespace

std::string to_string(Post v) { return kPosts.name(v); }
std::string to_string(PieceSizes v) { return kPieceSizes.name(v); }
std::string to_string(BLayout v) { return kLayouts.name(v); }
std::string to_string(Dtype v) { return kDtypes.name(v); }
std::string to_string(Backend v) { return kBackends.name(v); }
std::string to_string(CudaTransport v) { return kTransports.name(v); }
std::string to_string(LinkCopy v) { return kLinkCopies.name(v); }
std::string to_string(GemmAlgo v) { return kGemmAlgos.name(v); }
Post parse_post(const std::string& s) { return kPosts.parse(s, "posting order"); }
PieceSizes parse_piece_sizes(const std::string& s) { return kPieceSizes.parse(s, "piece sizes"); }
BLayout parse_b_layout(const std::string& s) { return kLayouts.parse(s, "B layout"); }
Backend parse_backend(const std::string& s) { return kBackends.parse(s, "backend"); }
CudaTransport parse_cuda_transport(const std::string& s) { return kTransports.parse(s, "transport"); }
LinkCopy parse_link_copy(const std::string& s) { return kLinkCopies.parse(s, "link copy"); }
GemmAlgo parse_gemm_algo(const std::string& s) { return kGemmAlgos.parse(s, "GEMM algorithm choice"); }
Dtype parse_dtype(const std::string& s) {
  if (s == "fp32") return Dtype::f32;
  if (s == "fp16") return Dtype::f16;
  if (s == "fp64") return Dtype::f64;
  if (s == "e4m3" || s == "fp8_e4m3") return Dtype::fp8_e4m3;
  return kDtypes.parse(s, "dtype");
}

size_t dtype_size(Dtype d) {
  switch (d) {
    case Dtype::f64: return 8;
    case Dtype::f32:
    case Dtype::tf32: return 4;
    case Dtype::f16:
    case Dtype::bf16: return 2;
    case Dtype::fp8_e4m3: return 1;
  }
  return 0;
}

void parse_field(const std::string& s, Post& v) { v = parse_post(s); }
void parse_field(const std::string& s, PieceSizes& v) { v = parse_piece_sizes(s); }
void parse_field(const std::string& s, BLayout& v) { v = parse_b_layout(s); }
size_t longest_name(Post) { return kPosts.longest(); }
size_t longest_name(PieceSizes) { return kPieceSizes.longest(); }
size_t longest_name(BLayout) { return kLayouts.longest(); }
size_t longest_name(Dtype) { return kDtypes.longest(); }

std::string range_text(const Field& f) {
  return std::to_string(f.lo) + (f.hi == kNoLimit ? " or more" : ".." + std::to_string(f.hi));
}

std::string out_of_range(const Field& f, int64_t v) {
  if (v >= f.lo && v <= f.hi) return "";
  return std::string(f.key) + " " + std::to_string(v) + " is not " + range_text(f);
}

namespace {

// Whether every field of a equals b's (the values are of one type, visited in one order).
template <class V>
bool same_fields(const V& a, const V& b) {
  std::vector<std::string> x, y;
  for_each_field(a, [&](const Field&, const auto& v) { x.push_back(field_text(v)); });
  for_each_field(b, [&](const Field&, const auto& v) { y.push_back(field_text(v)); });
  return x == y;
}

// "key=value" of every field, space-separated.
template <class V>
std::string fields_text(const V& value) {
  std::string text;
  for_each_field(value, [&](const Field& f, const auto& v) {
    text += (text.empty() ? "" : " ") + std::string(f.key) + "=" + field_text(v);
  });
  return text;
}

template <class V>
void append_agreement_keys(const V& value, std::vector<std::pair<std::string, std::string>>& keys) {
  for_each_field(value, [&](const Field& f, const auto& v) { keys.emplace_back(f.label, field_text(v)); });
}

// The number of fields in V's list.
template <class V>
constexpr size_t field_count() {
  V value{};
  size_t n = 0;
  for_each_field(value, [&](const Field&, const auto&) { ++n; });
  return n;
}

// A value's fields as integers (an enum's value), in their list's order.
template <class V>
std::array<int64_t, field_count<V>()> field_values(const V& value) {
  std::array<int64_t, field_count<V>()> values{};
  size_t i = 0;
  for_each_field(value, [&](const Field&, const auto& v) { values[i++] = static_cast<int64_t>(v); });
  return values;
}

// A key's fields as integers: Problem's, then the dtype.
std::array<int64_t, field_count<Problem>() + 1> key_values(const ProblemKey& key) {
  std::array<int64_t, field_count<Problem>() + 1> values{};
  const auto problem = field_values(key.problem);
  std::copy(problem.begin(), problem.end(), values.begin());
  values.back() = static_cast<int64_t>(key.dtype);
  return values;
}

}  // namespace

bool operator==(const ProblemKey& a, const ProblemKey& b) { return key_values(a) == key_values(b); }
std::strong_ordering operator<=>(const ProblemKey& a, const ProblemKey& b) { return key_values(a) <=> key_values(b); }
std::string to_string(const ProblemKey& key) { return to_string(key.problem) + " dtype=" + to_string(key.dtype); }

bool operator==(const Problem& a, const Problem& b) { return same_fields(a, b); }
bool operator==(const PlanOptions& a, const PlanOptions& b) { return same_fields(a, b); }
bool operator!=(const PlanOptions& a, const PlanOptions& b) { return !(a == b); }
std::strong_ordering operator<=>(const PlanOptions& a, const PlanOptions& b) {
  return field_values(a) <=> field_values(b);
}

std::string to_string(const PlanOptions& o) { return fields_text(o); }
std::string to_string(const Problem& p) { return fields_text(p); }

std::vector<std::pair<std::string, std::string>> agreement_keys(const PlanOptions& o) {
  std::vector<std::pair<std::string, std::string>> keys;
  append_agreement_keys(o, keys);
  return keys;
}

std::vector<std::pair<std::string, std::string>> agreement_keys(const Problem& p, const PlanOptions& o, Dtype dtype) {
  std::vector<std::pair<std::string, std::string>> keys;
  append_agreement_keys(p, keys);
  keys.emplace_back("dtype", to_string(dtype));
  append_agreement_keys(o, keys);
  return keys;
}

int64_t block_size(int64_t total, int parts, int q) { return total / parts + (q < total % parts ? 1 : 0); }
int64_t block_offset(int64_t total, int parts, int q) {
  return q * (total / parts) + std::min<int64_t>(q, total % parts);
}

int64_t rows_for_pieces(int pieces, PieceSizes sizes) {
  if (sizes == PieceSizes::equal || pieces < 1) return pieces;
  return int64_t(1) << std::min(pieces - 1, 62);
}

void throw_if_any(const std::vector<std::string>& problems) {
  if (problems.empty()) return;
  std::string text;
  for (const std::string& x : problems) text += (text.empty() ? "" : " ") + x + ".";
  throw UsageError(text);
}

void validate_sizes(const Problem& p) {
  std::vector<std::string> problems;
  for_each_field(p, [&](const Field& f, const auto& v) {
    if constexpr (std::is_integral_v<std::decay_t<decltype(v)>>)
      if (!out_of_range(f, v).empty())
        problems.push_back(std::string(f.label) + " must be " + range_text(f) + " (got " + std::to_string(v) + ")");
  });
  throw_if_any(problems);
  for (auto [x, y, name] : {std::tuple{p.m, p.k, "M*K"}, std::tuple{p.k, p.n, "K*N"}, std::tuple{p.m, p.n, "M*N"}}) {
    int64_t product = 0;
    if (__builtin_mul_overflow(x, y, &product) || product > kMaxElements)
      problems.push_back(std::string(name) + " = " + std::to_string(x) + "*" + std::to_string(y) +
                         " elements is more than " + std::to_string(kMaxElements));
  }
  throw_if_any(problems);
}

void validate(const Problem& p) {
  validate_sizes(p);
  std::vector<std::string> problems;
  op_row(p.op).validate(p, problems);
  throw_if_any(problems);
}

}  // namespace collmm
