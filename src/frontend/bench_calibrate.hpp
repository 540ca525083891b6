// bench_calibrate.hpp: `collmm-bench --calibrate FILE`: the cost model's inputs measured on the
// current backend (any: the timers are plans run through the Executor) and written as a profile.
#pragma once

#include <ostream>

#include "bench_options.hpp"
#include "collmm/profile.hpp"
#include "executor.hpp"

namespace collmm {

// The fewest timed runs (-i) --calibrate takes per measured point: its line fits (link and
// collective times against the size) need medians steadier than a couple of runs give.
constexpr int kCalibrateMinIters = 10;

// Collective. Starts from --profile (or the backend's default profile) and measures:
//  - host issue (first): every algorithm of the asked ops at the bench's shape, run whole. The
//    host wall time the executor spent enqueueing (CalibrationHooks::last_issue_us, median of
//    --iters) over the device operations it enqueued gives Profile::host = {issue_us, shared}.
//    Those operations are host_issue.hpp's issue_ops, all local ranks' when one thread issues them
//    (CalibrationHooks::single_issuer). cpu: steps are not enqueued, the base profile's figures
//    stay. Where it is measured, the GEMM, link and collective times below are taken net of the
//    host's issue lead for their plans (host_issue.hpp's issue_time_us), since the simulator adds the
//    issue itself. Calibrate with the --graph setting you will run with (a graph's replay costs the
//    host almost nothing).
//  - GEMM: per shape (m, n, k), the sequential ag_gemm plan with M = m, N = n * P, K = k (its one
//    GEMM is m x n x k on every rank). It runs with StepFilter::gemm_only after one whole iteration
//    has filled the gathered A; the median of --iters runs (after --warmup) of the slowest rank.
//    The shapes: calibration_shapes(max(M, N, K)) no larger than the bench's largest GEMM, and every
//    GEMM shape the plans of the asked ops and algorithms (and --algo auto's candidates) run at the
//    bench's M, N, K and P.
//  - link (P > 1): per message size, the ag_gemm ring plan with StepFilter::comm_only whose chunk
//    is that many bytes, time / (P - 1) per sendrecv step; sizes 64 KiB x 16^i up to 16 MiB (or
//    the bench's largest chunk). P = 1 has no link: the base profile's figures are kept (said so).
//  - a link or collective series whose times do not grow with the size (load on the machine) is
//    timed again, up to kCalibrationRounds in all, each extra round's runs by their least time. Each
//    size keeps its least over the rounds; if it still does not grow the fit refuses it.
//  - collectives (P > 1): the sequential plans' comm alone (StepFilter::comm_only): ag_gemm's
//    allgather and gemm_rs's reduce-scatter. Parts of 64 KiB x 16^i up to the bench's own blocks
//    (1 MiB at least) and of those blocks, fitted per kind as the library runs them
//    (Profile::allgather / reduce_scatter).
//  - memory (P > 1): the add steps of the gemm_rs ring's comm alone (timestamps), at the bench's
//    block size; memory_gbps = 3 x bytes / time.
//  - cpu (and cuda's emulated ranks, one issuing thread), P > 1: the contention of comm with the
//    GEMMs on the rank's compute (cpu: the comm thread beside the BLAS threads on shared cores).
//    The model's contention input (GEMMs and comm each `s` times slower while the other runs on
//    the rank) is fitted (src/sim/calibrate.hpp's fit_contention). The fit makes the simulated
//    ag_gemm ring at the bench's shape match the measured one. cuda otherwise keeps the base
//    profile's SM contention.
// Reads as: the spec for the bench's shape, the timings, the fits, the printout; process 0 writes
// FILE and prints what was measured to `out`.
Profile run_calibration(Executor&, const BenchOptions&, std::ostream& out);

}  // namespace collmm
