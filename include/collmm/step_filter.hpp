// collmm/step_filter.hpp: which steps of a plan a run leaves out. Every executor, and the
// simulator, asks skips() so that "GEMMs alone" and "comm alone" mean the same thing everywhere.
#pragma once

#include "collmm/plan.hpp"

namespace collmm {

// Which steps of a plan run: all of them, or only the GEMMs (t_gemm alone) or only the comm
// (t_comm alone). Copies and adds count as comm. A skipped step counts as done at once.
enum class StepFilter { all, gemm_only, comm_only };

// Whether a run with this filter leaves out a step of this kind.
bool skips(StepFilter, StepKind);

}  // namespace collmm
