#!/usr/bin/env bash
# setup-python.sh: the Python side of the tests: a virtual environment (VENV, default .venv) with
# torch, pytest and scikit-build-core, and collmm built into it (`pip install --no-build-isolation
# .`, python/). Installs only what is missing; the extension is rebuilt incrementally every time.
#
# torch comes from PyPI. Its Linux wheel is built with CUDA and asks for ~3 GB of nvidia-* and
# cuda-* packages; for the CPU tests only the libraries that libtorch links must load. So: the
# wheel without its dependencies, its pure-Python dependencies, then, as long as `import torch`
# fails, first the CUDA libraries it links that a machine with a CUDA toolkit lacks (NCCL,
# cuSPARSELt, NVSHMEM, cuFile, at the wheel's own pins), and last everything it asks for.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
PYTHON=${PYTHON:-python3}

if [ ! -x "$VENV/bin/python" ]; then
  "$PYTHON" -m venv "$VENV"
fi
py="$VENV/bin/python"
pip=("$py" -m pip install --disable-pip-version-check -q)

torch_imports() { "$py" -c "import torch" >/dev/null 2>&1; }

# The wheel's requirements whose names match $1 (a Python regex), one per line, without markers.
torch_requirements() {
  "$py" - "$1" <<'PY'
import re, sys
from importlib.metadata import requires
for r in requires("torch") or []:
    spec, _, marker = r.partition(";")
    if "extra ==" in marker:
        continue
    if re.match(sys.argv[1], spec.strip()):
        print(spec.strip())
PY
}

if ! torch_imports; then
  echo "setup-python: installing torch (the wheel, its pure-Python dependencies)"
  "${pip[@]}" --no-deps torch
  mapfile -t plain < <(torch_requirements '^(?!nvidia|cuda|triton)')
  "${pip[@]}" "${plain[@]}"
fi
if ! torch_imports; then
  echo "setup-python: torch does not load yet: adding the CUDA libraries it links that are missing here"
  mapfile -t libs < <(torch_requirements '^(nvidia-nccl|nvidia-cusparselt|nvidia-nvshmem)')
  "${pip[@]}" --no-deps "${libs[@]}" nvidia-cufile
fi
if ! torch_imports; then
  echo "setup-python: torch still does not load: installing all its dependencies"
  "${pip[@]}" torch
fi
"$py" -c "import torch; print('setup-python: torch', torch.__version__)"

"$py" -c "import pytest, numpy, scikit_build_core" >/dev/null 2>&1 || "${pip[@]}" pytest numpy scikit-build-core
echo "setup-python: building collmm (pip install --no-build-isolation .)"
"${pip[@]}" --no-build-isolation .
