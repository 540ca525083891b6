// collmm/cost_model.hpp: the machine as the simulator sees it. A Profile holds the model's inputs
// (GEMM rate, memory and link bandwidths and latencies, SM contention, the host's issue cost) and
// is read from and written to JSON; the functions below turn a step's shape into a time in
// microseconds.
//
// Entry points for the front ends:
//   Profile load_profile(const std::string& name_or_path);   // "h200-nvlink", "h200-ib",
//                                                            // "cpu-2core", or a JSON file
//   void save_profile(const Profile&, const std::string& path);
//   nlohmann::json to_json(const Profile&);  Profile profile_from_json(const nlohmann::json&);
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
//                     issue_us per device operation, the step's event records and waits folded in,
//                     and never waits for the device. The operations are sim.hpp's issue_ops: a
//                     GEMM, copy or add is one; a sendrecv one per receive, at least one; a
//                     collective P, the local transport's per-part copies or adds. A GEMM costs
//                     gemm_issue_us where it is set. One issuer per rank walks its plan in list
//                     order. Shared (one host thread for every emulated rank, cuda --transport
//                     local) walks them in the local transport's order: round robin, each rank up
//                     to its next comm step, a comm step once its group stands there.
//                     issue_us 0 (the built-in profiles): no host term.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "collmm/element_types.hpp"
#include "collmm/types.hpp"

namespace collmm {

// One measured GEMM rate.
struct GemmPoint {
  Dtype dtype = Dtype::bf16;
  int64_t m = 0, n = 0, k = 0;
  double tflops = 0;
};

enum class GemmModel { roofline, table };
std::string to_string(GemmModel);
GemmModel parse_gemm_model(const std::string&);

struct GemmCost {
  GemmModel model = GemmModel::roofline;
  std::vector<std::pair<Dtype, double>> peak_tflops;  // roofline peak per input dtype
  std::vector<GemmPoint> table;                       // rate table (model == table)
  double overhead_us = 0;                             // per call: launch and tail
  GemmLibrary library = GemmLibrary::cublaslt;        // sets the element type of C and the sums
};

struct LinkCost {
  int ranks_per_node = 0;  // 0: every rank in one domain (NVLink, shared memory)
  double intra_gbps = 0;   // GB/s per direction per rank, inside a node
  double intra_latency_us = 0;
  double inter_gbps = 0;  // GB/s per direction per rank, between nodes
  double inter_latency_us = 0;
  // The hop from a transfer to the add that waits for it. Where a transport runs its transfers on
  // streams of their own and the adds on a lane (the host bed), a reduce-scatter's step is a
  // sendrecv, then an event hop, then the add, which must end before the next send. So an add after
  // a receive (the rings' and the lowered reduce-scatter's alike) costs this much more. With many
  // small parts (pipelined's stages, small M) that fixed cost dominates. 0: the add hides under
  // the transfer (a fused reduce, as NCCL's).
  double collective_step_us = 0;
  // The messages of one step that share a link direction run one after another (the host bed: one
  // copy stream per direction), so each pays the latency: a step of two sends (bidir) costs two
  // latencies. false: they run at once and pay it once (NCCL's grouped sends).
  bool serial_messages = false;
};

struct Contention {
  bool transport_uses_sms = false;  // comm kernels (NCCL, SM copies) share the SMs with GEMMs
  double gemm_slowdown = 1;         // GEMM time factor while a comm kernel moves data
  double comm_slowdown = 1;         // comm time factor while a GEMM runs
  bool launch_order = false;        // a GEMM that holds the SMs delays a comm kernel launched after it
};

// A library collective measured as it is (MPI_Allgather, MPI_Reduce_scatter, NCCL's): t =
// (P-1) * (latency_us + largest part's bytes / gbps). gbps 0: not measured, the ring model over
// the links is used.
struct CollectiveCost {
  double gbps = 0;
  double latency_us = 0;
  // The measured (part bytes, us per ring step) behind the line, ascending by bytes. When present
  // a ring step takes the piecewise-linear interpolation between them (below the first: the
  // first's time; above the last: the last's plus the extra bytes at gbps). A library collective
  // is not one line from in-cache to out-of-cache sizes (Open MPI's reduce-scatter of small parts).
  std::vector<std::pair<double, double>> points;
};

// The host's cost of enqueueing work on the device (see "host issue" above). issue_us 0: none.
// Real multi-GPU runs have one host thread per rank whose launches hide behind long kernels;
// ranks emulated in one process (--transport local) share one thread, which at P = 8 can be
// slower than the device.
struct HostCost {
  double issue_us = 0;       // host microseconds per device operation enqueued
  bool shared = false;       // one host thread issues every rank's steps (else one per rank)
  double gemm_issue_us = 0;  // per GEMM launch, where it differs (cuBLASLt costs the host more than
                             // a copy); 0: issue_us
};

struct Profile {
  std::string name;
  std::string notes;  // where the numbers come from
  GemmCost gemm;
  double memory_gbps = 0;  // effective bytes moved per second by copies and adds
  LinkCost links;
  Contention contention;
  CollectiveCost allgather;  // JSON "collectives": {"allgather": {...}, "reduce_scatter": {...}}
  CollectiveCost reduce_scatter;
  HostCost host;  // JSON "host": {"issue_us": ..., "shared": ...}; absent: none
};

// Built-in profiles (builtin_profile_names: "h200-nvlink", "h200-ib", "h200-host", "cpu-2core") or a
// JSON file; throws UsageError for an unknown name or a file that does not parse.
Profile load_profile(const std::string& name_or_path);
std::vector<std::string> builtin_profile_names();
Profile builtin_profile(const std::string& name);
nlohmann::json to_json(const Profile&);
Profile profile_from_json(const nlohmann::json&);
void save_profile(const Profile&, const std::string& path);

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
