// nccl_transport.hpp: a plan's comm steps on NCCL, for one rank on its comm lane.
//  - sendrecv: one ncclGroupStart/End with an ncclSend/ncclRecv per transfer (bytes, ncclUint8);
//  - allgather: ncclAllGather when every part has the same rows and they lie back to back in
//    rank order. When they have the same rows at a uniform stride (ag_gemm pipelined: each stage's
//    part of every chunk), ncclAllGather into the rank's scratch and one cudaMemcpy2DAsync that
//    spreads the parts to their rows. Else one ncclBroadcast per root in a group (an allgatherv);
//  - reduce_scatter: ncclReduceScatter (sum, output dtype) when the parts are equal and back to
//    back, else one ncclReduce per root in a group.
// Also: making communicators with NCCL's CTA bounds (ncclConfig_t minCTAs / maxCTAs).
#pragma once

#include <nccl.h>

#include <vector>

#include "rank_device.hpp"

namespace collmm::cuda {

struct NcclSettings {
  int min_ctas = 0, max_ctas = 0;  // 0: NCCL's default
};

// Enqueues comm step `step` of `rank` (between its open_step and close_step).
void issue_nccl_step(RankDevice& rank, ncclComm_t comm, int step);

// The scratch the allgather steps of `rank`'s plan need (the strided case above); 0 if none.
size_t nccl_scratch_bytes(const RankDevice& rank);

// One communicator per entry of `devices` (ranks first_rank, first_rank + 1, ...), all in one
// group, as one thread driving several GPUs must make them. Blocking communicators (ncclConfig_t
// blocking = 1): every NCCL call returns when its work is enqueued, never ncclInProgress.
std::vector<ncclComm_t> make_nccl_comms(const ncclUniqueId& id, int world, int first_rank,
                                        const std::vector<int>& devices, const NcclSettings&);

ncclDataType_t nccl_type(Dtype);

}  // namespace collmm::cuda
