#!/usr/bin/env bash
# clang-check.sh: the second compiler's warnings, as CI sees them. Configures a tree with clang++
# (CLANG_BUILD_DIR, default build-clang; nothing is built) and compiles every C++ translation unit
# of its compile_commands.json with -fsyntax-only and the build's own -Wall -Wextra -Werror: the
# libraries, the tools, the tests and, where VENV's Python imports torch, the PyTorch extension.
# The .cu sources are nvcc's; the main build (g++ as nvcc's host compiler) checks them.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/build-env.sh
dir=${CLANG_BUILD_DIR:-build-clang}
venv_python="$(cd "${VENV:-.venv}" 2>/dev/null && pwd)/bin/python"  # absolute: CMake reads it from its tree
args=(-DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_EXPORT_COMPILE_COMMANDS=ON
      -DCOLLMM_WERROR=ON -DCMAKE_CXX_COMPILER_LAUNCHER=)
if [ -x "$venv_python" ] && "$venv_python" -c "import torch" >/dev/null 2>&1; then
  args+=(-DCOLLMM_PYTHON=ON "-DPython_EXECUTABLE=$venv_python")
else
  echo "clang-check: ${VENV:-.venv} has no torch (scripts/setup-python.sh): the PyTorch extension is not checked"
fi
mkdir -p "$dir"
cmake -S . -B "$dir" "${args[@]}" >"$dir/configure.log" 2>&1 || {
  cat "$dir/configure.log"
  exit 1
}
# One line per translation unit: its directory, then its command with -fsyntax-only in place of -o.
python3 - "$dir/compile_commands.json" >"$dir/syntax-commands.txt" <<'PY'
import json, shlex, sys
for entry in json.load(open(sys.argv[1])):
    if not entry["file"].endswith(".cpp"):
        continue
    argv = shlex.split(entry["command"])
    out = [a for i, a in enumerate(argv) if a != "-o" and (i == 0 or argv[i - 1] != "-o")]
    print(entry["directory"] + "\t" + shlex.join(out + ["-fsyntax-only"]))
PY
count=$(wc -l <"$dir/syntax-commands.txt")
echo "clang-check: $(clang++ --version | head -1): $count translation units, -fsyntax-only -Wall -Wextra -Werror"
failed=0
# shellcheck disable=SC2016
xargs -a "$dir/syntax-commands.txt" -d '\n' -P "$(nproc)" -I{} bash -c \
  'IFS=$'"'"'\t'"'"' read -r d c <<<"$1"; cd "$d" && eval "$c"' _ {} || failed=1
if [ $failed -ne 0 ]; then
  echo "clang-check: FAILED: clang++ found warnings or errors (above)"
  exit 1
fi
echo "clang-check: passed ($count translation units)"
