// backends.hpp: the backend factories, each defined in its backend's library.
// make_executor picks by BackendOptions::backend and throws UsageError for a backend this build
// lacks.
#pragma once

#include <memory>

#include "collmm/backend_options.hpp"
#include "executor.hpp"

namespace collmm {

std::unique_ptr<Executor> make_cpu_executor(const BackendOptions&, int argc, char** argv);
std::unique_ptr<Executor> make_cuda_executor(const BackendOptions&, int argc, char** argv);
std::unique_ptr<Executor> make_executor(const BackendOptions&, int argc, char** argv);
bool have_cuda_backend();

}  // namespace collmm
