// collmm/types.hpp: the words of the field as types: the operation (ag_gemm, gemm_rs, gemm_ar), the
// algorithm, posting order, B's layout, element types, the global problem and the plan options,
// plus how a dimension is split over P ranks. No backend, no MPI, no CUDA here.
#pragma once

#include <compare>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "collmm/sizes.hpp"

namespace collmm {

// A user error (bad option, shapes that do not fit, ranks that disagree). Library code throws it;
// only a main() turns it into a message and an exit code.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The ops; their names, builders and shapes are their rows in collmm/ops.hpp. ag_gemm: C_r =
// AllGather(A) @ B_r. gemm_rs: C_r = rows block r of sum_q A_q @ B_q. gemm_ar: C = the whole
// sum_q A_q @ B_q on every rank (the row-parallel linear without sequence parallelism).
enum class Op { ag_gemm, gemm_rs, gemm_ar };
// The algorithms; their names, builders and rules are their rows in collmm/algorithms.hpp.
enum class Algo { sequential, pipelined, ring, bidir };
// Which of the two is enqueued first within one step of a ring: the transfer must be posted before
// the GEMM that would otherwise take every SM.
enum class Post { comm_first, gemm_first };
// How --pieces cuts the ring's edge chunk: into equal pieces, or into pieces of halving size (half
// the chunk, a quarter, ..., the last two alike), which leave as small a tail for fewer transfers.
enum class PieceSizes { equal, halving };
// kn: B is [K, N] row-major. nk: B is [N, K] row-major, as torch.nn.Linear stores its weight.
enum class BLayout { kn, nk };
enum class Dtype { f64, f32, tf32, f16, bf16, fp8_e4m3 };

// The enums' values and names. Op's and Algo's (all_ops, to_string, parse_op, parse_field,
// longest_name) are their tables' rows, read where the tables are defined (plan/ops.cpp,
// plan/algorithms.cpp).
const std::vector<Op>& all_ops();
const std::vector<Algo>& all_algos();

std::string to_string(Op);
std::string to_string(Algo);
std::string to_string(Post);
std::string to_string(PieceSizes);
std::string to_string(BLayout);
std::string to_string(Dtype);
// Parse a name; throws UsageError listing the accepted names.
Op parse_op(const std::string&);
Algo parse_algo(const std::string&);
Post parse_post(const std::string&);
PieceSizes parse_piece_sizes(const std::string&);
BLayout parse_b_layout(const std::string&);
Dtype parse_dtype(const std::string&);
size_t dtype_size(Dtype);

// Row-major, global sizes. Rank r of P holds (ag_gemm) rows block r of A and columns block r of B,
// or (gemm_rs, gemm_ar) columns block r of A and rows block r of B; see plan.hpp for the buffers.
struct Problem {
  Op op{};  // the op table's first row (ag_gemm)
  int64_t m = 0, n = 0, k = 0;
  int world = 1;  // P
  BLayout b_layout = BLayout::kn;
};

struct PlanOptions {
  Algo algo = Algo::ring;
  int stages = 0;  // pipelined: 0, default_stages, max(1, min(P, M/P)) (collmm/algorithms.hpp)
  int waves = 0;   // gemm_ar's ring: its waves (0: one), each a ring over M/W rows
  Post post = Post::comm_first;
  int gemm_lanes = 1;  // GEMMs rotate over this many lanes (lane 0 is always the comm lane)
  int merge = 1;       // ag_gemm ring only: one GEMM per up to `merge` chunks received at consecutive
                       // steps (fewer, larger GEMMs; the comm is unchanged)
  int pieces = 1;      // ring and bidir: the ring's exposed edge (ag_gemm: the last chunk's transfer
                       // and GEMM; gemm_rs: the first partial's GEMM and send) cut into this many
                       // row pieces, each its own transfer. So only 1/pieces of a chunk's GEMM is
                       // left with nothing beside it
  PieceSizes piece_sizes = PieceSizes::equal;  // the sizes of those pieces (pieces > 1 only); the
                                               // rule is piece_of's (collmm/plan.hpp)
};

// One field of a value: its key in text and JSON, its name in messages, its heading in the front
// ends' tables (src/plan/table_cells.hpp), whether JSON must hold it, and (integer fields) its range,
// the one set of limits that validate() and the tuning cache's parser check. The default is the
// struct's own initialiser.
struct Field {
  const char* key;
  const char* label;
  const char* head;
  bool required = false;
  int64_t lo = 0, hi = 0;
};
constexpr int64_t kNoLimit = INT32_MAX;

// The one field list of each value: for_each_field(value, f) calls f(Field, member) for every
// field in a fixed order. operator==, to_string, agreement_keys, ProblemKey, the JSON of the tuning
// cache and validate's ranges are written over it: a new field is one line here.
template <class O, class F>
constexpr void for_each_field(O& o, F&& f) {
  static_assert(std::is_same_v<std::remove_const_t<O>, PlanOptions> || std::is_same_v<std::remove_const_t<O>, Problem>);
  if constexpr (std::is_same_v<std::remove_const_t<O>, PlanOptions>) {
    f(Field{.key = "algo", .label = "algorithm", .head = "algo", .required = true}, o.algo);
    f(Field{.key = "stages", .label = "stages", .head = "stages", .lo = 0, .hi = kNoLimit}, o.stages);
    f(Field{.key = "waves", .label = "waves", .head = "waves", .lo = 0, .hi = kMaxWaves}, o.waves);
    f(Field{.key = "post", .label = "post", .head = "post"}, o.post);
    f(Field{.key = "gemm_lanes", .label = "gemm lanes", .head = "lanes", .lo = 1, .hi = kMaxGemmLanes}, o.gemm_lanes);
    f(Field{.key = "merge", .label = "merge", .head = "merge", .lo = 1, .hi = kMaxWorld}, o.merge);
    f(Field{.key = "pieces", .label = "pieces", .head = "pieces", .lo = 1, .hi = kMaxPieces}, o.pieces);
    f(Field{.key = "piece_sizes", .label = "piece sizes", .head = "sizes"}, o.piece_sizes);
  } else {
    f(Field{.key = "op", .label = "op", .head = "op", .required = true}, o.op);
    f(Field{.key = "m", .label = "M", .head = "M", .required = true, .lo = 1, .hi = kMaxSize}, o.m);
    f(Field{.key = "n", .label = "N", .head = "N", .required = true, .lo = 1, .hi = kMaxSize}, o.n);
    f(Field{.key = "k", .label = "K", .head = "K", .required = true, .lo = 1, .hi = kMaxSize}, o.k);
    f(Field{.key = "world_size", .label = "world size", .head = "P", .required = true, .lo = 1, .hi = kMaxWorld},
      o.world);
    f(Field{.key = "b_layout", .label = "B layout", .head = "B"}, o.b_layout);
  }
}
// The Field of one member of a value (its key, label and range): field_of(&PlanOptions::waves).
template <class V, class M>
Field field_of(M V::*member) {
  V value{};
  Field found{};
  for_each_field(value, [&](const Field& f, const auto& v) {
    if (static_cast<const void*>(&v) == static_cast<const void*>(&(value.*member))) found = f;
  });
  return found;
}
// Every field's value as text: an enum's name, an integer's digits.
inline std::string field_text(int64_t v) { return std::to_string(v); }
template <class E, class = std::enable_if_t<std::is_enum_v<E>>>
std::string field_text(E v) {
  return to_string(v);
}
// Parses an enum field's name (throws UsageError listing the accepted names).
void parse_field(const std::string&, Op&);
void parse_field(const std::string&, Algo&);
void parse_field(const std::string&, Post&);
void parse_field(const std::string&, PieceSizes&);
void parse_field(const std::string&, BLayout&);
// The length of an enum type's longest name (the argument only picks the type): a table column's width.
size_t longest_name(Op);
size_t longest_name(Algo);
size_t longest_name(Post);
size_t longest_name(PieceSizes);
size_t longest_name(BLayout);
size_t longest_name(Dtype);
// An integer field's range as text: "LO..HI", or "LO or more" without an upper limit.
std::string range_text(const Field&);
// "" when `v` is within the field's range, else "<key> V is not " and its range_text.
std::string out_of_range(const Field&, int64_t v);

bool operator==(const Problem&, const Problem&);
bool operator==(const PlanOptions&, const PlanOptions&);
bool operator!=(const PlanOptions&, const PlanOptions&);
// Field by field, in the field list's order (a key of what is kept per plan).
std::strong_ordering operator<=>(const PlanOptions&, const PlanOptions&);
// "algo=ring stages=0 waves=0 post=comm-first gemm_lanes=1 merge=1 pieces=1 piece_sizes=equal"
std::string to_string(const PlanOptions&);
// "op=ag_gemm m=64 n=64 k=64 world_size=4 b_layout=kn"
std::string to_string(const Problem&);

// A problem with its element type: the key of what is kept per shape (a Context's prepared plan,
// auto's decisions, the PyTorch session's plans, the played peers' inputs). Equal and ordered
// field by field, Problem's field list in its order, then the dtype.
struct ProblemKey {
  Problem problem;
  Dtype dtype = Dtype::f32;
};
bool operator==(const ProblemKey&, const ProblemKey&);
std::strong_ordering operator<=>(const ProblemKey&, const ProblemKey&);
// "op=ag_gemm m=64 n=64 k=64 world_size=4 b_layout=kn dtype=f32"
std::string to_string(const ProblemKey&);

// (name, value) of every option in a fixed order: what check_processes_agree compares across ranks.
std::vector<std::pair<std::string, std::string>> agreement_keys(const PlanOptions&);
// The same for a whole run: the problem (op, M, N, K, world size, B layout), the dtype, then the
// options. What every executor and the Context check before a plan is prepared.
std::vector<std::pair<std::string, std::string>> agreement_keys(const Problem&, const PlanOptions&, Dtype);

// How a dimension of size `total` is split over `parts`: the first (total % parts) parts get one
// more. block_size(10, 4, q) = 3, 3, 2, 2; block_offset(10, 4, q) = 0, 3, 6, 8.
int64_t block_size(int64_t total, int parts, int q);
int64_t block_offset(int64_t total, int parts, int q);

// The local shapes that rank r holds, from the Problem (its op's row: collmm/ops.hpp), and where
// they lie in the global matrices (B's indexed [K, N] whatever its layout).
struct LocalShape {
  int64_t a_rows, a_cols;  // A_r
  int64_t b_rows, b_cols;  // B_r as stored (after b_layout)
  int64_t c_rows, c_cols;  // C_r
  int64_t gemm_k, gemm_n;  // the inner and output-column sizes of every GEMM this rank runs
  int64_t a_row0, a_col0;  // A_r's first row and column in the global A
  int64_t b_k0, b_n0;      // B_r's first row (K) and column (N) in the global B
  int64_t c_row0, c_col0;  // C_r's first row and column in the global C
};
LocalShape local_shape(const Problem&, int rank);

// Whether the op sums partials over the ranks (its row): A's columns and B's rows are split
// (gemm_rs, gemm_ar); ag_gemm splits A's rows and B's columns.
bool sums_over_ranks(Op);
// Whether the op's A is split by rows and gathered (its row: ag_gemm).
bool gathers_a(Op);
// The global row of rank r's C row 0: local_shape's c_row0.
int64_t c_first_row(const Problem&, int rank);

// The fewest rows that `pieces` pieces of these sizes cut with at least one row each: equal, one
// row a piece (pieces); halving, 2^(pieces-1), the smallest piece being 1/2^(pieces-1) of them.
int64_t rows_for_pieces(int pieces, PieceSizes);

// Checks that throw UsageError naming everything wrong, each a sentence. validate_sizes: the
// problem's sizes alone, whichever op (each within its range; M*K, K*N, M*N within kMaxElements).
// validate(Problem): those and the op's split over the ranks (its row's validate: each rank at
// least one row or column). The options that one algorithm takes are checked with its row: validate(Problem,
// PlanOptions) in collmm/algorithms.hpp.
void validate_sizes(const Problem&);
void validate(const Problem&);
// The problems found, each a sentence, as one UsageError (ending every sentence with "."); nothing
// when there are none.
void throw_if_any(const std::vector<std::string>& problems);

}  // namespace collmm
