// npy.hpp: writes a row-major matrix as a NumPy .npy file (format version 1.0), so results can be
// checked with numpy.load or any other tool that reads the format.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "collmm/types.hpp"

namespace collmm {

// The .npy header for a C-order matrix: magic, version 1.0, length, and the dict padded with spaces
// to a multiple of 64 bytes. descr is NumPy's type string, e.g. "<f4".
std::string npy_header(const std::string& descr, int64_t rows, int64_t cols);

// Writes `bytes` (rows * cols elements of `dtype`) to `path`. f64, f32, tf32 (stored as f32) and
// f16 are written as they are ('<f8', '<f4', '<f2'); bf16 and fp8 have no NumPy type and are
// decoded and written as '<f4'. Throws std::runtime_error naming the path on failure.
void write_npy(const std::string& path, Dtype dtype, int64_t rows, int64_t cols,
               const std::vector<unsigned char>& bytes);

}  // namespace collmm
