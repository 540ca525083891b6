// torch_util.hpp: what the extension's files share. The dtypes the ops take as collmm's Dtype, and
// collmm's Dtype as an ATen scalar type. The parts of a collective padded to one size: gloo and the
// c10d collectives want parts of one size, so uneven ones travel as zero-padded copies.
#pragma once

#include <dlfcn.h>

#include <algorithm>
#include <optional>
#include <vector>

#include <ATen/ATen.h>
#include <c10/core/Stream.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include "executor.hpp"

namespace collmm::torch_ext {

inline std::optional<Dtype> dtype_of(at::ScalarType t) {
  if (t == at::kFloat) return Dtype::f32;
  if (t == at::kDouble) return Dtype::f64;
  if (t == at::kBFloat16) return Dtype::bf16;
  return std::nullopt;
}

inline at::ScalarType scalar_type(Dtype d) {
  switch (d) {
    case Dtype::f64: return at::kDouble;
    case Dtype::f32: return at::kFloat;
    case Dtype::f16: return at::kHalf;
    case Dtype::bf16: return at::kBFloat16;
    default: throw UsageError("collmm: no ATen type for " + to_string(d) + " elements");
  }
}

// The size every part of a collective travels at: the largest part; `equal` when all have it.
struct PartSize {
  int64_t most = 0;
  bool equal = true;
};
inline PartSize part_size(const std::vector<int64_t>& rows) {
  PartSize s;
  for (int64_t r : rows) s.most = std::max(s.most, r);
  for (int64_t r : rows) s.equal = s.equal && r == s.most;
  return s;
}

// `t` with zero rows appended along dim 0 up to `most` rows (a copy), or `t` when it has them.
inline at::Tensor padded_rows(const at::Tensor& t, int64_t most) {
  if (t.size(0) == most) return t;
  std::vector<int64_t> pad(static_cast<size_t>(2 * t.dim()), 0);
  pad.back() = most - t.size(0);
  return at::constant_pad_nd(t, pad);
}

// opts.asyncOp where this torch's options have it. false: c10d runs the collective on the caller's
// current stream (no stream of its own, no events to wait for, nothing stashed for its watchdog),
// as torch.distributed does for a call without async_op: for a step that nothing runs beside.
template <class O>
auto set_async_op(O& opts, bool async_op, int) -> decltype(opts.asyncOp = async_op, void()) {
  opts.asyncOp = async_op;
}
template <class O>
void set_async_op(O&, bool, long) {}

// The one-tensor collectives (all_gather_into_tensor, reduce_scatter_tensor) under the name this
// torch gives them: all_gather_single / reduce_scatter_single where it has them, else the older
// _allgather_base / _reduce_scatter_base (deprecated aliases where the new names exist).
template <class G>
auto gather_single(G& group, at::Tensor& out, at::Tensor& in, c10d::AllgatherOptions opts, int)
    -> decltype(group.all_gather_single(out, in, opts)) {
  return group.all_gather_single(out, in, opts);
}
template <class G>
auto gather_single(G& group, at::Tensor& out, at::Tensor& in, c10d::AllgatherOptions opts, long) {
  return group._allgather_base(out, in, opts);
}
template <class G>
auto scatter_single(G& group, at::Tensor& out, at::Tensor& in, c10d::ReduceScatterOptions opts, int)
    -> decltype(group.reduce_scatter_single(out, in, opts)) {
  return group.reduce_scatter_single(out, in, opts);
}
template <class G>
auto scatter_single(G& group, at::Tensor& out, at::Tensor& in, c10d::ReduceScatterOptions opts, long) {
  return group._reduce_scatter_base(out, in, opts);
}
// `timeout`: the collective's own bound (gloo ends it with an error then), else the group's.
template <class G>
c10::intrusive_ptr<c10d::Work> gather_single(G& group, at::Tensor& out, at::Tensor& in, bool async_op,
                                             std::chrono::milliseconds timeout = c10d::kUnsetTimeout) {
  c10d::AllgatherOptions opts;
  opts.timeout = timeout;
  set_async_op(opts, async_op, 0);
  return gather_single(group, out, in, opts, 0);
}
template <class G>
c10::intrusive_ptr<c10d::Work> scatter_single(G& group, at::Tensor& out, at::Tensor& in, bool async_op,
                                              std::chrono::milliseconds timeout = c10d::kUnsetTimeout) {
  c10d::ReduceScatterOptions opts;
  opts.timeout = timeout;
  set_async_op(opts, async_op, 0);
  return scatter_single(group, out, in, opts, 0);
}

// Whether `stream` records a CUDA graph now: c10::Stream::is_capturing where this torch has it; on
// an older torch, the CUDA runtime's cudaStreamIsCapturing, from the libcudart torch loaded (the
// extension links no CUDA library of its own). Status 0 is cudaStreamCaptureStatusNone.
template <class S>
auto stream_capturing(const S& stream, int) -> decltype(stream.is_capturing()) {
  return stream.is_capturing();
}
template <class S>
bool stream_capturing(const S& stream, long) {
  using IsCapturing = int (*)(void*, int*);
  static const auto is_capturing = reinterpret_cast<IsCapturing>(dlsym(RTLD_DEFAULT, "cudaStreamIsCapturing"));
  int status = 0;
  return is_capturing && is_capturing(stream.native_handle(), &status) == 0 && status != 0;
}
inline bool stream_capturing(const c10::Stream& stream) { return stream_capturing(stream, 0); }
// Whether the current stream of `device` records a CUDA graph now.
inline bool capturing(c10::Device device) {
  return device.is_cuda() && stream_capturing(c10::impl::getDeviceGuardImpl(device.type())->getStream(device));
}

}  // namespace collmm::torch_ext
