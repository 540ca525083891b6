// op_rows.hpp: each op's row of the op table (collmm/ops.hpp), defined at the end of its plan file
// (plan/ag_gemm.cpp, plan/gemm_rs.cpp, plan/gemm_ar.cpp) and listed in plan/ops.cpp.
#pragma once

#include "collmm/ops.hpp"

namespace collmm {

OpRow ag_gemm_row();
OpRow gemm_rs_row();
OpRow gemm_ar_row();

// gemm_rs's blocks (plan/gemm_rs.cpp): rank r holds columns block r of A, rows block r of B and
// rows block r of the sum in C.
LocalShape summed_blocks(const Problem&, int rank);
// C row t of rank r of an op that sums over the ranks: every rank's partial of that global row.
std::vector<Product> summed_c_row(const Problem&, int rank, int64_t t);

}  // namespace collmm
