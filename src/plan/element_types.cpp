// element_types.cpp: the element type of each buffer role and of a GEMM library's output
// (collmm/element_types.hpp).
#include "collmm/element_types.hpp"

namespace collmm {

std::string to_string(GemmLibrary l) {
  switch (l) {
    case GemmLibrary::openblas: return "openblas";
    case GemmLibrary::cublaslt: return "cublaslt";
    case GemmLibrary::aten: return "aten";
  }
  return "?";
}

GemmLibrary parse_gemm_library(const std::string& s) {
  for (GemmLibrary l : {GemmLibrary::openblas, GemmLibrary::cublaslt, GemmLibrary::aten})
    if (s == to_string(l)) return l;
  throw UsageError("unknown GEMM library '" + s + "' (expected openblas, cublaslt or aten)");
}

Dtype output_dtype(GemmLibrary library, Dtype in) {
  switch (library) {
    case GemmLibrary::openblas: return in == Dtype::bf16 ? Dtype::f32 : in;
    case GemmLibrary::cublaslt:
      if (in == Dtype::fp8_e4m3) return Dtype::bf16;
      if (in == Dtype::tf32) return Dtype::f32;
      return in;
    case GemmLibrary::aten: return in;
  }
  return in;
}

Dtype buffer_dtype(Role role, Dtype in, Dtype out) { return role == Role::c || role == Role::work ? out : in; }

}  // namespace collmm
