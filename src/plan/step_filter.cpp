// step_filter.cpp: which steps a StepFilter leaves out (collmm/step_filter.hpp).
#include "collmm/step_filter.hpp"

namespace collmm {

bool skips(StepFilter filter, StepKind kind) {
  const bool comm = counts_as_comm(kind);  // copies and adds go with the comm
  return (filter == StepFilter::gemm_only && comm) || (filter == StepFilter::comm_only && !comm);
}

}  // namespace collmm
