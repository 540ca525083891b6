// collmm/profile.hpp: the machine as the cost model sees it. A Profile holds the model's inputs
// (GEMM rate, memory and link bandwidths and latencies, SM contention, the host's issue cost); it
// is one of the built-in profiles or read from a JSON file, and is what the simulator (collmm/sim.hpp)
// predicts with. The formulas that turn a step's shape into a time are internal
// (src/sim/cost_model.hpp), and so is the JSON form (src/sim/profile_json.hpp).
//
//   Profile load_profile(const std::string& name_or_path);   // "h200-nvlink", "h200-ib",
//                                                            // "cpu-2core", or a JSON file
//   void save_profile(const Profile&, const std::string& path);
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

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
  // sendrecv, then an event hop, then the add, which must end before the next send: an add after a
  // receive (the rings' and the lowered reduce-scatter's alike) costs this much more. With many
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
  // first's time; above the last: the last's plus the extra bytes at gbps): a library collective
  // is not one line from in-cache to out-of-cache sizes (Open MPI's reduce-scatter of small parts).
  std::vector<std::pair<double, double>> points;
};

// The host's cost of enqueueing work on the device (the model's "host issue": src/sim/cost_model.hpp).
// issue_us 0: none. Real multi-GPU runs have one host thread per rank whose launches hide behind
// long kernels; ranks emulated in one process (--transport local) share one thread, which at P = 8
// can be slower than the device.
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
void save_profile(const Profile&, const std::string& path);

}  // namespace collmm
