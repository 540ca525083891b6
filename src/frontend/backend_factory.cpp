// backend_factory.cpp: make_executor (backend by name). COLLMM_HAVE_CUDA is defined when CMake
// found nvcc and NCCL and built collmm_cuda; then collmm_cuda defines have_cuda_backend() (true),
// else this file does (false).
#include "collmm/executor.hpp"

namespace collmm {

#ifndef COLLMM_HAVE_CUDA
bool have_cuda_backend() { return false; }
#endif

std::unique_ptr<Executor> make_executor(const BackendOptions& opts, int argc, char** argv) {
  if (opts.backend == "cpu") return make_cpu_executor(opts, argc, argv);
  if (opts.backend == "cuda") {
#ifdef COLLMM_HAVE_CUDA
    return make_cuda_executor(opts, argc, argv);
#else
    throw UsageError("this build has no CUDA backend (nvcc/NCCL not found at configure time)");
#endif
  }
  throw UsageError("unknown backend '" + opts.backend + "' (expected one of: cpu cuda)");
}

}  // namespace collmm
