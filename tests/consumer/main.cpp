// main.cpp: a user's program on an installed collmm: a plan made for P = 4 (make_plan) and its time
// predicted (predict on the built-in profile cpu-2core), then one ag_gemm through a Context (one
// rank, the cpu backend) against a plain triple loop. Prints "consumer: ok" and exits 0, or says
// what failed and exits 1.
#include <cmath>
#include <cstdio>
#include <vector>

#include "collmm/collmm.hpp"
#include "collmm/plan.hpp"
#include "collmm/profile.hpp"
#include "collmm/sim.hpp"

int main(int argc, char** argv) {
  using namespace collmm;
  const Problem problem{.op = Op::ag_gemm, .m = 64, .n = 32, .k = 16, .world = 4, .b_layout = BLayout::kn};
  PlanOptions options;
  options.algo = Algo::ring;
  const Plan plan = make_plan(problem, options, 0);
  if (plan.steps.empty()) {
    std::fprintf(stderr, "consumer: make_plan gave no steps\n");
    return 1;
  }
  const Prediction prediction = predict(problem, options, Dtype::f32, load_profile("cpu-2core"));
  if (!(prediction.time_us > 0) || prediction.timeline.events.empty()) {
    std::fprintf(stderr, "consumer: predict gave %g us and %zu events\n", prediction.time_us,
                 prediction.timeline.events.size());
    return 1;
  }

  Context ctx(BackendOptions{}, argc, argv);
  if (ctx.world_size() != 1) {
    std::fprintf(stderr, "consumer: expected one rank, got %d\n", ctx.world_size());
    return 1;
  }
  const int m = 8, n = 6, k = 5;
  std::vector<float> a(m * k), b(k * n), c(m * n, -1.0f), want(m * n, 0.0f);
  for (int i = 0; i < m * k; ++i) a[i] = 0.25f * static_cast<float>(i % 7) - 0.5f;
  for (int i = 0; i < k * n; ++i) b[i] = 0.125f * static_cast<float>(i % 5) + 0.25f;
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j)
      for (int l = 0; l < k; ++l) want[i * n + j] += a[i * k + l] * b[l * n + j];
  ctx.ag_gemm(m, n, k, Dtype::f32, a.data(), b.data(), c.data());
  for (int i = 0; i < m * n; ++i) {
    if (std::fabs(c[i] - want[i]) > 1e-4f) {
      std::fprintf(stderr, "consumer: C[%d] = %g, want %g\n", i, c[i], want[i]);
      return 1;
    }
  }
  std::printf("consumer: ok\n");
  return 0;
}
