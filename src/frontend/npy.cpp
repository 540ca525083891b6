// npy.cpp: the NumPy .npy v1.0 writer (header by hand: the format is a 10-byte preamble and a
// Python dict literal, https://numpy.org/doc/stable/reference/generated/numpy.lib.format.html).
#include "npy.hpp"

#include <cstring>
#include <fstream>
#include <stdexcept>

#include "atomic_file.hpp"
#include "data.hpp"
#include "quote.hpp"

namespace collmm {

std::string npy_header(const std::string& descr, int64_t rows, int64_t cols) {
  std::string dict = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': (" + std::to_string(rows) + ", " +
                     std::to_string(cols) + "), }";
  const size_t preamble = 10;                 // magic (6) + version (2) + header length (2)
  size_t total = preamble + dict.size() + 1;  // + '\n'
  dict.append((64 - total % 64) % 64, ' ');
  dict += '\n';
  const uint16_t len = static_cast<uint16_t>(dict.size());
  std::string h = "\x93NUMPY";
  h += static_cast<char>(1);
  h += static_cast<char>(0);
  h += static_cast<char>(len & 0xff);
  h += static_cast<char>(len >> 8);
  return h + dict;
}

void write_npy(const std::string& path, Dtype dtype, int64_t rows, int64_t cols,
               const std::vector<unsigned char>& bytes) {
  const size_t count = static_cast<size_t>(rows * cols);
  if (bytes.size() != count * dtype_size(dtype))
    throw std::runtime_error("write_npy " + quote(path) + ": " + std::to_string(bytes.size()) + " bytes do not hold " +
                             std::to_string(count) + " elements of " + to_string(dtype));
  std::string descr;
  std::vector<unsigned char> body;
  switch (dtype) {
    case Dtype::f64: descr = "<f8", body = bytes; break;
    case Dtype::f32:
    case Dtype::tf32: descr = "<f4", body = bytes; break;
    case Dtype::f16: descr = "<f2", body = bytes; break;
    case Dtype::bf16:
    case Dtype::fp8_e4m3: {
      descr = "<f4";
      const std::vector<double> v = decode(bytes.data(), count, dtype);
      body.resize(count * sizeof(float));
      for (size_t i = 0; i < count; ++i) {
        const float f = static_cast<float>(v[i]);
        std::memcpy(body.data() + i * sizeof(float), &f, sizeof(float));
      }
      break;
    }
  }
  const std::string header = npy_header(descr, rows, cols);
  write_file_atomically(path, {header, std::string_view(reinterpret_cast<const char*>(body.data()), body.size())});
}

}  // namespace collmm
