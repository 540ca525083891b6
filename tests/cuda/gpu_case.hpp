// gpu_case.hpp: shared by the CUDA tests: how many GPUs are usable (0 when the CUDA runtime or
// driver says none, as on a CI machine without a GPU), and one checked run of a plan on an
// executor: inputs written, outputs poisoned, one iteration, C (and ag_gemm's gathered A) read
// back and compared with the f64 reference; where the backend plays the peers (--transport host),
// their data staged first and what the ranks sent them checked too.
#pragma once

#include <string>

#include "executor.hpp"

namespace collmm::test {

int usable_gpus(std::string* why);

// Skips the current test (GTest) when fewer than `need` GPUs are usable, saying why.
#define COLLMM_NEED_GPUS(need)                                                                                    \
  do {                                                                                                            \
    std::string why_;                                                                                             \
    const int have_ = ::collmm::test::usable_gpus(&why_);                                                         \
    if (have_ < (need)) GTEST_SKIP() << "needs " << (need) << " GPU(s), " << have_ << " usable (" << why_ << ")"; \
  } while (0)

// Sizes that split unevenly over P and give odd leading dimensions; fp8 needs 16-byte rows (and B
// as [N, K]), so its N and K are multiples of 16 per rank.
Problem uneven_problem(Op op, int P, Dtype d);

struct CaseResult {
  int64_t wrong_c = 0, wrong_gathered = 0, wrong_sent = 0;
  double max_rel_err = 0;
  std::string detail;  // which rank and what, when something is wrong
};

// Makes the plans of ex's local ranks, runs one checked iteration (and, if repeat, a second one
// after poisoning again: graph replay), compares every local rank.
// stage_seed: the seed the played peers' data is made from (default: seed; another one stages
// wrong data, for tests that the check catches it).
CaseResult run_checked(Executor& ex, const Problem& p, const PlanOptions& o, Dtype dtype, uint64_t seed,
                       bool repeat = false, int64_t stage_seed = -1);

}  // namespace collmm::test
