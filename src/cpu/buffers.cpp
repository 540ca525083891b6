// buffers.cpp: allocation, slice pointers and NaN poisoning of a plan's host buffers.
#include "buffers.hpp"

#include <algorithm>
#include <cstring>
#include <limits>
#include <sstream>
#include <stdexcept>

#include "collmm/element_types.hpp"

namespace collmm::cpu {
namespace {

constexpr size_t kAlign = 64;

void fill_nan(HostBuffer& b) {
  const size_t n = static_cast<size_t>(b.rows * b.cols);
  unsigned char* base = b.base();
  switch (b.dtype) {
    case Dtype::f64: {
      auto* p = reinterpret_cast<double*>(base);
      for (size_t i = 0; i < n; ++i) p[i] = std::numeric_limits<double>::quiet_NaN();
      break;
    }
    case Dtype::f32: {
      auto* p = reinterpret_cast<float*>(base);
      for (size_t i = 0; i < n; ++i) p[i] = std::numeric_limits<float>::quiet_NaN();
      break;
    }
    case Dtype::bf16: {  // sign 0, exponent all ones, top mantissa bit: the quiet NaN 0x7fc0
      auto* p = reinterpret_cast<uint16_t*>(base);
      for (size_t i = 0; i < n; ++i) p[i] = 0x7fc0;
      break;
    }
    default: throw std::runtime_error("cpu backend: no NaN pattern for " + to_string(b.dtype) + " buffers");
  }
}

}  // namespace

PlanBuffers::PlanBuffers(const Plan& plan, Dtype in, Dtype out) {
  for (const BufferSpec& spec : plan.buffers) {
    HostBuffer b;
    b.role = spec.role;
    b.dtype = buffer_dtype(spec.role, in, out);
    b.rows = spec.rows;
    b.cols = spec.cols;
    buffers_.push_back(std::move(b));
  }
}

void PlanBuffers::back(HostBuffer& b) {
  if (b.bound || b.data) return;
  // aligned_alloc wants a size that is a multiple of the alignment (and non-zero).
  const size_t size = std::max(kAlign, (b.bytes() + kAlign - 1) / kAlign * kAlign);
  b.data.reset(static_cast<unsigned char*>(std::aligned_alloc(kAlign, size)));
  if (!b.data) {
    std::ostringstream msg;
    msg << "cpu backend: cannot allocate " << size << " bytes for " << to_string(b.role) << " [" << b.rows << ", "
        << b.cols << "]";
    throw std::runtime_error(msg.str());
  }
  std::memset(b.data.get(), 0, size);
}

void PlanBuffers::back_all() {
  for (HostBuffer& b : buffers_) back(b);
}

HostBuffer& PlanBuffers::backed(int buf) {
  HostBuffer& b = at(buf);
  back(b);
  return b;
}

HostBuffer& PlanBuffers::at(int buf) {
  if (buf < 0 || buf >= count())
    throw std::runtime_error("cpu backend: buffer " + std::to_string(buf) + " does not exist (plan has " +
                             std::to_string(count()) + ")");
  return buffers_[static_cast<size_t>(buf)];
}

unsigned char* PlanBuffers::ptr(const Slice& s) {
  HostBuffer& b = at(s.buf);
  if (s.row < 0 || s.rows < 0 || s.row + s.rows > b.rows) {
    std::ostringstream msg;
    msg << "cpu backend: rows [" << s.row << ", " << s.row + s.rows << ") outside buffer " << s.buf << " ("
        << to_string(b.role) << ", " << b.rows << " rows)";
    throw std::runtime_error(msg.str());
  }
  if (!b.base()) throw std::runtime_error("cpu backend: buffer " + std::to_string(s.buf) + " has no memory yet");
  return b.base() + static_cast<size_t>(s.row) * b.row_bytes();
}

void PlanBuffers::bind(int buf, void* data, size_t nbytes) {
  HostBuffer& b = at(buf);
  if (data && nbytes != b.bytes())
    throw UsageError("cpu backend: buffer " + std::to_string(buf) + " (" + to_string(b.role) + ", [" +
                     std::to_string(b.rows) + ", " + std::to_string(b.cols) + "]) holds " + std::to_string(b.bytes()) +
                     " bytes; the memory bound to it has " + std::to_string(nbytes));
  b.bound = static_cast<unsigned char*>(data);
}

void PlanBuffers::poison() {
  back_all();
  for (HostBuffer& b : buffers_)
    if (written_by_run(b.role)) fill_nan(b);
}

}  // namespace collmm::cpu
