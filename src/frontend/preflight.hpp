// preflight.hpp: collmm-bench's checks before any work, beside the plans' own (collmm/types.hpp):
// every output path can be written (so that a finished run never loses its results to a typo), and
// the memory the run needs fits the machine (src/common/memory.hpp). Both throw UsageError.
#pragma once

#include <utility>
#include <vector>

#include "bench_options.hpp"
#include "memory.hpp"

namespace collmm {

// --json, --trace, --timeline, --tune-cache and --calibrate (checked where `writer`: process 0
// writes them) and --save DIR (every process: created if absent). Probed by why_not_writable
// (atomic_file.hpp): nothing under an output's name is created, truncated or removed.
void check_outputs_writable(const BenchOptions&, bool writer);

// Every --timeline file of these cases (timeline_path, algo_entries.hpp), checked (process 0)
// before the run, as above.
void check_timeline_paths(const std::string& base, const std::vector<std::pair<Op, std::string>>& cases);

// The peak need of this process over the cases: the plans' buffers of its local ranks (the largest
// case: each case's buffers replace the last one's). In host memory: the inputs as generated (f64
// and encoded) and, with --check, the f64 reference (the local C's and ag_gemm's gathered A).
// plays_peers (cuda --transport host): also the job's whole inputs (on the device, and generated
// on the host), the ring collectives' accumulators, and the pinned host memory of every transfer.
MemoryNeed memory_need(const BenchOptions&, const std::vector<std::pair<Op, PlanOptions>>& cases, int world,
                       const std::vector<int>& local_ranks, Dtype out_dtype, bool plays_peers = false);

}  // namespace collmm
