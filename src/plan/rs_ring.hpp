// rs_ring.hpp: gemm_rs's accumulate-and-forward ring (plan/rs_ring.cpp) over some rows of M, for
// gemm_rs's ring and bidir over all of M and gemm_ar's waves (plan/gemm_ar.cpp) over part of it.
#pragma once

#include <functional>

#include "collmm/plan.hpp"

namespace collmm {

// Called with each ring step j's sendrecv (its first piece's, at step 0) before it is pushed: a
// caller may add transfers and waits of its own to that group.
using CommHook = std::function<void(int j, Step& comm)>;

// Appends to `plan` (P > 1) the ring (bidir: two rings in opposite directions, half blocks) that
// sums rows [m0, m0 + m_rows) of sum_q A_q @ B_q, cut in P blocks (block_size(m_rows, P, q)). It
// leaves this rank's summed block in C: at its first row for gemm_rs (C is that block), at its own
// rows for gemm_ar (C is all of M). Adds two receive buffers per direction.
void append_rs_ring(Plan& plan, bool bidir, int64_t m0, int64_t m_rows, const CommHook& on_comm);

}  // namespace collmm
