# gpu-env.sh: sourced by the GPU machine's scripts (gpu-check, gpu-host-bed): multicast off, the
# venv's cmake/ninja/python on PATH, NCCL found (beside CUDA, or inside the PyTorch venv, whose lib
# holds only libnccl.so.2), and gpu_build TARGETS... (configure + build into $BUILD, log in $1).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PATH=/opt/torch/.venv/bin:/usr/local/cuda/bin:$PATH
NCCL_ROOT=${COLLMM_NCCL_ROOT:-}
for d in /opt/torch/.venv/lib/python3.12/site-packages/nvidia/nccl /usr/local/cuda; do
  [ -z "$NCCL_ROOT" ] && [ -f "$d/include/nccl.h" ] && NCCL_ROOT=$d
done
NCCL_LIB=$(ls "$NCCL_ROOT"/lib/libnccl.so "$NCCL_ROOT"/lib/libnccl.so.2 "$NCCL_ROOT"/lib64/libnccl.so 2>/dev/null | head -1)
export LD_LIBRARY_PATH=$(dirname "${NCCL_LIB:-/x/y}"):${LD_LIBRARY_PATH:-}

gpu_build() {  # gpu_build LOG TARGET...
  local log=$1
  shift
  local targets=()
  for t in "$@"; do targets+=(--target "$t"); done
  # Warnings as errors stay a CI matter: another compiler (gcc 13 there) must not stop a measurement.
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCOLLMM_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DCOLLMM_WERROR=OFF \
    -DNCCL_INCLUDE_DIR="$NCCL_ROOT/include" -DNCCL_LIBRARY="$NCCL_LIB" >"$log" 2>&1 &&
    cmake --build "$BUILD" -j "$(nproc)" "${targets[@]}" >>"$log" 2>&1
}
