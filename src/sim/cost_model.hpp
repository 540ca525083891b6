// cost_model.hpp: the cost model's formulas. The functions below turn a step's shape into a time
// in microseconds from the figures of a Profile (collmm/profile.hpp).
//
// The model, in one place:
//   GEMM (m, n, k):   t = max(2mnk / rate, bytes(A,B,C) / memory) + overhead_us
//                     rate: from the table (inverse-distance weighting of its points in
//                     log2(m), log2(n), log2(k), exact at a point), or the roofline peak.
//   copy / add:       t = (2 or 3) * bytes / memory        (read + write; add reads two)
//   one message:      t = latency + bytes / (bw / share),  bw and latency of the pair's class
//                     (intra-node, or inter-node when both ranks are not in one node), share =
//                     how many messages of the same class the step sends (or receives) at once.
//   allgather / reduce-scatter of parts p_q:  ring algorithm, (P-1) steps of
//                     latency + max_q bytes(p_q) / bw_ring   (+ the reduction's memory time for
//                     reduce-scatter, when that is longer), bw_ring = the slowest link of the ring.
//                     When the profile has the library's own figures for that collective kind
//                     (Profile::allgather / reduce_scatter, gbps > 0, measured by calibrate), the
//                     (P-1) steps take latency + max_q bytes(p_q) / gbps of those instead;
//                     with its measured points, the interpolation between them.
//   GEMMs running at once on one rank (several GEMM lanes) share its rate equally.
//   SM contention (when the transport uses SMs): while a comm kernel (sendrecv, collective, add,
//                     copy) is moving data on a rank, its GEMMs run gemm_slowdown times slower;
//                     while a GEMM runs, that rank's comm runs comm_slowdown times slower. With
//                     launch_order, an SM comm kernel that becomes ready while a GEMM runs waits
//                     for it (the GEMM holds every SM), and GEMMs ready after it queue behind it.
//   host issue:       a step cannot start before the host has enqueued it. The host spends
//                     issue_us per device operation (host_issue.hpp's issue_ops: a GEMM, copy or
//                     add is one; a sendrecv one per receive, at least one; a collective P, the
//                     local transport's per-part copies or adds; a GEMM costs gemm_issue_us where
//                     it is set), the step's event records and waits folded in, and never waits
//                     for the device. One issuer per rank walks its plan in list order; shared
//                     (one host thread for every emulated rank, cuda --transport local) walks them
//                     in the local transport's order (round robin, each rank up to its next comm
//                     step, a comm step once its group stands there).
//                     issue_us 0 (the built-in profiles): no host term.
#pragma once

#include <cstdint>

#include "collmm/profile.hpp"
#include "collmm/types.hpp"

namespace collmm {

// Throws UsageError unless the model has a GEMM rate for `in` in this profile (gemm.peak_tflops.<in>,
// or with model table a table point of `in`): checked before a run, so that no prediction fails
// after work.
void check_gemm_rate(const Profile&, Dtype in);

// Times in microseconds.
double gemm_time_us(const Profile&, int64_t m, int64_t n, int64_t k, Dtype in);
double gemm_rate_tflops(const Profile&, int64_t m, int64_t n, int64_t k, Dtype in);  // before the memory bound
double copy_time_us(const Profile&, double bytes);
double add_time_us(const Profile&, double bytes);
// An add of a received sum: its time, plus links.collective_step_us where the add runs after the
// transfer (the one rule for the rings' adds and a lowered reduce-scatter's).
double add_after_receive_us(const Profile&, double bytes);
// Whether the profile models a transport that runs collectives as lowered rings of sendrecv and
// add steps (links.collective_step_us > 0: the host bed), not as one library call.
bool lowers_collectives(const Profile&);
// Whether ranks a and b share a node.
bool same_node(const Profile&, int a, int b);
// One message of `bytes` between a and b, shared with share-1 others of its class: the link's
// bandwidth / share, and its latency once, or share times with links.serial_messages.
double message_time_us(const Profile&, int a, int b, double bytes, int share = 1);
// A ring allgather (reduce: false) or reduce-scatter (reduce: true) over `world` ranks, whose
// largest part is `max_part_bytes`.
double collective_time_us(const Profile&, int world, double max_part_bytes, bool reduce);
// One ring step of a measured collective (CollectiveCost::points non-empty) of parts of `bytes`.
double collective_step_us(const CollectiveCost&, double bytes);

}  // namespace collmm
