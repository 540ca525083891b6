// collmm/plan.hpp: a schedule as data. A Plan is what one rank does for one (op, algo, shape):
// its buffers, and a list of steps (GEMMs, local copies and adds, and comm ops), each on a lane
// and waiting for earlier steps. Plans are pure data: no device calls, no MPI; every backend
// (cpu, cuda, simulate) walks the same Plan.
//
// Execution rules every executor follows and the plan checker proves safe:
//  - steps are issued in list order; steps on one lane run one after another in that order;
//  - a step also waits for every step named in `waits` (always earlier in the list, other lanes);
//  - a sendrecv step is one group: all its sends and receives are posted together and the step
//    ends when all of them are done. The k-th send from r to q matches the k-th receive on q from r;
//  - allgather and reduce_scatter are collectives: every rank's k-th collective is the same one.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "collmm/algorithms.hpp"
#include "collmm/types.hpp"

namespace collmm {

// What a buffer is for. A, B and C are the user's tensors; gathered is the all-gathered A of
// ag_gemm (returned to the user if asked for); work buffers hold gemm_rs and gemm_ar partial sums.
enum class Role { a, b, c, gathered, work };
std::string to_string(Role);
// Whether a run writes every element of a buffer of this role before it is read (C, the gathered A,
// the work buffers), as opposed to the inputs A and B: what --check poisons before a run.
bool written_by_run(Role);

struct BufferSpec {
  Role role;
  int64_t rows = 0, cols = 0;  // row-major; element type: buffer_dtype (collmm/element_types.hpp)
};

// Fixed buffer ids: every plan has A, B and C first.
constexpr int kBufA = 0, kBufB = 1, kBufC = 2;

// Rows [row, row + rows) of buffer `buf`, all its columns.
struct Slice {
  int buf = -1;
  int64_t row = 0, rows = 0;
};

enum class StepKind { gemm, copy, add, sendrecv, allgather, reduce_scatter };
std::string to_string(StepKind);
// Whether a step of this kind moves data between ranks: sendrecv, allgather, reduce_scatter.
bool is_transfer(StepKind);
// Whether a step of this kind is on the collective's side of the work, everything but a GEMM: the
// transfers, and the copies and adds that go with them. What the timeline's comm rows, the
// overlap metric's comm time and StepFilter::comm_only count as comm.
bool counts_as_comm(StepKind);

struct Transfer {
  int peer = -1;
  Slice slice;
};

struct Step {
  StepKind kind = StepKind::gemm;
  int lane = 0;
  std::vector<int> waits;  // indices of earlier steps (on other lanes) this one waits for

  // gemm:  out = a @ B        (out += a @ B when accumulate)
  // copy:  out = a            add: out += a      (same shapes; out and a of the output dtype for add)
  Slice out, a;
  bool accumulate = false;

  // sendrecv: sends and receives posted as one group
  std::vector<Transfer> sends, recvs;

  // allgather:      this rank contributes `a`; parts[q] is where rank q's rows land (in one buffer).
  // reduce_scatter: parts[q] are this rank's partial rows for rank q, stacked in rank order in one
  //                 buffer; the sum over all ranks of parts[rank] lands in `out`.
  std::vector<Slice> parts;

  // Labels for traces and messages: the algorithm's step (or stage) number and the chunk (block)
  // this step works on; -1 where it has none.
  int index = -1;
  int chunk = -1;
};

struct Plan {
  Problem problem;
  PlanOptions options;
  int rank = 0;
  int lanes = 2;  // lane 0 carries comm, copies and adds; lanes 1..gemm_lanes carry GEMMs (and
                  // gemm_rs's last adds at P = 2 in pieces, after the GEMM into C; the ag_gemm
                  // rings' copy of the own chunk, after its GEMM)
  std::vector<BufferSpec> buffers;
  std::vector<Step> steps;

  // Helpers used while building.
  int add_buffer(Role role, int64_t rows, int64_t cols);
  int push(Step s);  // appends, returns its index
  int gemm_lane(int i) const { return 1 + i % (lanes - 1); }
};

// Builds rank `rank`'s plan. Validates first (throws UsageError).
Plan make_plan(const Problem&, const PlanOptions&, int rank);
// The first buffer of `role` in the plan (ag_gemm's gathered A: Role::gathered); -1 if none.
int find_buffer(const Plan&, Role);

// One line per step, for humans and golden tests.
std::string describe(const Plan&);
std::string describe(const Step&);

// A plan with every collective (allgather, reduce_scatter) rewritten as the ring a ring
// collective runs: P-1 sendrecv steps with the neighbours (and, for reduce_scatter, the adds of
// the running sums into two accumulator buffers appended to the plan), so that a transport that
// only moves chunks between neighbours can run it (plan/ring_lowering.cpp). origin[i] is the step
// of the input plan that lowered step i comes from; buffer ids of the input plan are kept.
struct Lowered {
  Plan plan;
  std::vector<int> origin;
};
Lowered lower_collectives(const Plan&);

// Whether step i only completes an output buffer: a copy whose rows no later step reads (as `a`, a
// send, a collective's contribution or parts). An executor whose caller does not take that buffer
// may leave the step out (the ag_gemm ring's copy of its own chunk into the gathered A: its GEMM
// reads the chunk from A).
bool only_fills_output(const Plan&, int i);

// Shared by the builders. empty_plan: a plan with A, B, C (and nothing else) for this rank.
// local_step: a gemm, copy or add (out = a @ B, out = a, out += a) with its labels and waits.
// ring_mod: a mod b in [0, b).
Plan empty_plan(const Problem&, const PlanOptions&, int rank);
Step local_step(StepKind kind, int lane, Slice out, Slice a, int index, int chunk, std::vector<int> waits = {});
// A GEMM step, out = a @ B: local_step's shorthand for the builders.
inline Step gemm_step(int lane, Slice out, Slice a, int index, int chunk, std::vector<int> waits = {}) {
  return local_step(StepKind::gemm, lane, out, a, index, chunk, std::move(waits));
}
inline int ring_mod(int a, int b) { return ((a % b) + b) % b; }

// What --pieces cuts a ring's edge chunk into: how many pieces, their sizes, and (halving) the
// order they go in. ag_gemm moves a piece, then computes it: the largest goes first, so the first
// GEMM starts after half the transfer and each later one hides under the rest. gemm_rs computes a
// piece, then sends it: the smallest goes first, so the first send starts after 1/2^(S-1) of the GEMM.
enum class PieceOrder { largest_first, smallest_first };
struct EdgeCut {
  int pieces = 1;
  PieceSizes sizes = PieceSizes::equal;
  PieceOrder order = PieceOrder::largest_first;
};
// The cut of options `o` (one piece where `cut` is false: the steps off the edge).
inline EdgeCut edge_cut(const PlanOptions& o, PieceOrder order, bool cut = true) {
  return cut ? EdgeCut{o.pieces, o.piece_sizes, order} : EdgeCut{};
}

// Where piece i of `cut` starts within R rows (i = cut.pieces: R), so piece i is rows
// [piece_offset(i), piece_offset(i + 1)). Equal: as block_size splits R. Halving, largest first:
// the rows left after i pieces are R >> i (i < S). So the pieces are R - R/2, R/2 - R/4, ...
// (each the rounded-up half of what is left) and the last R >> (S-1). Every piece has a row where
// R >= 2^(S-1) (rows_for_pieces). Smallest first: the same pieces in the mirrored order.
inline int64_t piece_offset(int64_t rows, const EdgeCut& cut, int i) {
  const int S = cut.pieces;
  if (i >= S) return rows;
  if (cut.sizes == PieceSizes::equal) return block_offset(rows, S, i);
  if (cut.order == PieceOrder::largest_first) return rows - (rows >> i);
  return i == 0 ? 0 : rows >> (S - i);  // the last i pieces of the largest-first order, at the end
}
// Piece i of slice s as `cut` cuts it.
inline Slice piece_of(Slice s, const EdgeCut& cut, int i) {
  const int64_t off = piece_offset(s.rows, cut, i);
  return {s.buf, s.row + off, piece_offset(s.rows, cut, i + 1) - off};
}

}  // namespace collmm
