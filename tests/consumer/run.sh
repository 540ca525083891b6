#!/usr/bin/env bash
# run.sh BUILD_DIR WORK_DIR MPIEXEC...: installs BUILD_DIR (cmake --install) into WORK_DIR/prefix,
# configures and builds tests/consumer against it (find_package(collmm), collmm::collmm), runs the
# consumer as one MPI rank, and checks the installed tools and that no installed header includes
# mpi.h. Exits non-zero on any failure.
set -euo pipefail
build=$1 work=$2
shift 2
src=$(cd "$(dirname "$0")" && pwd)
rm -rf "$work"
mkdir -p "$work"
prefix=$work/prefix
cmake --install "$build" --prefix "$prefix" > "$work/install.log"
for f in bin/collmm-bench bin/collmm-sim include/collmm/collmm.hpp; do
  [ -e "$prefix/$f" ] || { echo "run.sh: $f not installed"; exit 1; }
done
if grep -rlE '#include[[:space:]]*[<"]mpi\.h[>"]' "$prefix/include"; then
  echo "run.sh: an installed header includes mpi.h"
  exit 1
fi
ls "$prefix"/lib*/cmake/collmm/collmmConfig.cmake
"$prefix/bin/collmm-sim" --help > /dev/null
"$prefix/bin/collmm-bench" --help > /dev/null
cmake -S "$src" -B "$work/build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix"
cmake --build "$work/build"
"$@" "$work/build/consumer"
