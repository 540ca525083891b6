// calibrate.hpp: building a cost-model Profile from measurements on the current machine.
// A front end times what the spec asks for (its timers run plans on a backend); the fits here turn
// those times into the profile's inputs. `collmm-bench --calibrate` wires the real backend in.
//
//   CalibrationTimes measure(spec, timers...);        // calls each timer over the spec's sizes
//   Profile fit_profile(spec, times);                 // the fits below
//   Profile calibrate(spec, timers...);               // fit_profile(spec, measure(spec, timers...))
//   HostCost fit_issue(samples);                      // host issue cost per device operation
//   double fit_contention(profile, problem, ring, dtype, measured_us);
//
// What is fitted:
//   GEMM: a rate table (GemmModel::table), one point per shape, tflops = 2mnk / t. The per-call
//         overhead is left 0 (the measured times include it). The dtype's roofline peak is set to
//         the fastest point (used by shapes of other dtypes only if the table lacks them).
//   link: least squares of t = latency + bytes / bw over the message sizes (intra-node figures;
//         inter-node too when base.links.ranks_per_node is 0, i.e. one domain).
//   collectives (when collective times and collective_bytes are given, world > 1): per kind
//         (allgather, reduce_scatter) least squares of t / (world-1) = latency + part bytes / bw,
//         the library's collective as it is (Profile::allgather / reduce_scatter).
//   memory (when add times and add_bytes are given): memory_gbps = the least-squares slope
//         through 0 of t against the 3 * bytes an add moves (reads two, writes one), as the
//         model's add_time_us counts them.
//   host (when measured, issue_us > 0): Profile::host = {the measured figures, spec.shared_issuer};
//         0 (a backend whose steps are not enqueued: cpu) keeps the base's.
//   Everything else (contention, inter-node links) is kept from spec.base; fit_contention is the
//   front end's to apply where comm and GEMMs share a rank's cores.
#pragma once

#include <array>
#include <functional>
#include <string>
#include <vector>

#include "collmm/plan.hpp"
#include "collmm/profile.hpp"

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
// Host microseconds per device operation enqueued (host_issue.hpp's issue_ops: the unit of
// Profile::host.issue_us), and per GEMM launch where told apart (gemm_issue_us; 0: the same);
// issue_us 0 where the backend does not enqueue its steps. `shared` is the spec's.
using IssueTimer = std::function<HostCost()>;

struct CalibrationSpec {
  std::string name = "calibrated";
  Dtype dtype = Dtype::bf16;
  std::vector<GemmShape> gemm_shapes;    // at least one
  std::vector<double> comm_bytes;        // at least two different sizes, or none (one rank: links kept from base)
  Profile base;                          // the inputs not measured here
  int world = 1;                         // ranks of the collectives the CollectiveTimer times
  std::vector<double> collective_bytes;  // part sizes: two or more, or none (collectives not measured)
  std::vector<double> add_bytes;         // add output sizes: one or more, or none (memory_gbps from base)
  bool shared_issuer = false;            // one host thread issues every rank's steps (Profile::host.shared)
};

// The measured times, parallel to the spec's sizes; an empty list: not measured.
struct CalibrationTimes {
  std::vector<double> gemm_us;            // per spec.gemm_shapes
  std::vector<double> comm_us;            // per spec.comm_bytes: one sendrecv step
  std::vector<double> allgather_us;       // per spec.collective_bytes: the whole collective
  std::vector<double> reduce_scatter_us;  // per spec.collective_bytes
  std::vector<double> add_us;             // per spec.add_bytes
  HostCost host;                          // issue_us 0: not measured (the base's figures stay)
};

// One algorithm's whole iteration as the host issued it: its GEMM launches, its other device
// operations (host_issue.hpp's issue_ops) and the host wall time of the issue.
struct IssueSample {
  double gemms = 0, others = 0, us = 0;
};

// The device operations the host issues for one iteration of `plans` (one per local rank): GEMM
// launches and others (host_issue.hpp's issue_ops). They are summed over the ranks when one thread issues
// them all (single_issuer), else those of the rank that issues the most. `us` is left 0.
IssueSample issue_counts(const std::vector<Plan>& plans, int world, bool single_issuer);

// m in {L/8, L/2, L}, (n, k) in {(L, L), (L/2, L)}: six shapes around the largest dimension L.
std::vector<GemmShape> calibration_shapes(int64_t largest);
// 64 KiB, 1 MiB, 16 MiB, ... up to `largest` bytes.
std::vector<double> calibration_sizes(double largest);

// How many times in all `measure` times a message or collective series whose times do not grow
// with the size (where the fits need them to: flat_times_ok false) before it leaves the series to
// fit_profile's refusal. Load on the machine only adds time: a rank preempted while its peer waits
// costs a scheduler slice, 4-8 ms on the 2-core CI machine, whatever the size. So each size keeps
// its least time over the rounds: the lower envelope, which load cannot raise once one round ran
// clean.
constexpr int kCalibrationRounds = 4;

// Called before each round of a message or collective series (what: "message", "allgather" or
// "reduce_scatter"; round: 1..kCalibrationRounds). So a front end can say when a series is timed
// again, and time the extra rounds' runs by their least rather than their median.
using RoundHook = std::function<void(const char* what, int round)>;

// Throws UsageError for a spec without shapes or with a single size (messages, collectives).
// Times in the spec's order: GEMM shapes, host issue, then (world > 1, comm_bytes given) message
// sizes, allgather and reduce-scatter over collective_bytes, adds over add_bytes. A timer that is
// not given is not called, and its times stay empty. A message or collective series whose times
// do not grow with the size is timed again (kCalibrationRounds above; `again` told before each round).
CalibrationTimes measure(const CalibrationSpec&, const GemmTimer&, const CommTimer&, const CollectiveTimer& = {},
                         const AddTimer& = {}, const IssueTimer& = {}, const RoundHook& again = {});
// Whether the link and collective fits accept times that do not grow with the size. They do where a
// host issue cost is measured (or the base profile has one): the times are then the device's share
// of a transfer the host paced, a flat latency.
bool flat_times_ok(const CalibrationSpec&, const HostCost& measured);
// Throws std::runtime_error when a time is not positive or link or collective times do not grow
// with the size (unless flat_times_ok), naming the times.
Profile fit_profile(const CalibrationSpec&, const CalibrationTimes&);
Profile calibrate(const CalibrationSpec&, const GemmTimer&, const CommTimer&, const CollectiveTimer& = {},
                  const AddTimer& = {}, const IssueTimer& = {});
Profile calibrate_to_file(const CalibrationSpec&, const GemmTimer&, const CommTimer&, const std::string& path,
                          const CollectiveTimer& = {}, const AddTimer& = {}, const IssueTimer& = {});

// Host issue cost from whole iterations whose mixes of GEMMs and other operations differ: least
// squares of us = gemms x gemm_issue_us + others x issue_us. Where the two cannot be told apart
// (mixes nearly proportional, or a figure <= 0), one figure for both: the total wall over all
// operations. {0, 0}: no samples.
HostCost fit_issue(const std::vector<IssueSample>&);

// The single contention factor s (GEMM and comm each s times slower while the other runs on the
// rank) at which the simulated plan `ring` takes `measured_us` (bisection on [1, 16]); 1 when it
// is already as slow. The profile's launch-order rule is kept.
double fit_contention(const Profile&, const Problem&, const PlanOptions& ring, Dtype, double measured_us);

}  // namespace collmm
