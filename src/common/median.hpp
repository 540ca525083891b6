// median.hpp: the median of a list of times, the one statistic every timing in collmm
// reports (the bench's iterations and rounds, auto's timed candidates).
#pragma once

#include <algorithm>
#include <vector>

namespace collmm {

// The median (the mean of the two middle values when the count is even); 0 for an empty list.
inline double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace collmm
