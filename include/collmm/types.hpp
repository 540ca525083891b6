// collmm/types.hpp: the words of the field as types: the operation (ag_gemm, gemm_rs), the
// algorithm, posting order, B's layout, element types, the global problem and the plan options,
// plus how a dimension is split over P ranks. No backend, no MPI, no CUDA here.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace collmm {

// A user error (bad option, shapes that do not fit, ranks that disagree). Library code throws it;
// only a main() turns it into a message and an exit code.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

enum class Op { ag_gemm, gemm_rs };
// The algorithms; their names, builders and rules are their rows in collmm/algorithms.hpp.
enum class Algo { sequential, pipelined, ring, bidir };
// Which of the two is enqueued first within one step of a ring: the transfer must be posted before
// the GEMM that would otherwise take every SM.
enum class Post { comm_first, gemm_first };
// kn: B is [K, N] row-major. nk: B is [N, K] row-major, as torch.nn.Linear stores its weight.
enum class BLayout { kn, nk };
enum class Dtype { f64, f32, tf32, f16, bf16, fp8_e4m3 };

const std::vector<Op>& all_ops();
const std::vector<Algo>& all_algos();

std::string to_string(Op);
std::string to_string(Algo);
std::string to_string(Post);
std::string to_string(BLayout);
std::string to_string(Dtype);
// Parse a name; throws UsageError listing the accepted names.
Op parse_op(const std::string&);
Algo parse_algo(const std::string&);
Post parse_post(const std::string&);
BLayout parse_b_layout(const std::string&);
Dtype parse_dtype(const std::string&);
size_t dtype_size(Dtype);

// Row-major, global sizes. Rank r of P holds (ag_gemm) rows block r of A and columns block r of B,
// or (gemm_rs) columns block r of A and rows block r of B; see plan.hpp for the buffers.
struct Problem {
  Op op = Op::ag_gemm;
  int64_t m = 0, n = 0, k = 0;
  int world = 1;  // P
  BLayout b_layout = BLayout::kn;
};

struct PlanOptions {
  Algo algo = Algo::ring;
  int stages = 0;  // pipelined only; 0: default_stages, max(1, min(P, M/P)) (collmm/algorithms.hpp)
  Post post = Post::comm_first;
  int gemm_lanes = 1;  // GEMMs rotate over this many lanes (lane 0 is always the comm lane)
  int merge = 1;       // ag_gemm ring only: one GEMM per up to `merge` chunks received at consecutive
                       // steps (fewer, larger GEMMs; the comm is unchanged)
};
// The one set of functions over every field of PlanOptions (with to_json and
// plan_options_from_json in tuning.hpp): a new option is added to each of them and to nothing else.
bool operator==(const PlanOptions&, const PlanOptions&);
bool operator!=(const PlanOptions&, const PlanOptions&);
// "algo=ring stages=0 post=comm-first gemm_lanes=1 merge=1"
std::string to_string(const PlanOptions&);
// (name, value) of every option in a fixed order: what check_processes_agree compares across ranks.
std::vector<std::pair<std::string, std::string>> agreement_keys(const PlanOptions&);
// The same for a whole run: the problem (world size, op, M, N, K, B layout), the dtype, then the
// options. What every executor and the Context check before a plan is prepared.
std::vector<std::pair<std::string, std::string>> agreement_keys(const Problem&, const PlanOptions&, Dtype);
// `o` as algorithm `algo` of `op` takes it: an option that algorithm has no use for (stages
// outside pipelined, merge outside the ag_gemm ring) at its default. What a front end runs for
// each algorithm when one set of flags serves several (--algo all).
PlanOptions options_for(Op op, Algo algo, PlanOptions o);

// How a dimension of size `total` is split over `parts`: the first (total % parts) parts get one
// more. block_size(10, 4, q) = 3, 3, 2, 2; block_offset(10, 4, q) = 0, 3, 6, 8.
int64_t block_size(int64_t total, int parts, int q);
int64_t block_offset(int64_t total, int parts, int q);

// The local shapes that rank r holds, from the Problem.
struct LocalShape {
  int64_t a_rows, a_cols;  // A_r
  int64_t b_rows, b_cols;  // B_r as stored (after b_layout)
  int64_t c_rows, c_cols;  // C_r
  int64_t gemm_k, gemm_n;  // the inner and output-column sizes of every GEMM this rank runs
};
LocalShape local_shape(const Problem&, int rank);

// Checks sizes and options that every algorithm needs; throws UsageError naming what is wrong.
void validate(const Problem&, const PlanOptions&);

}  // namespace collmm
