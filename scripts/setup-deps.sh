#!/usr/bin/env bash
# setup-deps.sh: installs the Debian 12 packages collmm builds and tests with (apt-get), skipping
# those already installed. Run as root, or as a user with sudo. The CUDA backend also needs nvcc and
# NCCL (e.g. /usr/local/cuda); without them it is left out of the build and the rest still builds.
set -euo pipefail

packages=(
  cmake make g++ pkg-config            # build
  libopenmpi-dev openmpi-bin           # MPI: transport of the cpu backend, mpirun
  libopenblas-dev                      # GEMMs of the cpu backend and the f64 reference
  libcli11-dev nlohmann-json3-dev      # collmm-bench's command line, JSON and traces
  libgtest-dev                         # tests
  clang libclang-rt-14-dev             # the fuzz target (libFuzzer), tests/fuzz; clang-check.sh
  clang-format-14                      # the format check (scripts/format-check.sh, .clang-format)
  python3 python3-venv                 # the demo's shapes and summary; the Python tests' venv
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup-deps: all ${#packages[@]} packages present"
  exit 0
fi

sudo=()
[ "$(id -u)" -ne 0 ] && sudo=(sudo)
echo "setup-deps: installing ${missing[*]}"
"${sudo[@]}" apt-get update
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
