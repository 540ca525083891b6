// dtype_codec.cpp: element encoding between doubles and each Dtype's bytes (f64, f32, tf32 stored
// as f32, f16, bf16, fp8 e4m3), with round-to-nearest-even.
#include <cmath>
#include <cstring>
#include <stdexcept>

#include "data.hpp"

namespace collmm {
namespace {

uint16_t f32_to_bf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if (std::isnan(f)) return 0x7fc0;
  x += 0x7fff + ((x >> 16) & 1);  // round to nearest even
  return static_cast<uint16_t>(x >> 16);
}
float bf16_to_f32(uint16_t h) {
  uint32_t x = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

// f16 in software: clang 14 has no _Float16 on x86, and its __fp16 needs compiler-rt's helpers.
// Round to nearest even; 65520 and above (halfway past 65504) become infinity.
uint16_t f32_to_f16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000);
  if (std::isnan(f)) return sign | 0x7e00;
  const float a = std::fabs(f);
  if (a >= 65520.0f) return sign | 0x7c00;
  if (a < 0x1p-14f) return sign | static_cast<uint16_t>(std::nearbyint(a * 0x1p24f));  // subnormal: steps of 2^-24
  int e;
  std::frexp(a, &e);  // a = m 2^e, m in [0.5, 1): the f16 exponent is e - 1
  const uint32_t q = static_cast<uint32_t>(std::nearbyint(std::ldexp(a, 11 - e)));          // 1024..2048, ties to even
  return sign | static_cast<uint16_t>((static_cast<uint32_t>(e + 14) << 10) + (q - 1024));  // 2048 carries
}
float f16_to_f32(uint16_t b) {
  const int exp = (b >> 10) & 0x1f, man = b & 0x3ff;
  float mag;
  if (exp == 0x1f)
    mag = man ? NAN : INFINITY;
  else if (exp == 0)
    mag = std::ldexp(static_cast<float>(man), -24);
  else
    mag = std::ldexp(static_cast<float>(man | 0x400), exp - 25);
  return (b & 0x8000) ? -mag : mag;
}

// fp8 e4m3 (OCP "E4M3FN"): 1 sign, 4 exponent (bias 7), 3 mantissa bits; no infinities,
// S.1111.111 is NaN; largest finite 448.
double e4m3_value(uint8_t b) {
  const int sign = b >> 7, exp = (b >> 3) & 0xf, man = b & 7;
  if (exp == 0xf && man == 7) return NAN;
  const double mag = exp == 0 ? std::ldexp(man / 8.0, -6) : std::ldexp(1.0 + man / 8.0, exp - 7);
  return sign ? -mag : mag;
}
uint8_t to_e4m3(double v) {
  if (std::isnan(v)) return 0x7f;
  const uint8_t sign = v < 0 ? 0x80 : 0;
  const double a = std::fabs(v);
  if (a >= 464) return sign | 0x7e;  // saturate to 448 (464 is halfway to the next step)
  int e = static_cast<int>(std::floor(std::log2(a)));
  if (a == 0 || e < -6) return sign | static_cast<uint8_t>(std::nearbyint(a * 512));  // subnormal: steps of 2^-9
  int q = static_cast<int>(std::nearbyint((std::ldexp(a, -e) - 1) * 8));              // ties to even
  if (q == 8) q = 0, ++e;
  const int code = ((e + 7) << 3) | q;
  return sign | static_cast<uint8_t>(code >= 0x7f ? 0x7e : code);
}

}  // namespace

double round_to(Dtype d, double v) {
  switch (d) {
    case Dtype::f64: return v;
    case Dtype::f32:
    case Dtype::tf32: return static_cast<float>(v);
    case Dtype::f16: return f16_to_f32(f32_to_f16(static_cast<float>(v)));
    case Dtype::bf16: return bf16_to_f32(f32_to_bf16(static_cast<float>(v)));
    case Dtype::fp8_e4m3: return e4m3_value(to_e4m3(v));
  }
  return v;
}

std::vector<unsigned char> encode(const std::vector<double>& v, Dtype d) {
  std::vector<unsigned char> out(v.size() * dtype_size(d));
  unsigned char* p = out.data();
  for (size_t i = 0; i < v.size(); ++i) {
    switch (d) {
      case Dtype::f64: std::memcpy(p + 8 * i, &v[i], 8); break;
      case Dtype::f32:
      case Dtype::tf32: {
        const float f = static_cast<float>(v[i]);
        std::memcpy(p + 4 * i, &f, 4);
        break;
      }
      case Dtype::f16: {
        const uint16_t h = f32_to_f16(static_cast<float>(v[i]));
        std::memcpy(p + 2 * i, &h, 2);
        break;
      }
      case Dtype::bf16: {
        const uint16_t h = f32_to_bf16(static_cast<float>(v[i]));
        std::memcpy(p + 2 * i, &h, 2);
        break;
      }
      case Dtype::fp8_e4m3: p[i] = to_e4m3(v[i]); break;
    }
  }
  return out;
}

std::vector<double> decode(const void* bytes, size_t count, Dtype d) {
  std::vector<double> out(count);
  const unsigned char* p = static_cast<const unsigned char*>(bytes);
  for (size_t i = 0; i < count; ++i) {
    switch (d) {
      case Dtype::f64: std::memcpy(&out[i], p + 8 * i, 8); break;
      case Dtype::f32:
      case Dtype::tf32: {
        float f;
        std::memcpy(&f, p + 4 * i, 4);
        out[i] = f;
        break;
      }
      case Dtype::f16:
      case Dtype::bf16: {
        uint16_t h;
        std::memcpy(&h, p + 2 * i, 2);
        out[i] = d == Dtype::f16 ? f16_to_f32(h) : bf16_to_f32(h);
        break;
      }
      case Dtype::fp8_e4m3: out[i] = e4m3_value(p[i]); break;
    }
  }
  return out;
}

}  // namespace collmm
