// test_data.cpp: the data module: encodings round-trip, inputs are non-zero and exact in their
// dtype, shards tile the global matrices, the reference matches a naive GEMM, compare catches NaN.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "data.hpp"

using namespace collmm;

TEST(Codec, RoundTripsExactValues) {
  for (Dtype d : {Dtype::f64, Dtype::f32, Dtype::f16, Dtype::bf16, Dtype::fp8_e4m3}) {
    std::vector<double> v;
    for (int i = 0; i < 200; ++i) v.push_back(input_value(7, 0, i, 3, d));
    const auto bytes = encode(v, d);
    ASSERT_EQ(bytes.size(), v.size() * dtype_size(d));
    const auto back = decode(bytes.data(), v.size(), d);
    for (size_t i = 0; i < v.size(); ++i) EXPECT_EQ(back[i], v[i]) << to_string(d) << " at " << i;
  }
}

TEST(Codec, KnownBitPatterns) {
  EXPECT_EQ(round_to(Dtype::bf16, 1.0 + 1.0 / 256), 1.0);  // ties to even
  EXPECT_EQ(round_to(Dtype::bf16, 1.0 + 3.0 / 256), 1.0 + 4.0 / 256);
  EXPECT_EQ(round_to(Dtype::f16, 1.0 + 1.0 / 4096), 1.0);
  EXPECT_EQ(round_to(Dtype::fp8_e4m3, 0.3), 0.3125);                               // 1.25 * 2^-2
  EXPECT_EQ(round_to(Dtype::fp8_e4m3, 1000.0), 448.0);                             // saturates
  EXPECT_EQ(round_to(Dtype::fp8_e4m3, std::ldexp(3.0, -9)), std::ldexp(3.0, -9));  // subnormal
  const auto b = encode({1.0}, Dtype::fp8_e4m3);
  EXPECT_EQ(b[0], 0x38);
  EXPECT_TRUE(std::isnan(decode("\x7f", 1, Dtype::fp8_e4m3)[0]));
}

// f16 is encoded in software (clang 14 has no _Float16 on x86): every code decodes and encodes
// back, halfway values go to the even neighbour, and past 65504 + half a step is infinity.
TEST(Codec, F16EveryCodeAndEveryHalfway) {
  for (uint32_t code = 0; code < 0x7c00; ++code) {
    for (uint16_t sign : {0, 0x8000}) {
      const uint16_t h = static_cast<uint16_t>(code | sign);
      const double v = decode(&h, 1, Dtype::f16)[0];
      const auto bytes = encode({v}, Dtype::f16);
      uint16_t back;
      std::memcpy(&back, bytes.data(), 2);
      ASSERT_EQ(back, h) << v;
    }
    const uint16_t down = static_cast<uint16_t>(code), up = static_cast<uint16_t>(code + 1);
    const double lo = decode(&down, 1, Dtype::f16)[0], hi = decode(&up, 1, Dtype::f16)[0];
    const double even = (code & 1) ? hi : lo;
    ASSERT_EQ(round_to(Dtype::f16, (lo + hi) / 2), even) << lo;
    ASSERT_EQ(round_to(Dtype::f16, -(lo + hi) / 2), -even) << lo;
  }
  EXPECT_EQ(round_to(Dtype::f16, 65519.0), 65504.0);
  EXPECT_TRUE(std::isinf(round_to(Dtype::f16, 65520.0)));
  EXPECT_TRUE(std::isnan(round_to(Dtype::f16, NAN)));
  EXPECT_EQ(round_to(Dtype::f16, std::ldexp(1.0, -25)), 0.0);                   // halfway to the least: even
  EXPECT_EQ(round_to(Dtype::f16, std::ldexp(1.5, -25)), std::ldexp(1.0, -24));  // above halfway
}

TEST(Data, InputsAreNonZeroAndBounded) {
  for (int i = 0; i < 1000; ++i) {
    const double v = input_value(1, 1, i, i * 7, Dtype::f64);
    EXPECT_GE(std::fabs(v), 0.1);
    EXPECT_LE(std::fabs(v), 1.0);
  }
  EXPECT_NE(input_value(1, 0, 2, 3, Dtype::f64), input_value(2, 0, 2, 3, Dtype::f64));
}

TEST(Data, ShardsTileTheGlobalMatrices) {
  for (Op op : all_ops())
    for (BLayout lay : {BLayout::kn, BLayout::nk}) {
      Problem p{.op = op, .m = 7, .n = 5, .k = 6, .world = 3, .b_layout = lay};
      const HostMatrix ga = make_global_a(p, 9, Dtype::f32);
      for (int r = 0; r < 3; ++r) {
        const HostMatrix a = make_local_a(p, r, 9, Dtype::f32);
        const HostMatrix b = make_local_b(p, r, 9, Dtype::f32);
        const LocalShape s = local_shape(p, r);
        ASSERT_EQ(a.rows, s.a_rows);
        ASSERT_EQ(b.rows, s.b_rows);
        for (int64_t i = 0; i < a.rows; ++i)
          for (int64_t j = 0; j < a.cols; ++j) {
            const int64_t gi = op == Op::ag_gemm ? block_offset(7, 3, r) + i : i;
            const int64_t gj = sums_over_ranks(op) ? block_offset(6, 3, r) + j : j;
            EXPECT_EQ(a.at(i, j), ga.at(gi, gj));
          }
      }
    }
}

TEST(Data, ReferenceMatchesNaiveSumOfRankProducts) {
  // gemm_rs: C_r = rows block r of sum_q A_q @ B_q, built here from the local shards alone; gemm_ar:
  // all its rows on every rank.
  for (Op op : {Op::gemm_rs, Op::gemm_ar}) {
    Problem p{.op = op, .m = 5, .n = 4, .k = 7, .world = 3, .b_layout = BLayout::nk};
    for (int r = 0; r < 3; ++r) {
      const HostMatrix ref = reference_c(p, r, 3, Dtype::bf16);
      ASSERT_EQ(ref.rows, op == Op::gemm_ar ? 5 : block_size(5, 3, r));
      const int64_t row0 = op == Op::gemm_ar ? 0 : block_offset(5, 3, r);
      for (int64_t i = 0; i < ref.rows; ++i)
        for (int64_t j = 0; j < ref.cols; ++j) {
          double sum = 0;
          for (int q = 0; q < 3; ++q) {
            const HostMatrix a = make_local_a(p, q, 3, Dtype::bf16), b = make_local_b(p, q, 3, Dtype::bf16);
            for (int64_t kk = 0; kk < a.cols; ++kk) sum += a.at(row0 + i, kk) * b.at(j, kk);
          }
          EXPECT_NEAR(ref.at(i, j), sum, 1e-12);
        }
    }
  }
}

TEST(Data, CompareCountsWrongAndUnwritten) {
  Problem p{.op = Op::ag_gemm, .m = 4, .n = 4, .k = 4, .world = 1, .b_layout = BLayout::kn};
  const HostMatrix want = reference_c(p, 0, 1, Dtype::f32);
  std::vector<double> got = want.v;
  EXPECT_EQ(compare(got, want, Dtype::f32, Dtype::f32, 4).wrong, 0);
  got[3] = NAN;
  got[5] += 0.5;
  const Comparison c = compare(got, want, Dtype::f32, Dtype::f32, 4);
  EXPECT_EQ(c.wrong, 2);
  EXPECT_TRUE(std::isinf(c.max_rel_err));
  got.pop_back();
  EXPECT_EQ(compare(got, want, Dtype::f32, Dtype::f32, 4).wrong, 3);
}
