// peer_inputs.cpp: the job's inputs on the GPU and the rows a transfer carries (see peer_inputs.hpp).
#include "peer_inputs.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "collmm/element_types.hpp"
#include "cuda_check.hpp"
#include "data.hpp"

namespace collmm::cuda {
namespace {

void* upload(const HostMatrix& m, Dtype dtype) {
  const std::vector<unsigned char> bytes = encode(m.v, dtype);
  void* p = nullptr;
  COLLMM_CUDA(cudaMalloc(&p, std::max<size_t>(bytes.size(), 1)));
  upload_now(p, bytes.data(), bytes.size());
  return p;
}

bool b_is_nk(Dtype d) { return d == Dtype::fp8_e4m3; }

}  // namespace

PeerInputs::PeerInputs(int device, const Problem& p, uint64_t seed, Dtype dtype)
    : device_(device), p_(p), seed_(seed), dtype_(dtype) {
  COLLMM_CUDA(cudaSetDevice(device_));
  a_ = upload(make_global_a(p, seed, dtype), dtype);
  if (sums_over_ranks(p.op)) {
    Problem whole = p;  // one rank of any op holds all of B
    whole.world = 1, whole.b_layout = b_is_nk(dtype) ? BLayout::nk : BLayout::kn;
    b_ = upload(make_local_b(whole, 0, seed, dtype), dtype);
    engine_ = std::make_unique<GemmEngine>(device_, size_t(32) << 20);
    COLLMM_CUDA(cudaMalloc(&workspace_, engine_->workspace_bytes()));
  }
  COLLMM_CUDA(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
}

PeerInputs::~PeerInputs() {
  cudaSetDevice(device_);
  if (stream_) cudaStreamSynchronize(stream_), cudaStreamDestroy(stream_);
  engine_.reset();
  for (void* p : {a_, b_, sum_, workspace_})
    if (p) cudaFree(p);
}

bool PeerInputs::same(const Problem& p, uint64_t seed, Dtype dtype) const {
  return ProblemKey{p, dtype} == ProblemKey{p_, dtype_} && seed == seed_;
}

void PeerInputs::materialize(const check::LinkTransfer& t, int64_t cols, void* dst) {
  COLLMM_CUDA(cudaSetDevice(device_));
  if (gathers_a(p_.op))
    copy_rows(t, cols, static_cast<char*>(dst));
  else
    sum_partials(t, cols, static_cast<char*>(dst));
  COLLMM_CUDA(cudaStreamSynchronize(stream_));
}

// ag_gemm: every row is one row of the global A; runs of consecutive rows are one copy each.
void PeerInputs::copy_rows(const check::LinkTransfer& t, int64_t cols, char* dst) {
  if (cols != p_.k)
    throw std::runtime_error("peer inputs: an ag_gemm transfer of rows " + std::to_string(cols) + " wide, not K");
  const size_t row_bytes = static_cast<size_t>(cols) * dtype_size(dtype_);
  for (size_t first = 0; first < t.rows.size();) {
    auto row_of = [&](size_t x) {
      const check::Terms& terms = t.rows[x];
      if (terms.size() != 1 || terms[0].kind != 0)
        throw std::runtime_error("peer inputs: an ag_gemm transfer row that is not one row of A");
      return terms[0].row;
    };
    size_t last = first + 1;
    while (last < t.rows.size() && row_of(last) == row_of(first) + static_cast<int64_t>(last - first)) ++last;
    COLLMM_CUDA(cudaMemcpyAsync(dst + first * row_bytes,
                                static_cast<char*>(a_) + static_cast<size_t>(row_of(first)) * row_bytes,
                                (last - first) * row_bytes, cudaMemcpyDeviceToHost, stream_));
    first = last;
  }
}

// gemm_rs, gemm_ar: every row is a sum of some ranks' partials of one output row; consecutive rows with the
// same ranks are one GEMM per rank (A_q rows @ B_q), summed in place, then copied out.
void PeerInputs::sum_partials(const check::LinkTransfer& t, int64_t cols, char* dst) {
  if (cols != p_.n)
    throw std::runtime_error("peer inputs: a gemm_rs transfer of rows " + std::to_string(cols) + " wide, not N");
  const Dtype out = output_dtype(GemmLibrary::cublaslt, dtype_);
  const size_t row_bytes = static_cast<size_t>(cols) * dtype_size(out), esize = dtype_size(dtype_);
  auto ranks_of = [&](size_t x) {
    std::vector<int> ranks;
    for (const check::Term& term : t.rows[x]) {
      if (term.kind != 1 || term.b_rank != term.rank || term.row != t.rows[x][0].row)
        throw std::runtime_error("peer inputs: a gemm_rs transfer row that is not a sum of partials of one row");
      ranks.push_back(term.rank);
    }
    return ranks;
  };
  if (sum_bytes_ < t.rows.size() * row_bytes) {
    if (sum_) COLLMM_CUDA(cudaFree(sum_));
    sum_bytes_ = t.rows.size() * row_bytes;
    COLLMM_CUDA(cudaMalloc(&sum_, sum_bytes_));
  }
  for (size_t first = 0; first < t.rows.size();) {
    const std::vector<int> ranks = ranks_of(first);
    if (ranks.empty()) throw std::runtime_error("peer inputs: an empty transfer row");
    const int64_t row0 = t.rows[first][0].row;
    size_t last = first + 1;
    while (last < t.rows.size() && ranks_of(last) == ranks &&
           t.rows[last][0].row == row0 + static_cast<int64_t>(last - first))
      ++last;
    char* sum = static_cast<char*>(sum_) + first * row_bytes;
    for (size_t x = 0; x < ranks.size(); ++x) {
      const int q = ranks[x];
      const int64_t k0 = block_offset(p_.k, p_.world, q);
      GemmArgs g;
      g.m = static_cast<int64_t>(last - first), g.n = p_.n, g.k = block_size(p_.k, p_.world, q);
      g.a = static_cast<char*>(a_) + (static_cast<size_t>(row0) * p_.k + k0) * esize, g.lda = p_.k;
      g.b_layout = b_is_nk(dtype_) ? BLayout::nk : BLayout::kn;
      g.b = static_cast<char*>(b_) + static_cast<size_t>(b_is_nk(dtype_) ? k0 : k0 * p_.n) * esize;
      g.ldb = b_is_nk(dtype_) ? p_.k : p_.n;
      g.c = sum, g.ldc = p_.n;
      g.dtype = dtype_, g.accumulate = x > 0;
      engine_->gemm(g, stream_, workspace_);
    }
    first = last;
  }
  COLLMM_CUDA(cudaMemcpyAsync(dst, sum_, t.rows.size() * row_bytes, cudaMemcpyDeviceToHost, stream_));
}

}  // namespace collmm::cuda
