// races.cpp: data races within one rank. Step i happens before step j when they share a lane (the
// lane runs its steps one after another, a comm step included: it ends before the next starts),
// when j waits for i, or through a chain of those. Two steps with neither order that touch
// overlapping rows of one buffer, one of them writing, are a race. Examples: a GEMM overwriting a
// partial that a send still reads, a GEMM reading rows a receive is still writing.
#include <cstdint>
#include <sstream>

#include "check_internal.hpp"

namespace collmm::check {
namespace {

// before[j] holds bit i when step i happens before step j.
std::vector<std::vector<uint64_t>> happens_before(const Plan& plan) {
  const size_t n = plan.steps.size(), words = (n + 63) / 64;
  std::vector<std::vector<uint64_t>> before(n, std::vector<uint64_t>(words, 0));
  std::vector<int> last_on_lane(static_cast<size_t>(plan.lanes), -1);
  for (size_t j = 0; j < n; ++j) {
    const Step& s = plan.steps[j];
    std::vector<int> preds = s.waits;
    if (last_on_lane[s.lane] >= 0) preds.push_back(last_on_lane[s.lane]);
    for (int p : preds) {
      for (size_t w = 0; w < words; ++w) before[j][w] |= before[p][w];
      before[j][p / 64] |= uint64_t{1} << (p % 64);
    }
    last_on_lane[s.lane] = static_cast<int>(j);
  }
  return before;
}

std::string rows_str(const Slice& s) {
  std::ostringstream out;
  out << "buf" << s.buf << "[" << s.row << ":" << s.row + s.rows << "]";
  return out.str();
}

}  // namespace

void check_races(const std::vector<Plan>& plans, Errors& errors) {
  for (const Plan& plan : plans) {
    const auto before = happens_before(plan);
    std::vector<std::vector<Access>> acc;
    for (const Step& s : plan.steps) acc.push_back(accesses(s));
    for (size_t j = 0; j < plan.steps.size(); ++j)
      for (size_t i = 0; i < j; ++i) {
        if (before[j][i / 64] >> (i % 64) & 1) continue;
        bool found = false;
        for (const Access& x : acc[i]) {
          for (const Access& y : acc[j])
            if ((x.write || y.write) && overlap(x.slice, y.slice)) {
              errors.push_back("race: " + where(plan, static_cast<int>(i)) + (x.write ? " writes " : " reads ") +
                               rows_str(x.slice) + " and " + where(plan, static_cast<int>(j)) +
                               (y.write ? " writes " : " reads ") + rows_str(y.slice) +
                               " with no lane order or wait between them");
              found = true;
              break;
            }
          if (found) break;
        }
      }
  }
}

}  // namespace collmm::check
