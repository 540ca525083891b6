// backend_options.cpp: the names of the backend settings' enums (collmm/backend_options.hpp).
#include "collmm/backend_options.hpp"

#include "enum_names.hpp"

namespace collmm {
namespace {

const EnumNames<Backend> kBackends{{{Backend::cpu, "cpu"}, {Backend::cuda, "cuda"}}};
const EnumNames<CudaTransport> kTransports{
    {{CudaTransport::nccl, "nccl"}, {CudaTransport::local, "local"}, {CudaTransport::host, "host"}}};
const EnumNames<LinkCopy> kLinkCopies{{{LinkCopy::engine, "engine"}, {LinkCopy::sm, "sm"}}};
const EnumNames<GemmAlgo> kGemmAlgos{{{GemmAlgo::heuristic, "heuristic"}, {GemmAlgo::timed, "timed"}}};

}  // namespace

std::string to_string(Backend v) { return kBackends.name(v); }
std::string to_string(CudaTransport v) { return kTransports.name(v); }
std::string to_string(LinkCopy v) { return kLinkCopies.name(v); }
std::string to_string(GemmAlgo v) { return kGemmAlgos.name(v); }
Backend parse_backend(const std::string& s) { return kBackends.parse(s, "backend"); }
CudaTransport parse_cuda_transport(const std::string& s) { return kTransports.parse(s, "transport"); }
LinkCopy parse_link_copy(const std::string& s) { return kLinkCopies.parse(s, "link copy"); }
GemmAlgo parse_gemm_algo(const std::string& s) { return kGemmAlgos.parse(s, "GEMM algorithm choice"); }

}  // namespace collmm
