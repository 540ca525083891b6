#!/usr/bin/env bash
# demo.sh: from a fresh Debian 12 machine to what collmm does, in three parts:
#  1. a checked CPU run: every op and algorithm on as many MPI ranks as this machine has cores,
#     with --check (out/trace.json for https://ui.perfetto.dev, out/timeline-<op>-<algo>.svg,
#     out/results.json). Extra arguments go to collmm-bench (e.g. -m 2048 -n 2048 -k 2048).
#  2. collmm-sim's prediction for an 8-GPU H200 node at a Llama-70B MLP's shape (8192 tokens,
#     hidden 8192, intermediate 28672, bf16), for each op: the table of every algorithm and their timelines.
#  3. where the table of the best measured figures is (docs/perf.md).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-deps.sh
source scripts/build-env.sh
configure_and_build collmm-bench collmm-sim
mkdir -p out
ranks=$(nproc)
echo "demo 1/3: a checked CPU run on $ranks ranks (one per core): every op and algorithm, outputs compared with an f64 reference"
$(mpirun_cmd) -np "$ranks" "$BUILD_DIR"/tools/bench/collmm-bench --backend cpu --op all --algo all --check \
  --trace out/trace.json --timeline out/timeline.svg --json out/results.json "$@"
echo "demo: results in out/results.json; trace in out/trace.json; pictures in out/timeline-<op>-<algo>.svg"
echo
echo "demo 2/3: predicted by the cost model (collmm-sim, profile h200-nvlink), 8 GPUs, Llama-70B MLP, bf16:"
echo "  the up projection (ag_gemm, M=8192 N=28672 K=8192), then the down projection (gemm_rs, M=8192 N=8192 K=28672),"
echo "  then the down projection without sequence parallelism (gemm_ar, the same shape, C whole on every rank)"
sim="$BUILD_DIR/tools/sim/collmm-sim --profile h200-nvlink --dtype bf16 -P 8 --algo all"
$sim --op ag_gemm -m 8192 -n 28672 -k 8192 --timeline out/sim-up.svg
$sim --op gemm_rs -m 8192 -n 8192 -k 28672 --timeline out/sim-down.svg
$sim --op gemm_ar -m 8192 -n 8192 -k 28672 --timeline out/sim-down-ar.svg
echo "demo: predicted timelines in out/sim-up-<op>-<algo>.svg, out/sim-down-<op>-<algo>.svg and out/sim-down-ar-<op>-<algo>.svg"
echo
echo "demo 3/3: the best measured figures (H200 and CPU beds, not this machine) with the commands that reproduce them:"
echo "  docs/perf.md, table \"Best measured time against the limit\""
