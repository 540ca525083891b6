#!/usr/bin/env bash
# setup-python.sh: the Python side of the tests: a virtual environment (VENV, default .venv) with
# torch, pytest, scikit-build-core and torchtitan 0.3.0 (TORCHTITAN=0: not), and collmm built into
# it (`pip install --no-build-isolation .`, python/). Installs only what is missing; the extension is rebuilt incrementally every time.
#
# torch comes from PyPI. Its Linux wheel is built with CUDA and asks for ~3 GB of nvidia-* and
# cuda-* packages; for the CPU tests only the libraries that libtorch links must load. So: the
# wheel without its dependencies, its pure-Python dependencies, then, as long as `import torch`
# fails, first the CUDA libraries it links that a machine with a CUDA toolkit lacks (NCCL,
# cuSPARSELt, NVSHMEM, cuFile, at the wheel's own pins), and last everything it asks for.
# TORCH_SPEC (default: the version CI runs) picks the wheel. pip keeps no cache (--no-cache-dir):
# the wheels would double what the venv takes on a disk CI shares. Those steps leave torch's CUDA
# requirements unmet on purpose, so pip is told not to warn of it (--no-warn-conflicts), and collmm
# itself goes in with --no-deps: resolving its dependency on torch would fetch them all.
# numpy goes in before the first `import torch` (torch warns when it cannot load numpy).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
PYTHON=${PYTHON:-python3}
TORCH_SPEC=${TORCH_SPEC:-torch==2.15.0}
# pip leaves its downloads unpacked in TMPDIR (pip-unpack-*, ~1.8 GB for torch and the CUDA
# libraries): a directory of this run's, removed when it ends.
TMPDIR=$(mktemp -d "${TMPDIR:-/tmp}/collmm-pip.XXXXXX")
export TMPDIR
trap 'rm -rf "$TMPDIR"' EXIT

if [ ! -x "$VENV/bin/python" ]; then
  "$PYTHON" -m venv "$VENV"
fi
py="$VENV/bin/python"
pip=("$py" -m pip install --disable-pip-version-check --no-cache-dir -q)

torch_imports() { "$py" -c "import torch" >/dev/null 2>&1; }

"$py" -c "import pytest, numpy, scikit_build_core" >/dev/null 2>&1 || "${pip[@]}" pytest numpy scikit-build-core

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
  free_mb=$(df -Pm "$VENV" | awk 'NR == 2 {print $4}')
  echo "setup-python: installing $TORCH_SPEC (the wheel, its pure-Python dependencies; ${free_mb} MB free here)"
  if [ "$free_mb" -lt 3500 ]; then
    echo "setup-python: warning: torch, the CUDA libraries it links and collmm's build need about 3.5 GB" >&2
  fi
  "${pip[@]}" --no-deps "$TORCH_SPEC"
  mapfile -t plain < <(torch_requirements '^(?!nvidia|cuda|triton)')
  "${pip[@]}" --no-warn-conflicts "${plain[@]}"
fi
if ! torch_imports; then
  echo "setup-python: torch does not load yet: adding the CUDA libraries it links that are missing here"
  mapfile -t libs < <(torch_requirements '^(nvidia-nccl|nvidia-cusparselt|nvidia-nvshmem)')
  "${pip[@]}" --no-deps --no-warn-conflicts "${libs[@]}" nvidia-cufile
fi
if ! torch_imports; then
  echo "setup-python: torch still does not load: installing all its dependencies"
  "${pip[@]}" "$TORCH_SPEC"
fi
"$py" -c "import torch; print('setup-python: torch', torch.__version__)"

# collmm[torchtitan]'s tests (python/tests/test_torchtitan*.py): torchtitan 0.3.0 and spmd_types at its
# pin, without their dependencies, whose requirement of torch would otherwise be resolved again;
# then what importing torchtitan's trainer needs, listed here (wandb is not: imported on use).
# torchtitan imports triton (~1 GB) at import time: torch's own pin of it. TORCHTITAN=0 skips all.
if [ "${TORCHTITAN:-1}" = 1 ] && ! "$py" -c "import torchtitan.trainer, spmd_types" >/dev/null 2>&1; then
  echo "setup-python: installing torchtitan 0.3.0 and what its trainer imports"
  mapfile -t triton < <(torch_requirements '^triton')
  "${pip[@]}" --no-deps torchtitan==0.3.0 spmd_types==0.2.3 torchdata torch_checkpointing "${triton[@]}"
  "${pip[@]}" --no-warn-conflicts tyro tensorboard tokenizers "datasets>=3.6.0,<4.8.0" einops safetensors urllib3 requests numpy \
    typing_extensions
fi
echo "setup-python: building collmm (pip install --no-build-isolation --no-deps .)"
"${pip[@]}" --no-build-isolation --no-deps .
echo "setup-python: $VENV takes $(du -sh "$VENV" | cut -f1)"
