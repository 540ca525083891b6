# build-env.sh: sourced by demo.sh and test.sh: the build directory, nvcc on PATH when the CUDA
# toolkit is in /usr/local/cuda (so that CMake finds it and builds the CUDA backend), and the
# configure + build step.
BUILD_DIR=${BUILD_DIR:-build}
if [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH=/usr/local/cuda/bin:$PATH
fi

# COLLMM_CONFIGURE_ARGS: extra cmake arguments (test.sh passes -DCOLLMM_WERROR=ON).
configure_and_build() {  # configure_and_build [targets...]
  # shellcheck disable=SC2086
  cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release ${COLLMM_CONFIGURE_ARGS:-}
  local targets=()
  for t in "$@"; do targets+=(--target "$t"); done
  cmake --build "$BUILD_DIR" -j"$(nproc)" "${targets[@]}"
}

# mpirun as root needs --allow-run-as-root (CI and containers run as root).
mpirun_cmd() {
  # --timeout: Open MPI ends the whole job after that many seconds (a rank stopped after its peers
  # exited can be ended only by the launcher).
  local cmd=(mpirun --oversubscribe --bind-to none --timeout "${COLLMM_JOB_TIMEOUT:-3600}")
  [ "$(id -u)" -eq 0 ] && cmd+=(--allow-run-as-root)
  echo "${cmd[@]}"
}

# ctest_skip_reasons [build dir]: ctest lists a skipped test without its reason. This prints, for
# each test its last run skipped, the reasons its output gave (GoogleTest's GTEST_SKIP messages).
ctest_skip_reasons() {
  local log="${1:-$BUILD_DIR}/Testing/Temporary/LastTest.log"
  [ -f "$log" ] || return 0
  awk '
    /^[0-9]+\/[0-9]+ Testing: / { name = $3; why = ""; next }
    /: Skipped$/ { getline r; if (index(why, r) == 0) why = why (why == "" ? "" : "; ") r; next }
    /^Skip regular expression found in output/ { print "ctest: " name " skipped: " (why == "" ? "(no reason printed)" : why) }
  ' "$log"
}
