#!/usr/bin/env bash
# test.sh: installs the packages (setup-deps.sh), checks the sources' format (format-check.sh,
# .clang-format), configures and builds everything with warnings as errors, runs every C++ test
# (ctest; the GPU tests skip themselves where there is no GPU), then the Python package: a virtual
# environment with torch (setup-python.sh: VENV, default .venv), collmm built into it, and its
# pytest suites (python/tests: gloo, 1..4 processes), and last the second compiler's warnings
# (clang-check.sh: clang++ -fsyntax-only -Werror over every translation unit, the extension's too).
# Every part runs, whatever the others gave; the script prints each summary and exits non-zero if
# any failed.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-deps.sh
bash scripts/format-check.sh
source scripts/build-env.sh
export COLLMM_CONFIGURE_ARGS="-DCOLLMM_WERROR=ON ${COLLMM_CONFIGURE_ARGS:-}"
configure_and_build
cpp=0
(cd "$BUILD_DIR" && ctest --output-on-failure) || cpp=$?
ctest_skip_reasons "$BUILD_DIR"
py=0
{ bash scripts/setup-python.sh && "${VENV:-.venv}/bin/python" -m pytest -q python/tests; } || py=$?
clang=0
bash scripts/clang-check.sh || clang=$?
summary() { [ "$2" = 0 ] && echo "test.sh: $1: passed" || echo "test.sh: $1: FAILED (exit $2)"; }
summary "C++ tests (ctest)" $cpp
summary "Python tests (pytest)" $py
summary "clang++ -Werror (clang-check.sh)" $clang
[ $cpp = 0 ] && [ $py = 0 ] && [ $clang = 0 ]
