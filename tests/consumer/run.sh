#!/usr/bin/env bash
# run.sh BUILD_DIR WORK_DIR HEADERS MPIEXEC...: installs BUILD_DIR (cmake --install) into
# WORK_DIR/prefix, configures and builds tests/consumer against it (find_package(collmm),
# collmm::collmm), runs the consumer as one MPI rank, and checks the installed tools. HEADERS (one
# argument, names separated by spaces) is the API's header list (collmm_public_headers, the
# top-level CMakeLists.txt): the installed include/collmm and the source tree's must hold exactly
# these, and the installed headers may include only each other (no internal header, no mpi.h).
# Exits non-zero on any failure.
set -euo pipefail
build=$1 work=$2 headers=$3
shift 3
src=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$src/../.." && pwd)
rm -rf "$work"
mkdir -p "$work"
prefix=$work/prefix
cmake --install "$build" --prefix "$prefix" > "$work/install.log"
for f in bin/collmm-bench bin/collmm-sim include/collmm/collmm.hpp; do
  [ -e "$prefix/$f" ] || { echo "run.sh: $f not installed"; exit 1; }
done
# shellcheck disable=SC2086  # one name a word
want=$(printf '%s\n' $headers | sort)
# The headers of a folder, one name a line, sorted.
list_headers() { find "$1" -maxdepth 1 -type f -printf '%f\n' | sort; }
if [ "$(list_headers "$prefix/include/collmm")" != "$want" ]; then
  echo "run.sh: the installed include/collmm is not the API's header list (< installed, > the list):"
  diff <(list_headers "$prefix/include/collmm") <(echo "$want") || true
  exit 1
fi
if [ "$(list_headers "$root/include/collmm")" != "$want" ]; then
  echo "run.sh: include/collmm holds other headers than the API's list (collmm_public_headers, the"
  echo "top-level CMakeLists.txt); an internal header belongs in src/ (< include/collmm, > the list):"
  diff <(list_headers "$root/include/collmm") <(echo "$want") || true
  exit 1
fi
# Each quoted include of an installed header must name an installed header; angle-bracket ones
# are the standard library's, CUDA's and NCCL's (device_matmul.hpp), never mpi.h.
bad=0
for h in "$prefix"/include/collmm/*; do
  while read -r inc; do
    if [ ! -f "$prefix/include/$inc" ]; then
      echo "run.sh: installed ${h#"$prefix"/} includes \"$inc\", which is not installed"
      bad=1
    fi
  done < <(sed -nE 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"([^"]*)".*/\1/p' "$h")
done
if grep -rlE '#include[[:space:]]*[<"]mpi\.h[>"]' "$prefix/include"; then
  echo "run.sh: an installed header includes mpi.h"
  bad=1
fi
[ "$bad" = 0 ] || exit 1
ls "$prefix"/lib*/cmake/collmm/collmmConfig.cmake
"$prefix/bin/collmm-sim" --help > /dev/null
"$prefix/bin/collmm-bench" --help > /dev/null
cmake -S "$src" -B "$work/build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix"
cmake --build "$work/build"
"$@" "$work/build/consumer"
