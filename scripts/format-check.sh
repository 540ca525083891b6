#!/usr/bin/env bash
# format-check.sh: the project's C++ and CUDA sources against .clang-format (clang-format 14, Debian
# 12's clang-format package; setup-deps.sh installs it). Lists every file that differs and exits 1;
# `scripts/format-check.sh --fix` rewrites them in place instead.
set -euo pipefail
cd "$(dirname "$0")/.."
# One version: another clang-format formats some constructs differently.
CF=${CLANG_FORMAT:-clang-format-14}
command -v "$CF" >/dev/null || { echo "format-check: $CF not found (apt-get install clang-format-14, or CLANG_FORMAT=...)"; exit 1; }
mapfile -t files < <(git ls-files '*.cpp' '*.hpp' '*.cu' '*.h')
if [ "${1:-}" = --fix ]; then
  "$CF" -i "${files[@]}"
  exit 0
fi
bad=()
for f in "${files[@]}"; do
  "$CF" --dry-run --Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done
if [ ${#bad[@]} -gt 0 ]; then
  echo "format-check: ${#bad[@]} of ${#files[@]} files differ from .clang-format (scripts/format-check.sh --fix):"
  printf '  %s\n' "${bad[@]}"
  exit 1
fi
echo "format-check: ${#files[@]} files formatted"
