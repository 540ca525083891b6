#!/usr/bin/env bash
# test.sh: installs the packages (setup-deps.sh), configures and builds everything, runs every test
# (ctest; the GPU tests skip themselves where there is no GPU). Exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-deps.sh
source scripts/build-env.sh
configure_and_build
cd "$BUILD_DIR"
ctest --output-on-failure
