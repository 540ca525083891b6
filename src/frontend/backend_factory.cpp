// backend_factory.cpp: make_executor (the backend BackendOptions names). COLLMM_HAVE_CUDA is defined when CMake
// found nvcc and NCCL and built collmm_cuda; then collmm_cuda defines have_cuda_backend() (true),
// else this file does (false).
#include "backends.hpp"

namespace collmm {

#ifndef COLLMM_HAVE_CUDA
bool have_cuda_backend() { return false; }
#endif

std::unique_ptr<Executor> make_executor(const BackendOptions& opts, int argc, char** argv) {
  switch (opts.backend) {
    case Backend::cpu: return make_cpu_executor(opts, argc, argv);
    case Backend::cuda:
#ifdef COLLMM_HAVE_CUDA
      return make_cuda_executor(opts, argc, argv);
#else
      throw UsageError("this build has no CUDA backend (nvcc/NCCL not found at configure time)");
#endif
  }
  throw UsageError("unknown backend " + std::to_string(static_cast<int>(opts.backend)));
}

}  // namespace collmm
