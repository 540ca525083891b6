#!/usr/bin/env bash
# demo.sh: from a fresh Debian 12 machine to what collmm does, in three parts:
#  1. every op and algorithm timed and checked on this machine (cpu backend, MPI ranks), on shapes
#     chosen here: short runs of the sequential plan measure the GEMM rate and the link, and each
#     op's free size (N for ag_gemm, K for gemm_rs and gemm_ar) is set so that its comm and its
#     GEMMs take about the same time: what overlap can hide. A summary per op ends it (the best
#     algorithm, its speedup, E, hidden%, the picture), with what the figures cannot say here (a
#     loaded machine, ranks sharing cores). Arguments go to collmm-bench, and then no shape is
#     chosen (scripts/demo.sh -m 4096 -n 512 -k 1024: every op at that shape; the demo sets -w, -i,
#     --rounds, --check and the output files).
#  2. collmm-sim's prediction for an 8-GPU H200 node at a Llama-70B MLP's shape (8192 tokens,
#     hidden 8192, intermediate 28672, bf16), for each op: the table of every algorithm and their timelines.
#  3. where the table of the best measured figures is (docs/perf.md).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-deps.sh
source scripts/build-env.sh
configure_and_build collmm-bench collmm-sim
mkdir -p out
rm -f out/timeline-*.svg out/probe-*.json out/results-*.json
cores=$(nproc)
# One BLAS thread per rank and, where there are 4 cores or more, a core left for each rank's comm
# thread (MPI's shared-memory copies run on the CPU). At least 2 ranks: one would have no link.
ranks=$((cores / 2 > 2 ? cores / 2 : 2))
bench() { $(mpirun_cmd) -np "$ranks" "$BUILD_DIR"/tools/bench/collmm-bench --backend cpu --threads 1 "$@"; }
load=$(cut -d' ' -f1 /proc/loadavg)
echo "demo 1/3: $ranks MPI ranks on $cores cores (load average $load), 1 BLAS thread each"

declare -A shape=([ag_gemm]="2048 64 1024" [gemm_rs]="2048 1024 64" [gemm_ar]="2048 1024 64")
for op in ag_gemm gemm_rs gemm_ar; do
  [ $# -eq 0 ] || break  # the caller's shape
  for pass in 1 2 3; do  # later passes correct for the GEMM rate at the shape before
    read -r m n k <<<"${shape[$op]}"
    bench --op "$op" --algo sequential -m "$m" -n "$n" -k "$k" -w 2 -i 5 --json "out/probe-$op.json" >/dev/null
    shape[$op]=$(python3 scripts/demo-report.py shape "$op" "$m" "$n" "$k" "out/probe-$op.json")
  done
  read -r m n k <<<"${shape[$op]}"
  echo "demo: $op at M=$m N=$n K=$k: its comm and its GEMMs measured about equal here"
done
load=$(cut -d' ' -f1 /proc/loadavg)

for op in ag_gemm gemm_rs gemm_ar; do
  read -r m n k <<<"${shape[$op]}"
  size=(-m "$m" -n "$n" -k "$k")
  [ $# -eq 0 ] || size=()
  echo
  echo "demo: $op, every algorithm, outputs compared with an f64 reference (3 rounds, each case in turn)"
  bench --op "$op" --algo all "${size[@]}" -w 3 -i 10 --rounds 3 --check \
    --trace "out/trace-$op.json" --timeline out/timeline.svg --json "out/results-$op.json" "$@" |
    grep -v '^# timeline: '
done
echo
python3 scripts/demo-report.py summary "$cores" "$ranks" "$load" out/results-{ag_gemm,gemm_rs,gemm_ar}.json
echo "  Results: out/results-<op>.json; Chrome traces: out/trace-<op>.json."
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
