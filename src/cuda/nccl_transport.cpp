// nccl_transport.cpp: sendrecv, allgather(v) and reduce-scatter(v) steps on NCCL; communicator
// creation with CTA bounds. See nccl_transport.hpp.
#include "nccl_transport.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "cuda_check.hpp"

namespace collmm::cuda {
namespace {

// True when parts[q] all have the same rows, lie in one buffer back to back in rank order.
bool equal_and_adjacent(const std::vector<Slice>& parts) {
  for (size_t q = 1; q < parts.size(); ++q)
    if (parts[q].buf != parts[0].buf || parts[q].rows != parts[0].rows ||
        parts[q].row != parts[0].row + static_cast<int64_t>(q) * parts[0].rows)
      return false;
  return true;
}

// Parts of equal rows in one buffer, parts[q] starting `stride` rows after parts[q - 1], stride
// larger than a part (not back to back): the stride in rows, else 0.
int64_t uniform_stride(const std::vector<Slice>& parts) {
  if (parts.size() < 2) return 0;
  const int64_t stride = parts[1].row - parts[0].row;
  if (stride <= parts[0].rows) return 0;
  for (size_t q = 1; q < parts.size(); ++q)
    if (parts[q].buf != parts[0].buf || parts[q].rows != parts[0].rows ||
        parts[q].row != parts[0].row + static_cast<int64_t>(q) * stride)
      return 0;
  return stride;
}

void sendrecv(RankDevice& r, ncclComm_t comm, const Step& s, cudaStream_t st) {
  COLLMM_NCCL(ncclGroupStart());
  for (const Transfer& t : s.sends)
    COLLMM_NCCL(ncclSend(r.ptr(t.slice), r.bytes(t.slice), ncclUint8, t.peer, comm, st));
  for (const Transfer& t : s.recvs)
    COLLMM_NCCL(ncclRecv(r.ptr(t.slice), r.bytes(t.slice), ncclUint8, t.peer, comm, st));
  COLLMM_NCCL(ncclGroupEnd());
}

void allgather(RankDevice& r, ncclComm_t comm, const Step& s, cudaStream_t st) {
  const int me = r.rank();
  if (r.bytes(s.a) != r.bytes(s.parts.at(me)))
    throw std::runtime_error("allgather: rank " + std::to_string(me) +
                             " contributes a slice of another size than its part");
  if (equal_and_adjacent(s.parts)) {
    COLLMM_NCCL(ncclAllGather(r.ptr(s.a), r.ptr(s.parts[0]), r.bytes(s.a), ncclUint8, comm, st));
    return;
  }
  const int64_t stride = uniform_stride(s.parts);
  const size_t part = r.bytes(s.parts[0]);
  if (stride > 0 && part > 0 && r.scratch_bytes() >= part * s.parts.size()) {
    COLLMM_NCCL(ncclAllGather(r.ptr(s.a), r.scratch(), part, ncclUint8, comm, st));
    const size_t row_bytes = part / static_cast<size_t>(s.parts[0].rows);
    COLLMM_CUDA(cudaMemcpy2DAsync(r.ptr(s.parts[0]), static_cast<size_t>(stride) * row_bytes, r.scratch(), part, part,
                                  s.parts.size(), cudaMemcpyDeviceToDevice, st));
    return;
  }
  COLLMM_NCCL(ncclGroupStart());
  for (size_t q = 0; q < s.parts.size(); ++q) {
    const void* send = static_cast<int>(q) == me ? r.ptr(s.a) : nullptr;
    COLLMM_NCCL(ncclBroadcast(send, r.ptr(s.parts[q]), r.bytes(s.parts[q]), ncclUint8, static_cast<int>(q), comm, st));
  }
  COLLMM_NCCL(ncclGroupEnd());
}

void reduce_scatter(RankDevice& r, ncclComm_t comm, const Step& s, cudaStream_t st) {
  const int me = r.rank();
  const Dtype out = r.dtype_of(s.out.buf);
  const size_t esize = dtype_size(out);
  if (r.bytes(s.out) != r.bytes(s.parts.at(me)))
    throw std::runtime_error("reduce_scatter: rank " + std::to_string(me) + "'s output and its part differ in size");
  if (equal_and_adjacent(s.parts)) {
    COLLMM_NCCL(
        ncclReduceScatter(r.ptr(s.parts[0]), r.ptr(s.out), r.bytes(s.out) / esize, nccl_type(out), ncclSum, comm, st));
    return;
  }
  COLLMM_NCCL(ncclGroupStart());
  for (size_t q = 0; q < s.parts.size(); ++q) {
    void* recv = static_cast<int>(q) == me ? r.ptr(s.out) : nullptr;
    COLLMM_NCCL(ncclReduce(r.ptr(s.parts[q]), recv, r.bytes(s.parts[q]) / esize, nccl_type(out), ncclSum,
                           static_cast<int>(q), comm, st));
  }
  COLLMM_NCCL(ncclGroupEnd());
}

}  // namespace

ncclDataType_t nccl_type(Dtype d) {
  switch (d) {
    case Dtype::f64: return ncclFloat64;
    case Dtype::f32:
    case Dtype::tf32: return ncclFloat32;
    case Dtype::f16: return ncclFloat16;
    case Dtype::bf16: return ncclBfloat16;
    case Dtype::fp8_e4m3: return ncclUint8;
  }
  return ncclUint8;
}

void issue_nccl_step(RankDevice& r, ncclComm_t comm, int i) {
  const Step& s = r.plan().steps[i];
  cudaStream_t st = r.lane(s.lane);
  switch (s.kind) {
    case StepKind::sendrecv: sendrecv(r, comm, s, st); break;
    case StepKind::allgather: allgather(r, comm, s, st); break;
    case StepKind::reduce_scatter: reduce_scatter(r, comm, s, st); break;
    default: throw std::runtime_error("step " + std::to_string(i) + " is not a comm step");
  }
}

size_t nccl_scratch_bytes(const RankDevice& r) {
  size_t most = 0;
  for (const Step& s : r.plan().steps)
    if (s.kind == StepKind::allgather && !equal_and_adjacent(s.parts) && uniform_stride(s.parts) > 0)
      most = std::max(most, r.bytes(s.parts[0]) * s.parts.size());
  return most;
}

std::vector<ncclComm_t> make_nccl_comms(const ncclUniqueId& id, int world, int first_rank,
                                        const std::vector<int>& devices, const NcclSettings& s) {
  std::vector<ncclComm_t> comms(devices.size());
  COLLMM_NCCL(ncclGroupStart());
  for (size_t i = 0; i < devices.size(); ++i) {
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 1;  // calls return when enqueued: the error check accepts ncclSuccess only
    if (s.min_ctas > 0) config.minCTAs = s.min_ctas;
    if (s.max_ctas > 0) config.maxCTAs = s.max_ctas;
    COLLMM_CUDA(cudaSetDevice(devices[i]));
    COLLMM_NCCL(ncclCommInitRankConfig(&comms[i], world, id, first_rank + static_cast<int>(i), &config));
  }
  COLLMM_NCCL(ncclGroupEnd());
  return comms;
}

}  // namespace collmm::cuda
