// The model's element types follow the backend's GEMM library (Profile::gemm.library): on the cpu
// backend a bf16 run's C and gemm_rs's forwarded sums are f32, as OpenBLAS writes them.
#include <gtest/gtest.h>

#include "collmm/sim.hpp"
#include "profile_json.hpp"

namespace collmm {
namespace {

double comm_us(const Profile& prof, Dtype dtype) {
  Problem p;
  p.op = Op::gemm_rs;
  p.m = 1024, p.n = 512, p.k = 256;
  p.world = 4;
  PlanOptions o;
  o.algo = Algo::ring;
  return simulate(p, o, dtype, prof, StepFilter::comm_only, false).time_us;
}

// gemm_rs's ring forwards sums of C's element type: f32 for bf16 inputs on the cpu backend.
TEST(ElementTypes, CpuBf16SumsMoveAsF32) {
  const Profile cpu = builtin_profile("cpu-2core");
  EXPECT_DOUBLE_EQ(comm_us(cpu, Dtype::bf16), comm_us(cpu, Dtype::f32));
}

// cuBLASLt writes bf16 for bf16 inputs: the sums move half the bytes.
TEST(ElementTypes, GpuBf16SumsMoveAsBf16) {
  const Profile gpu = builtin_profile("h200-nvlink");
  EXPECT_LT(comm_us(gpu, Dtype::bf16), comm_us(gpu, Dtype::f32));
}

TEST(ElementTypes, OutputDtypePerLibrary) {
  EXPECT_EQ(output_dtype(GemmLibrary::openblas, Dtype::bf16), Dtype::f32);
  EXPECT_EQ(output_dtype(GemmLibrary::cublaslt, Dtype::bf16), Dtype::bf16);
  EXPECT_EQ(output_dtype(GemmLibrary::cublaslt, Dtype::fp8_e4m3), Dtype::bf16);
  EXPECT_EQ(output_dtype(GemmLibrary::cublaslt, Dtype::tf32), Dtype::f32);
  EXPECT_EQ(output_dtype(GemmLibrary::aten, Dtype::bf16), Dtype::bf16);
  EXPECT_EQ(buffer_dtype(Role::work, Dtype::bf16, Dtype::f32), Dtype::f32);
  EXPECT_EQ(buffer_dtype(Role::gathered, Dtype::bf16, Dtype::f32), Dtype::bf16);
}

TEST(ElementTypes, ProfileJsonKeepsTheLibrary) {
  EXPECT_EQ(profile_from_json(to_json(builtin_profile("cpu-2core"))).gemm.library, GemmLibrary::openblas);
  nlohmann::json j = to_json(builtin_profile("cpu-2core"));
  j["gemm"].erase("library");
  EXPECT_THROW(profile_from_json(j), UsageError);  // absent: refused, never a default
}

}  // namespace
}  // namespace collmm
