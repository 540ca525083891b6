#!/usr/bin/env bash
# test.sh: installs the packages (setup-deps.sh), checks the sources' format (format-check.sh,
# .clang-format), configures and builds everything, runs every test
# (ctest; the GPU tests skip themselves where there is no GPU), then the Python package: a virtual
# environment with torch (setup-python.sh: VENV, default .venv), collmm built into it, and its
# pytest suites (python/tests: gloo, 1..4 processes). Exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-deps.sh
bash scripts/format-check.sh
source scripts/build-env.sh
configure_and_build
(cd "$BUILD_DIR" && ctest --output-on-failure)
bash scripts/setup-python.sh
"${VENV:-.venv}/bin/python" -m pytest -q python/tests
