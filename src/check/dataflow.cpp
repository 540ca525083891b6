// dataflow.cpp: the plan checker's symbolic data. Slices are whole rows, so each buffer row carries
// exactly what it holds, as a multiset of terms:
//   - ag_gemm: A row t of rank r holds {A row (offset_r + t)}; a GEMM on rank q turns each term
//     into that row times B_q; copies, transfers and the allgather move terms.
//   - gemm_rs, gemm_ar: A row i of rank r holds {A_r row i}; a GEMM on rank q turns it into
//     A_r row i @ B_q, which is rank r's partial of row i when q = r. add (and accumulating GEMMs)
//     take the union, reduce_scatter the union over the ranks.
// At the end, ag_gemm: C row i of rank r holds exactly {A row i @ B_r} and was written once, and
// the gathered A row i holds {A row i}. gemm_rs: C row t of rank r holds every rank's partial of
// row (offset_r + t) exactly once. gemm_ar: C row i of every rank holds every rank's partial of
// row i. A row never written holds nothing, which the same comparison reports.
#include <algorithm>
#include <iterator>
#include <sstream>
#include <tuple>

#include "check_internal.hpp"
#include "collmm/ops.hpp"

namespace collmm::check {

bool Term::operator<(const Term& o) const {
  return std::tie(kind, rank, row, b_rank) < std::tie(o.kind, o.rank, o.row, o.b_rank);
}
bool Term::operator==(const Term& o) const {
  return kind == o.kind && rank == o.rank && row == o.row && b_rank == o.b_rank;
}

DataFlow::DataFlow(const std::vector<Plan>& plans) : plans_(plans) {
  for (const Plan& plan : plans) {
    std::vector<Buffer> bufs;
    for (const BufferSpec& spec : plan.buffers) {
      Buffer b;
      b.rows.resize(static_cast<size_t>(spec.rows));
      b.writes.assign(static_cast<size_t>(spec.rows), 0);
      b.last_writer.assign(static_cast<size_t>(spec.rows), -1);
      bufs.push_back(std::move(b));
    }
    const int64_t first = local_shape(plan.problem, plan.rank).a_row0;  // A_r's first global row
    std::vector<Terms>& a = bufs[kBufA].rows;
    for (size_t t = 0; t < a.size(); ++t) a[t] = {Term{0, plan.rank, first + static_cast<int64_t>(t), -1}};
    buffers_.push_back(std::move(bufs));
  }
}

std::vector<Terms> DataFlow::read(int rank, const Slice& s) const {
  const std::vector<Terms>& rows = buffers_[rank][s.buf].rows;
  return {rows.begin() + s.row, rows.begin() + s.row + s.rows};
}

void DataFlow::write(int rank, int step, const Slice& s, std::vector<Terms> value, bool accumulate) {
  Buffer& b = buffers_[rank][s.buf];
  for (int64_t t = 0; t < s.rows; ++t) {
    const size_t row = static_cast<size_t>(s.row + t);
    Terms v = t < static_cast<int64_t>(value.size()) ? std::move(value[t]) : Terms{};
    if (accumulate) v.insert(v.end(), b.rows[row].begin(), b.rows[row].end());
    std::sort(v.begin(), v.end());
    b.rows[row] = std::move(v);
    b.writes[row] += 1;
    b.last_writer[row] = step;
  }
}

void DataFlow::run_local(int rank, int step) {
  const Step& s = plans_[rank].steps[step];
  std::vector<Terms> in = read(rank, s.a);
  if (s.kind == StepKind::gemm)
    for (Terms& row : in)
      for (Term& t : row) {
        t.kind = t.kind == 0 ? 1 : 2;
        t.b_rank = rank;
      }
  write(rank, step, s.out, std::move(in), s.kind == StepKind::add || (s.kind == StepKind::gemm && s.accumulate));
}

void DataFlow::transfer(const Pair& p) {
  const Slice& from = plans_[p.send.rank].steps[p.send.step].sends[p.send.index].slice;
  const Slice& into = plans_[p.recv.rank].steps[p.recv.step].recvs[p.recv.index].slice;
  std::vector<Terms> rows = read(p.send.rank, from);
  if (on_transfer) on_transfer(p, rows);
  write(p.recv.rank, p.recv.step, into, std::move(rows), false);
}

void DataFlow::collective(size_t k, const Matching& m) {
  const int P = static_cast<int>(plans_.size());
  auto step_of = [&](int q) -> const Step& { return plans_[q].steps[m.collectives[q][k]]; };
  for (int q = 1; q < P; ++q)
    if (step_of(q).kind != step_of(0).kind) return;  // reported by the matching; no data to follow
  // Read everything first: a collective's inputs are what the ranks held when it started.
  std::vector<std::vector<std::vector<Terms>>> in(P);  // [rank][part]
  for (int q = 0; q < P; ++q) {
    const Step& s = step_of(q);
    if (s.kind == StepKind::allgather)
      in[q].push_back(read(q, s.a));
    else
      for (const Slice& part : s.parts) in[q].push_back(read(q, part));
  }
  for (int r = 0; r < P; ++r) {
    const Step& s = step_of(r);
    const int step = m.collectives[r][k];
    if (s.kind == StepKind::allgather) {
      for (int q = 0; q < P; ++q) write(r, step, s.parts[q], in[q][0], false);
    } else {
      std::vector<Terms> sum(static_cast<size_t>(s.out.rows));
      for (int q = 0; q < P; ++q)
        for (size_t t = 0; t < sum.size() && t < in[q][r].size(); ++t)
          sum[t].insert(sum[t].end(), in[q][r][t].begin(), in[q][r][t].end());
      write(r, step, s.out, std::move(sum), false);
    }
  }
}

std::string DataFlow::term_str(const Term& t) const {
  const std::string row = std::to_string(t.row), q = std::to_string(t.rank), b = "B_" + std::to_string(t.b_rank);
  const bool ag = gathers_a(plans_[0].problem.op);  // A's rows split: a row is a global row
  const std::string a = ag ? "A row " + row : "A_" + q + " row " + row;
  if (t.kind == 0) return a;
  if (t.kind == 2) return "a product of a product with " + b;
  if (!ag && t.b_rank == t.rank) return "rank " + q + "'s partial of row " + row;
  return a + " @ " + b;
}

void DataFlow::check_rows(int rank, int buf, const std::vector<Terms>& expected, Errors& errors) const {
  const Plan& plan = plans_[rank];
  const Buffer& b = buffers_[rank][buf];
  const bool once = !sums_over_ranks(plan.problem.op) && buf == kBufC;  // a sum is written step by step
  const int64_t first = c_first_row(plan.problem, rank);
  auto list = [&](const Terms& terms) {
    std::string s = "{";
    for (size_t x = 0; x < terms.size(); ++x) s += (x ? ", " : "") + term_str(terms[x]);
    return s + "}";
  };
  // Up to 4 rows of each kind of fault (never written, wrong terms, written more than once) in full.
  int wrong[3] = {0, 0, 0};
  for (size_t t = 0; t < expected.size(); ++t) {
    const Terms& got = b.rows[t];
    const bool bad_value = got != expected[t];
    const bool bad_count = once && b.writes[t] != 1;
    if (!bad_value && !bad_count) continue;
    if (++wrong[got.empty() ? 0 : bad_value ? 1 : 2] > 4) continue;
    std::ostringstream msg;
    msg << "data: rank " << rank << " " << to_string(plan.buffers[buf].role) << " row " << t << " (global row "
        << first + static_cast<int64_t>(t) << ")";
    if (got.empty()) {
      msg << " is never written; expected " << list(expected[t]);
    } else {
      if (bad_value) {
        Terms missing, extra;
        std::set_difference(expected[t].begin(), expected[t].end(), got.begin(), got.end(),
                            std::back_inserter(missing));
        std::set_difference(got.begin(), got.end(), expected[t].begin(), expected[t].end(), std::back_inserter(extra));
        msg << " holds " << list(got);
        if (!missing.empty()) msg << ", missing " << list(missing);
        if (!extra.empty()) msg << ", extra " << list(extra);
      }
      if (bad_count) msg << (bad_value ? ";" : "") << " written " << b.writes[t] << " times, not once";
      msg << "; last written by " << where(plan, b.last_writer[t]);
    }
    errors.push_back(msg.str());
  }
  const int more = std::max(wrong[0] - 4, 0) + std::max(wrong[1] - 4, 0) + std::max(wrong[2] - 4, 0);
  if (more > 0)
    errors.push_back("data: rank " + std::to_string(rank) + " " + to_string(plan.buffers[buf].role) + ": " +
                     std::to_string(more) + " more wrong rows");
}

void DataFlow::check_final(Errors& errors) const {
  for (int r = 0; r < plans_[0].problem.world; ++r) check_rank(r, errors);
}

void DataFlow::check_rank(int r, Errors& errors) const {
  const Problem& p = plans_[0].problem;
  const Plan& plan = plans_[r];
  std::vector<Terms> c_rows;  // what the op's row expects
  for (int64_t t = 0; t < local_shape(p, r).c_rows; ++t) {
    Terms row;
    for (const Product& x : op_row(p.op).c_row(p, r, t)) row.push_back(Term{1, x.a_rank, x.a_row, x.b_rank});
    std::sort(row.begin(), row.end());
    c_rows.push_back(std::move(row));
  }
  check_rows(r, kBufC, c_rows, errors);
  std::vector<Terms> a_rows;  // a gathered A: every rank's rows of A, in rank order
  for (int q = 0; q < p.world; ++q) {
    const LocalShape s = local_shape(p, q);
    for (int64_t t = 0; t < s.a_rows; ++t) a_rows.push_back({Term{0, q, s.a_row0 + t, -1}});
  }
  for (size_t b = 0; b < plan.buffers.size(); ++b)
    if (plan.buffers[b].role == Role::gathered) check_rows(r, static_cast<int>(b), a_rows, errors);
}

}  // namespace collmm::check
