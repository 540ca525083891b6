#!/usr/bin/env bash
# test.sh: installs the packages (setup-deps.sh), checks the sources' format (format-check.sh,
# .clang-format), configures and builds everything with warnings as errors, runs every C++ test
# (ctest; the GPU tests skip themselves where there is no GPU), then the Python package: a virtual
# environment with torch (setup-python.sh: VENV, default .venv), collmm built into it, and its
# pytest suites (python/tests: gloo, 1..4 processes). Both halves always run, whatever the first
# gave; the script prints both summaries and exits non-zero if either failed.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-deps.sh
bash scripts/format-check.sh
source scripts/build-env.sh
export COLLMM_CONFIGURE_ARGS="-DCOLLMM_WERROR=ON ${COLLMM_CONFIGURE_ARGS:-}"
configure_and_build
cpp=0
(cd "$BUILD_DIR" && ctest --output-on-failure) || cpp=$?
py=0
{ bash scripts/setup-python.sh && "${VENV:-.venv}/bin/python" -m pytest -q python/tests; } || py=$?
echo "test.sh: C++ tests (ctest): $([ $cpp = 0 ] && echo passed || echo "FAILED (exit $cpp)")"
echo "test.sh: Python tests (pytest): $([ $py = 0 ] && echo passed || echo "FAILED (exit $py)")"
[ $cpp = 0 ] && [ $py = 0 ]
