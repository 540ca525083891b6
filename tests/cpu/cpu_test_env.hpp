// cpu_test_env.hpp: what the cpu backend's tests share: the one executor of this MPI process (made
// by test_main.cpp before the tests run) and a helper that runs one (problem, options, dtype) with
// generated inputs and poisoned outputs and checks this rank's C (and ag_gemm's gathered A).
#pragma once

#include <cstdint>
#include <string>

#include "backends.hpp"
#include "data.hpp"

namespace collmm::cpu_test {

Executor& executor();
int rank();
int world();

struct Checked {
  Comparison c;                 // C against reference_c
  int64_t gathered_wrong = -1;  // ag_gemm: elements of the gathered A unlike make_global_a; -1 for gemm_rs
};

// prepare, write this rank's A and B (make_local_a/b, encoded), poison, run everything, read back.
Checked run_and_check(const Problem& p, const PlanOptions& o, Dtype dtype, uint64_t seed);

// A readable name of a case for failure messages.
std::string case_name(const Problem& p, const PlanOptions& o, Dtype dtype);

}  // namespace collmm::cpu_test
