// overlap.cpp: the hidden-communication fraction per rank, from the union of comm intervals and
// the union of GEMM intervals (definitions in src/timeline/overlap.hpp).
#include "overlap.hpp"

#include <algorithm>
#include <map>

namespace collmm {

Intervals interval_union(Intervals v) {
  std::sort(v.begin(), v.end());
  Intervals out;
  for (auto& [s, e] : v) {
    if (e <= s) continue;
    if (!out.empty() && s <= out.back().second)
      out.back().second = std::max(out.back().second, e);
    else
      out.push_back({s, e});
  }
  return out;
}

double length(const Intervals& v) {
  double sum = 0;
  for (auto& [s, e] : v) sum += e - s;
  return sum;
}

double intersection_length(const Intervals& a, const Intervals& b) {
  double sum = 0;
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    const double lo = std::max(a[i].first, b[j].first), hi = std::min(a[i].second, b[j].second);
    if (hi > lo) sum += hi - lo;
    if (a[i].second < b[j].second)
      ++i;
    else
      ++j;
  }
  return sum;
}

Overlap measure_overlap(const Timeline& t) {
  std::map<int, std::pair<Intervals, Intervals>> by_rank;  // rank -> (comm, gemm)
  for (const TimelineEvent& e : t.events) {
    auto& [comm, gemm] = by_rank[e.rank];
    (e.counts_as_comm() ? comm : gemm).push_back({e.start_us, e.end_us});
  }
  Overlap o;
  double sum = 0;
  int with_comm = 0;
  for (auto& [rank, lists] : by_rank) {
    const Intervals comm = interval_union(lists.first), gemm = interval_union(lists.second);
    RankOverlap r;
    r.rank = rank;
    r.comm_us = length(comm);
    r.gemm_us = length(gemm);
    r.hidden_us = intersection_length(comm, gemm);
    if (r.comm_us > 0) {
      r.fraction = r.hidden_us / r.comm_us;
      o.min_fraction = with_comm == 0 ? r.fraction : std::min(o.min_fraction, r.fraction);
      sum += r.fraction;
      ++with_comm;
    }
    o.ranks.push_back(r);
  }
  o.mean_fraction = with_comm > 0 ? sum / with_comm : 0;
  return o;
}

}  // namespace collmm
