#!/usr/bin/env bash
# clang-check.sh: the second compiler's warnings, as CI sees them. Configures a tree with clang++
# (CLANG_BUILD_DIR, default build-clang; nothing is built) and compiles every C++ translation unit
# of its compile_commands.json with -fsyntax-only and the build's own -Wall -Wextra -Werror: the
# libraries, the tools, the tests and, where VENV's Python imports torch, the PyTorch extension,
# whose units then go through g++ too (the main build, g++ with -Werror, does not build it).
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
# The extension's units again with g++: the main build (g++, -Werror) leaves the extension out.
grep -F "/python/csrc/" "$dir/syntax-commands.txt" | sed 's|\t[^ ]*clang++ |\tg++ |' >"$dir/syntax-commands-gxx.txt" || true
count=$(wc -l <"$dir/syntax-commands.txt")
gxx=$(wc -l <"$dir/syntax-commands-gxx.txt")
echo "clang-check: $(clang++ --version | head -1): $count translation units, -fsyntax-only -Wall -Wextra -Werror;" \
  "then $gxx of the extension with $(g++ --version | head -1)"
failed=0
for list in "$dir/syntax-commands.txt" "$dir/syntax-commands-gxx.txt"; do
  # shellcheck disable=SC2016
  xargs -a "$list" -d '\n' -r -P "$(nproc)" -I{} bash -c \
    'IFS=$'"'"'\t'"'"' read -r d c <<<"$1"; cd "$d" && eval "$c"' _ {} || failed=1
done
if [ $failed -ne 0 ]; then
  echo "clang-check: FAILED: the compilers found warnings or errors (above)"
  exit 1
fi
echo "clang-check: passed ($count translation units with clang++, $gxx with g++)"
