// op_rows.hpp: each op's row of the op table (collmm/ops.hpp), defined at the end of its plan file
// (plan/ag_gemm.cpp, plan/gemm_rs.cpp, plan/gemm_ar.cpp) and listed in plan/ops.cpp.
#pragma once

#include "collmm/ops.hpp"

namespace collmm {

OpRow ag_gemm_row();
OpRow gemm_rs_row();
OpRow gemm_ar_row();

// C row t of rank r of an op that sums over the ranks: every rank's partial of that global row.
std::vector<Product> summed_c_row(const Problem&, int rank, int64_t t);

}  // namespace collmm
