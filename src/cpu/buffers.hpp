// buffers.hpp: the host memory of one rank's plan: every buffer of the plan, 64-byte aligned, with
// the element type its role gives it (input dtype for A, B and the gathered A; output dtype for C
// and work buffers), and the pointer arithmetic from a plan Slice to bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <vector>

#include "collmm/plan.hpp"

namespace collmm::cpu {

struct HostBuffer {
  Role role = Role::a;
  Dtype dtype = Dtype::f32;
  int64_t rows = 0, cols = 0;
  std::unique_ptr<unsigned char, void (*)(void*)> data{nullptr, std::free};

  size_t elem_bytes() const { return dtype_size(dtype); }
  size_t row_bytes() const { return static_cast<size_t>(cols) * elem_bytes(); }
  size_t bytes() const { return static_cast<size_t>(rows) * row_bytes(); }
};

class PlanBuffers {
 public:
  PlanBuffers() = default;
  // Allocates every buffer of `plan`: input dtype `in` for a/b/gathered, `out` for c/work.
  PlanBuffers(const Plan& plan, Dtype in, Dtype out);

  int count() const { return static_cast<int>(buffers_.size()); }
  HostBuffer& at(int buf);
  // The first byte of a slice; throws std::runtime_error if it leaves its buffer (a plan bug).
  unsigned char* ptr(const Slice& s);
  // C, gathered and work buffers filled with NaN of their element type.
  void poison();

 private:
  std::vector<HostBuffer> buffers_;
};

}  // namespace collmm::cpu
