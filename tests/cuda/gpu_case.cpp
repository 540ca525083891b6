// gpu_case.cpp: GPU count and one checked run (see gpu_case.hpp).
#include "gpu_case.hpp"

#include <cuda_runtime.h>

#include <sstream>

#include "data.hpp"
#include "played_peers.hpp"

namespace collmm::test {

int usable_gpus(std::string* why) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    *why = std::string("cudaGetDeviceCount: ") + cudaGetErrorName(e) + ": " + cudaGetErrorString(e);
    return 0;
  }
  *why = std::to_string(n) + " visible";
  return n;
}

Problem uneven_problem(Op op, int P, Dtype d) {
  Problem p;
  p.op = op;
  p.world = P;
  if (d == Dtype::fp8_e4m3) {
    p.m = 8 * P + 3, p.n = 16 * P, p.k = 32 * P, p.b_layout = BLayout::nk;
  } else {
    p.m = 7 * P + 3, p.n = 5 * P + 3, p.k = 6 * P + 5;
  }
  return p;
}

CaseResult run_checked(Executor& ex, const Problem& p, const PlanOptions& o, Dtype dtype, uint64_t seed, bool repeat,
                       int64_t stage_seed) {
  const std::vector<int> ranks = ex.local_ranks();
  std::vector<Plan> plans;
  for (int r : ranks) plans.push_back(make_plan(p, o, r));
  ex.prepare(plans, dtype);
  const Dtype out = ex.out_dtype(dtype);
  for (size_t i = 0; i < ranks.size(); ++i) {
    const auto a = encode(make_local_a(p, ranks[i], seed, dtype).v, dtype);
    const auto b = encode(make_local_b(p, ranks[i], seed, dtype).v, dtype);
    ex.write(static_cast<int>(i), kBufA, a.data(), a.size());
    ex.write(static_cast<int>(i), kBufB, b.data(), b.size());
  }
  if (PlayedPeers* peers = ex.played_peers()) peers->stage(stage_seed >= 0 ? static_cast<uint64_t>(stage_seed) : seed);
  CaseResult res;
  std::ostringstream detail;
  for (int it = 0; it < (repeat ? 2 : 1); ++it) {
    ex.poison();
    const std::vector<RankRun> runs = ex.run(StepFilter::all, true);
    for (size_t i = 0; i < ranks.size(); ++i) {
      const Plan& plan = plans[i];
      for (size_t s = 0; s < plan.steps.size(); ++s) {
        const StepTime& t = runs.at(i).steps.at(s);
        if (!(t.start_us >= 0 && t.end_us >= t.start_us && t.end_us <= runs[i].total_us + 1e-3))
          detail << "rank " << ranks[i] << " step " << s << " has timestamps " << t.start_us << ".." << t.end_us
                 << " (total " << runs[i].total_us << "); ";
      }
      const BufferSpec& c = plan.buffers[kBufC];
      std::vector<unsigned char> bytes(static_cast<size_t>(c.rows * c.cols) * dtype_size(out));
      ex.read(static_cast<int>(i), kBufC, bytes.data(), bytes.size());
      const Comparison cmp = compare(decode(bytes.data(), static_cast<size_t>(c.rows * c.cols), out),
                                     reference_c(p, ranks[i], seed, dtype), dtype, out, p.k);
      res.wrong_c += cmp.wrong;
      res.max_rel_err = std::max(res.max_rel_err, cmp.max_rel_err);
      if (cmp.wrong)
        detail << "rank " << ranks[i] << ": " << cmp.wrong << " wrong in C (max rel err " << cmp.max_rel_err << "); ";
      for (size_t b = 0; b < plan.buffers.size(); ++b) {
        if (plan.buffers[b].role != Role::gathered) continue;
        const BufferSpec& g = plan.buffers[b];
        std::vector<unsigned char> gb(static_cast<size_t>(g.rows * g.cols) * dtype_size(dtype));
        ex.read(static_cast<int>(i), static_cast<int>(b), gb.data(), gb.size());
        const std::vector<double> got = decode(gb.data(), static_cast<size_t>(g.rows * g.cols), dtype);
        const HostMatrix want = make_global_a(p, seed, dtype);
        int64_t wrong = 0;
        for (size_t e = 0; e < got.size(); ++e) wrong += !(got[e] == want.v[e]);
        res.wrong_gathered += wrong;
        if (wrong) detail << "rank " << ranks[i] << ": " << wrong << " wrong in the gathered A; ";
      }
    }
    if (PlayedPeers* peers = ex.played_peers()) {
      const Comparison sent = peers->check_sent();
      res.wrong_sent += sent.wrong;
      if (sent.wrong)
        detail << sent.wrong << " wrong in what was sent to the played peers (max rel err " << sent.max_rel_err
               << "); ";
    }
  }
  res.detail = detail.str();
  return res;
}

}  // namespace collmm::test
