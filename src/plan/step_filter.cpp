// step_filter.cpp: which steps a StepFilter leaves out (collmm/step_filter.hpp).
#include "collmm/step_filter.hpp"

namespace collmm {

bool skips(StepFilter filter, StepKind kind) {
  const bool gemm = kind == StepKind::gemm;  // copies and adds go with the comm
  return (filter == StepFilter::gemm_only && !gemm) || (filter == StepFilter::comm_only && gemm);
}

}  // namespace collmm
