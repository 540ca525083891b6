// buffers.hpp: the host memory of one rank's plan. Every buffer of the plan, 64-byte aligned, has
// the element type its role gives it (input dtype for A, B and the gathered A; output dtype for C
// and work buffers). Here too: the pointer arithmetic from a plan Slice to bytes. A buffer may be
// bound to memory the caller owns (Executor::bind): then every step reads and writes that memory.
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
  std::unique_ptr<unsigned char, void (*)(void*)> data{nullptr, std::free};  // our own memory
  unsigned char* bound = nullptr;  // the caller's memory, when bound; used instead of `data`

  unsigned char* base() const { return bound ? bound : data.get(); }

  size_t elem_bytes() const { return dtype_size(dtype); }
  size_t row_bytes() const { return static_cast<size_t>(cols) * elem_bytes(); }
  size_t bytes() const { return static_cast<size_t>(rows) * row_bytes(); }
};

class PlanBuffers {
 public:
  PlanBuffers() = default;
  // The buffers of `plan`: input dtype `in` for a/b/gathered, `out` for c/work. Memory is
  // allocated (zeroed) by backed()/back_all() for buffers not bound to the caller's memory, so a
  // buffer that is always bound never has memory of its own. Call those from one thread only.
  PlanBuffers(const Plan& plan, Dtype in, Dtype out);
  HostBuffer& backed(int buf);  // at(buf), with memory
  void back_all();              // every buffer not bound gets memory (before a run)

  int count() const { return static_cast<int>(buffers_.size()); }
  HostBuffer& at(int buf);
  // From now on buffer `buf` is the `nbytes` bytes at `data` (nullptr: its own memory again);
  // throws UsageError when nbytes is not the buffer's size.
  void bind(int buf, void* data, size_t nbytes);
  // The first byte of a slice; throws std::runtime_error if it leaves its buffer (a plan bug).
  unsigned char* ptr(const Slice& s);
  // C, gathered and work buffers filled with NaN of their element type.
  void poison();

 private:
  void back(HostBuffer& b);
  std::vector<HostBuffer> buffers_;
};

}  // namespace collmm::cpu
