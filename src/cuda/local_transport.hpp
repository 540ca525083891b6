// local_transport.hpp: P ranks emulated in one process (--transport local). Every rank's plan is
// issued from one host thread, round robin over the ranks. A rank stops at a comm step until all
// the peers of that group (a sendrecv's partners, transitively; every rank for a collective) stand
// at their matching step. Then the whole group is issued at once in three phases:
//   1. each member's open_step: its waits, then its start event ("my send data is ready");
//   2. each receiver waits for its senders' start events and pulls the data with cudaMemcpyAsync
//      (cudaMemcpyPeerAsync across GPUs) on its own comm lane (reduce_scatter: copy + GPU adds),
//      then records its `copied` event;
//   3. each sender waits for its receivers' `copied` events (its buffers may change after this),
//      then close_step.
// The plans are deadlock-free under these rules (the plan checker proves it); if no rank can move
// the scheduler throws naming where each rank stands.
#pragma once

#include <vector>

#include "rank_device.hpp"

namespace collmm::cuda {

// ranks[r] must hold rank r of a world of ranks.size(). Between begin_iteration and end_iteration.
void issue_local_iteration(const std::vector<RankDevice*>& ranks);

}  // namespace collmm::cuda
