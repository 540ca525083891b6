// sim_test_util.hpp: profiles with round numbers for the simulator's analytic tests.
#pragma once

#include "cost_model.hpp"

namespace collmm::test {

// f32 roofline at `tflops`, one domain with links of `gbps` and no latency, memory `mem_gbps`,
// no contention, no per-call overhead: GEMM and transfer times follow the formulas exactly.
inline Profile analytic_profile(double tflops, double gbps, double mem_gbps = 1e9) {
  Profile p;
  p.name = "analytic";
  p.gemm.model = GemmModel::roofline;
  p.gemm.peak_tflops = {{Dtype::f32, tflops}};
  p.memory_gbps = mem_gbps;
  p.links = {0, gbps, 0, gbps, 0};
  return p;
}

inline double gemm_us(double m, double n, double k, double tflops) { return 2 * m * n * k / (tflops * 1e6); }
inline double transfer_us(double bytes, double gbps) { return bytes / (gbps * 1e3); }

}  // namespace collmm::test
