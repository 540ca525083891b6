// rs_ring.cpp: gemm_rs's accumulate-and-forward ring (rs_ring.hpp), which gemm_rs's ring and bidir
// and gemm_ar's waves run. The ring itself is RsRingBuilder::build; each of its steps' parts (the
// GEMMs, the adds, the sendrecv, the last adds) is a function of its own.
//
// The ring accumulates and forwards (one lane for comm and adds, GEMMs on the others):
//
//   step j:  b = (r - j - 1) mod P
//            gemm: G = A_r[rows of b] @ B_r              (overlaps the transfer of step j-1)
//            add:  R += G, R being the sum for b received from r-1 at step j-1   (if j > 0)
//            comm: send R -> r+1, receive the sum for block (r - j - 2) from r-1  (if j < P-1)
//   After P steps b = r and R + G is this rank's block: the last GEMM writes into C and the last
//   add adds the received sum into C. Each rank sends (P-1) blocks, as a reduce-scatter does.
//   Memory: two receive buffers R (rotating); G is C itself. Where C is shorter than the largest
//   block (P does not divide M), the rows of G that C cannot hold are computed straight onto the
//   received sum (GEMM with accumulate). So the extra memory is two chunk buffers in every case.
//
// bidir runs two such rings at once in opposite directions, each over one half of every block.
//
// --pieces S (ring and bidir): the ring's one exposed GEMM is step 0's, which nothing can run
// beside: the first send needs the whole partial. Step 0's GEMM is cut into S GEMMs of 1/S of the
// block's rows and its transfer into S sendrecv steps, piece i going as soon as its GEMM is done.
// So the first send starts after 1/S of that GEMM. With --piece-sizes halving the pieces are
// 1/2^(S-1), ..., 1/4, 1/2 of the block, the smallest first, so the first send starts after
// 1/2^(S-1) of it. comm-first posts each piece's send right after its GEMM. The receiver gets the
// sum in S pieces into the same buffer, and adds it at step 1 as before (its add needs its own
// step-1 partial, which runs beside those transfers). At P = 2 step 1 is the last step: the pieces
// are added on the GEMM lane after the last GEMM, all but the last in one add, so only the last
// piece's add follows the last receive. Only that edge is cut: the other steps' GEMMs already run
// beside a transfer, and every extra transfer pays its fixed cost. The ring's other edge at P > 2,
// the last add, is an add (memory-bound, a few percent of a GEMM): not worth a transfer per piece.
//
//   gemm  | g0a | g0b | g1 | g2 | g3 |            S = 2: the first partial in two pieces;
//   comm        | s0a | s0b | s1 | s2 | add        s0a goes once g0a is done
//
// gemm_ar's C holds all M rows, so every row of C named here lies at rank r's block of the rows the
// ring sums (c_first_row is 0 there), and gemm_ar's all-gather follows.
#include <algorithm>

#include "rs_ring.hpp"

namespace collmm {
namespace {

// Adds run on the comm lane, right before the send of the sum they make (the last step's pieces at
// P = 2: on the GEMM lane, see post_last_adds).
Step add(Slice out, Slice a, int index, int chunk, std::vector<int> waits) {
  return local_step(StepKind::add, 0, out, a, index, chunk, std::move(waits));
}

// One direction of the ring over a sub-range of every block (the whole block for the ring, one half
// for bidir).
struct Direction {
  int dir;          // +1: send to r+1, block (r - j - 1); -1: send to r-1, block (r + j + 1)
  int half;         // -1 whole block, 0 / 1: that half
  int recv_buf[2];  // rotating receive buffers
  Slice g;          // where partials are computed (rows as needed)
  int last_add = -1;
  int cur = 0;  // which receive buffer holds the running sum
};

// Builds the ring over rows [m0, m0 + m_rows) of M into `plan`: build() is the ring, step by step.
class RsRingBuilder {
 public:
  RsRingBuilder(Plan& plan, bool bidir, int64_t m0, int64_t m_rows, const CommHook& on_comm);
  void build();

 private:
  // Block q of the ring's rows: rows_in(q) rows from A row off_in(q).
  int64_t rows_in(int q) const { return block_size(m_rows_, P_, q); }
  int64_t off_in(int q) const { return m0_ + block_offset(m_rows_, P_, q); }
  // The rows of block q a direction handles (half: -1 all, 0 / 1 that half): (offset in block, rows).
  std::pair<int64_t, int64_t> part(int q, int half) const;
  // Of `rows` partial rows computed at g, those that C holds (the rest: see post_adds).
  int64_t in_c(const Slice& g, int64_t rows) const {
    return std::min(rows, std::max<int64_t>(0, rows_in(r_) - (g.row - c0_)));
  }
  int block_at(const Direction& d, int j) const { return ring_mod(r_ - d.dir * (j + 1), P_); }
  EdgeCut pieces_of(int j) const { return j == 0 ? edge_ : EdgeCut{}; }

  std::vector<int> post_gemms(int j, int i);
  void post_adds(int j, const std::vector<int>& gemm_ids);
  void post_last_adds(int j, const std::vector<int>& gemm_ids);
  void post_comm(int j, int i, const std::vector<int>& gemm_ids);
  void next_buffers() {
    for (Direction& d : dirs_) d.cur = 1 - d.cur;
  }

  Plan& plan_;
  const CommHook& on_comm_;
  const int r_, P_;
  const int64_t m0_, m_rows_;
  const int64_t c0_;  // rank r's block in C: 0 (gemm_rs) or its rows (gemm_ar)
  const EdgeCut edge_;
  std::vector<Direction> dirs_;
  std::vector<int> comm_ids_;  // the comm steps of the current step, one per piece
};

RsRingBuilder::RsRingBuilder(Plan& plan, bool bidir, int64_t m0, int64_t m_rows, const CommHook& on_comm)
    : plan_(plan),
      on_comm_(on_comm),
      r_(plan.rank),
      P_(plan.problem.world),
      m0_(m0),
      m_rows_(m_rows),
      c0_(off_in(plan.rank) - c_first_row(plan.problem, plan.rank)),
      edge_(edge_cut(plan.options, PieceOrder::smallest_first)) {
  // G, where the middle steps' partials go: C itself (bidir: the first half's partial, then the
  // second's, together at most `most` rows). A rank whose C is shorter than the largest block
  // cannot hold those rows in C: they are computed straight onto the received sum instead (a GEMM
  // with accumulate, once the sum has arrived), so no third buffer is needed.
  const int64_t most = rows_in(0);
  const int64_t dir_rows = bidir ? (most + 1) / 2 : most;
  for (int d = 0; d < (bidir ? 2 : 1); ++d) {
    Direction ring;
    ring.dir = d == 0 ? +1 : -1;
    ring.half = bidir ? d : -1;
    ring.recv_buf[0] = plan.add_buffer(Role::work, dir_rows, plan.problem.n);
    ring.recv_buf[1] = plan.add_buffer(Role::work, dir_rows, plan.problem.n);
    ring.g = {kBufC, c0_ + d * dir_rows, d == 0 ? dir_rows : most - dir_rows};
    dirs_.push_back(ring);
  }
}

std::pair<int64_t, int64_t> RsRingBuilder::part(int q, int half) const {
  const int64_t rows = rows_in(q);
  if (half < 0) return {0, rows};
  const int64_t first = (rows + 1) / 2;
  return half == 0 ? std::pair<int64_t, int64_t>{0, first} : std::pair<int64_t, int64_t>{first, rows - first};
}

// The ring. Step 0's GEMMs write the partials that go out into recv_buf[1]. comm-first posts each
// piece's send right after its GEMMs: the link starts after the first piece's GEMM, not after every
// piece's launch. It posts the comm of step j before the GEMMs of step j+1, which it overlaps.
// gemm-first: step 0's GEMMs, then at each step the GEMMs of step j+1 before the comm of step j.
void RsRingBuilder::build() {
  const bool comm_first = plan_.options.post == Post::comm_first;
  for (Direction& d : dirs_) d.cur = 1;
  std::vector<std::vector<int>> piece_ids;  // step 0's GEMMs, per piece
  for (int i = 0; i < edge_.pieces; ++i) {
    piece_ids.push_back(post_gemms(0, i));
    if (comm_first) post_comm(0, i, piece_ids.back());
  }
  std::vector<int> ids = post_gemms(1, 0);  // the GEMMs of the current step
  if (!comm_first)
    for (int i = 0; i < edge_.pieces; ++i) post_comm(0, i, piece_ids[static_cast<size_t>(i)]);
  next_buffers();
  for (int j = 1; j < P_ - 1; ++j) {
    post_adds(j, ids);
    comm_ids_.clear();
    if (comm_first) {
      post_comm(j, 0, ids);
      ids = post_gemms(j + 1, 0);
    } else {
      std::vector<int> next = post_gemms(j + 1, 0);
      post_comm(j, 0, ids);
      ids = next;
    }
    next_buffers();
  }
  post_last_adds(P_ - 1, ids);
}

// The GEMMs of piece i of step j: each direction's partial (into G, or the send buffer at step 0);
// at the last step one GEMM of this rank's whole block straight into C. Step 0's are cut into the
// edge's pieces (one piece at the other steps). A piece is computed, then sent: with halving sizes
// the smallest goes first.
std::vector<int> RsRingBuilder::post_gemms(int j, int i) {
  const bool last = j == P_ - 1;
  const EdgeCut n = pieces_of(j);
  std::vector<int> prev_adds, ids;
  for (const Direction& d : dirs_)
    if (d.last_add >= 0) prev_adds.push_back(d.last_add);
  if (last)
    ids.push_back(plan_.push(
        gemm_step(plan_.gemm_lane(j), {kBufC, c0_, rows_in(r_)}, {kBufA, off_in(r_), rows_in(r_)}, j, r_, prev_adds)));
  for (const Direction& d : dirs_) {
    const int b = block_at(d, j);
    const auto [off, rows] = part(b, d.half);
    const int64_t here = j == 0 ? rows : in_c(d.g, rows);  // the rest: see post_adds
    if (here == 0 || last) continue;
    const Slice out = j == 0 ? Slice{d.recv_buf[1], 0, rows} : Slice{d.g.buf, d.g.row, here};
    const Slice a{kBufA, off_in(b) + off, here};
    ids.push_back(plan_.push(gemm_step(plan_.gemm_lane(j), piece_of(out, n, i), piece_of(a, n, i), j, b, prev_adds)));
  }
  return ids;
}

// The adds of step j < P - 1: the received sum plus this rank's partial, into the sum that goes on.
void RsRingBuilder::post_adds(int j, const std::vector<int>& gemm_ids) {
  for (Direction& d : dirs_) {
    const int b = block_at(d, j);
    const auto [off, rows] = part(b, d.half);
    if (rows == 0) continue;
    const Slice sum{d.recv_buf[d.cur], 0, rows};
    std::vector<int> waits = gemm_ids;
    const int64_t here = in_c(d.g, rows);
    if (here < rows) {  // rows of the partial that C cannot hold: sum += A rows @ B
      Step tail = gemm_step(plan_.gemm_lane(j), {sum.buf, here, rows - here},
                            {kBufA, off_in(b) + off + here, rows - here}, j, b, {comm_ids_.back()});
      tail.accumulate = true;
      waits.push_back(plan_.push(tail));
    }
    if (here > 0)
      d.last_add = plan_.push(add({sum.buf, 0, here}, {d.g.buf, d.g.row, here}, j, b, waits));
    else
      d.last_add = waits.back();  // the accumulating GEMM did the whole add
  }
}

// The last step's adds: the received sum into C, after the GEMM into C, on the comm lane after the
// last receive. At P = 2 in pieces the sum arrived in step 0's pieces. They are added on the GEMM
// lane: every piece but the last in one add (they came while that GEMM ran), then the last piece
// once it is here. So only the last piece's add follows the last receive, with no extra transfer.
void RsRingBuilder::post_last_adds(int j, const std::vector<int>& gemm_ids) {
  const int S = P_ == 2 ? edge_.pieces : 1;
  const EdgeCut cut = S == 1 ? EdgeCut{} : edge_;
  const std::vector<std::pair<int, int>> groups =
      S == 1 ? std::vector<std::pair<int, int>>{{0, 0}} : std::vector<std::pair<int, int>>{{0, S - 2}, {S - 1, S - 1}};
  for (const auto& [first, last] : groups)
    for (Direction& d : dirs_) {
      const int b = block_at(d, j);
      const auto [off, rows] = part(b, d.half);
      const int64_t from = piece_offset(rows, cut, first), to = piece_offset(rows, cut, last + 1);
      if (to == from) continue;
      Step a = add({kBufC, c0_ + off + from, to - from}, {d.recv_buf[d.cur], from, to - from}, j, b, gemm_ids);
      if (S > 1) {  // on the GEMM into C's lane, after its pieces' receives
        a.lane = plan_.steps[static_cast<size_t>(gemm_ids.front())].lane;
        a.waits.assign(comm_ids_.begin() + first, comm_ids_.begin() + last + 1);
      }
      d.last_add = plan_.push(a);
    }
}

// Piece i of step j's comm: piece i of every partial goes as soon as its GEMM is done; the sums it
// receives are added at step j + 1.
void RsRingBuilder::post_comm(int j, int i, const std::vector<int>& gemm_ids) {
  const EdgeCut n = pieces_of(j);
  Step comm;
  comm.kind = StepKind::sendrecv;
  comm.lane = 0;
  comm.index = j;
  for (const Direction& d : dirs_) {
    const int b = block_at(d, j);
    const int64_t rows = part(b, d.half).second;
    const int64_t next_rows = part(block_at(d, j + 1), d.half).second;
    if (comm.chunk < 0) comm.chunk = b;
    if (rows > 0) comm.sends.push_back({ring_mod(r_ + d.dir, P_), piece_of({d.recv_buf[d.cur], 0, rows}, n, i)});
    if (next_rows > 0)
      comm.recvs.push_back({ring_mod(r_ - d.dir, P_), piece_of({d.recv_buf[1 - d.cur], 0, next_rows}, n, i)});
  }
  if (j == 0) comm.waits = gemm_ids;
  for (const Direction& d : dirs_)  // a sum finished by an accumulating GEMM (no add on this lane)
    if (j > 0 && d.last_add >= 0 && plan_.steps[d.last_add].lane != 0) comm.waits.push_back(d.last_add);
  if (i == 0 && on_comm_) on_comm_(j, comm);
  comm_ids_.push_back(plan_.push(comm));
}

}  // namespace

void append_rs_ring(Plan& plan, bool bidir, int64_t m0, int64_t m_rows, const CommHook& on_comm) {
  RsRingBuilder(plan, bidir, m0, m_rows, on_comm).build();
}

}  // namespace collmm
