#!/usr/bin/env bash
# demo.sh: from a fresh Debian 12 machine to a checked run: installs the packages (setup-deps.sh),
# configures and builds collmm-bench, then runs every op and algorithm on 4 CPU ranks with --check,
# writing out/trace.json (open it in https://ui.perfetto.dev or chrome://tracing), one SVG timeline
# per case (out/timeline-<op>-<algo>.svg, opens in a browser) and out/results.json. Extra arguments go to collmm-bench (e.g. -m 2048 -n 2048 -k 2048).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-deps.sh
source scripts/build-env.sh
configure_and_build collmm-bench
mkdir -p out
$(mpirun_cmd) -np 4 "$BUILD_DIR"/tools/bench/collmm-bench --backend cpu --op all --algo all --check \
  --trace out/trace.json --timeline out/timeline.svg --json out/results.json "$@"
echo "demo: results in out/results.json; trace in out/trace.json; pictures in out/timeline-<op>-<algo>.svg"
