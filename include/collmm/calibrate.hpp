// collmm/calibrate.hpp: building a cost-model Profile from measurements on the current machine.
// A backend supplies timers; calibration runs them over a set of GEMM shapes and message sizes,
// fits the model's inputs and returns (or writes) the profile.
//
// Entry points for the front ends (`collmm-bench --calibrate` wires the real backend in):
//   Profile calibrate(const CalibrationSpec&, const GemmTimer&, const CommTimer&);
//   Profile calibrate_to_file(spec, gemm_timer, comm_timer, path);   // also writes the JSON
//   std::vector<GemmShape> calibration_shapes(int64_t largest);
//
// What is fitted:
//   GEMM: a rate table (GemmModel::table), one point per shape, tflops = 2mnk / t; the per-call
//         overhead is left 0 (the measured times include it); the dtype's roofline peak is set to
//         the fastest point (used by shapes of other dtypes only if the table lacks them).
//   link: least squares of t = latency + bytes / bw over the message sizes (intra-node figures;
//         inter-node too when base.links.ranks_per_node is 0, i.e. one domain).
//   collectives (when a CollectiveTimer and collective_bytes are given, world > 1): per kind
//         (allgather, reduce_scatter) least squares of t / (world-1) = latency + part bytes / bw,
//         the library's collective as it is (Profile::allgather / reduce_scatter).
//   memory (when an AddTimer and add_bytes are given): memory_gbps = the least-squares slope
//         through 0 of t against the 3 * bytes an add moves (reads two, writes one), as the
//         model's add_time_us counts them.
//   host (when an IssueTimer is given and returns > 0): Profile::host = {its figure,
//         spec.shared_issuer}; 0 (a backend whose steps are not enqueued: cpu) keeps the base's.
//   device (spec.ranks_per_device > 1 and a device GEMM timer: ranks emulated on one GPU): the
//         GemmTimer times a GEMM alone on the device (the table's tflops), the device timer the
//         same shape run by every rank of the device at once (GemmPoint::device_tflops =
//         ranks x 2mnk / t); Profile::ranks_per_device is set.
//   Everything else (contention, inter-node links) is kept from spec.base.
#pragma once

#include <array>
#include <functional>
#include <string>
#include <vector>

#include "collmm/cost_model.hpp"
#include "collmm/plan.hpp"

namespace collmm {

using GemmShape = std::array<int64_t, 3>;  // m, n, k
// Microseconds for one GEMM of this shape in the spec's dtype (median of several runs, say).
using GemmTimer = std::function<double(int64_t m, int64_t n, int64_t k)>;
// Microseconds for one sendrecv step that sends `bytes` to a neighbour and receives as many.
using CommTimer = std::function<double(double bytes)>;
// Microseconds for one library collective of `kind` (StepKind::allgather or reduce_scatter) over
// the spec's world ranks, whose largest part is `max_part_bytes`.
using CollectiveTimer = std::function<double(StepKind kind, double max_part_bytes)>;
// Microseconds for one add step (out += a) whose output is `bytes`.
using AddTimer = std::function<double(double bytes)>;
// Host microseconds per device operation enqueued (sim.hpp's issue_ops: the unit of
// Profile::host.issue_us), and per GEMM launch where told apart (gemm_issue_us; 0: the same);
// issue_us 0 where the backend does not enqueue its steps. `shared` is the spec's.
using IssueTimer = std::function<HostCost()>;

struct CalibrationSpec {
  std::string name = "calibrated";
  Dtype dtype = Dtype::bf16;
  std::vector<GemmShape> gemm_shapes;  // at least one
  std::vector<double> comm_bytes;      // at least two different sizes, or none (one rank: links kept from base)
  Profile base;                        // the inputs not measured here
  int world = 1;                       // ranks of the collectives the CollectiveTimer times
  std::vector<double> collective_bytes;  // part sizes: two or more, or none (collectives not measured)
  std::vector<double> add_bytes;       // add output sizes: one or more, or none (memory_gbps from base)
  bool shared_issuer = false;          // one host thread issues every rank's steps (Profile::host.shared)
  int ranks_per_device = 1;            // ranks sharing one device (Profile::ranks_per_device)
};

// m in {L/8, L/2, L}, (n, k) in {(L, L), (L/2, L)}: six shapes around the largest dimension L.
std::vector<GemmShape> calibration_shapes(int64_t largest);
// 64 KiB, 1 MiB, 16 MiB, ... up to `largest` bytes.
std::vector<double> calibration_sizes(double largest);

// Throws UsageError for a spec without shapes or with a single size, std::runtime_error when a timer returns a
// non-positive time or the times do not grow with the size.
// The collective and add timers are only called for the sizes of the spec's collective_bytes and add_bytes.
// `gemm_device`: microseconds for the shape run by every rank of a shared device at once (used
// when spec.ranks_per_device > 1).
Profile calibrate(const CalibrationSpec&, const GemmTimer&, const CommTimer&, const CollectiveTimer& = {},
                  const AddTimer& = {}, const IssueTimer& = {}, const GemmTimer& gemm_device = {});
Profile calibrate_to_file(const CalibrationSpec&, const GemmTimer&, const CommTimer&, const std::string& path,
                          const CollectiveTimer& = {}, const AddTimer& = {}, const IssueTimer& = {},
                          const GemmTimer& gemm_device = {});

}  // namespace collmm
