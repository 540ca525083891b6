// host_link.cpp: the host transport's link (see host_link.hpp).
#include "host_link.hpp"

#include <cstring>
#include <stdexcept>

#include "cuda_check.hpp"
#include "elementwise.hpp"

namespace collmm::cuda {
namespace {

constexpr int kCopyCtas = 32;  // the kernel-copy mode's thread blocks per transfer

size_t align_up(size_t x) { return (x + 255) / 256 * 256; }

}  // namespace

PinnedArena::~PinnedArena() {
  if (p_) cudaFreeHost(p_);
}

char* PinnedArena::get(size_t bytes) {
  if (bytes <= size_ && p_) return p_;
  if (p_) COLLMM_CUDA(cudaFreeHost(p_));
  p_ = nullptr;
  size_ = std::max<size_t>(bytes, 256);
  void* p = nullptr;
  COLLMM_CUDA(cudaHostAlloc(&p, size_, cudaHostAllocPortable | cudaHostAllocMapped));
  p_ = static_cast<char*>(p);
  return p_;
}

HostLink::HostLink(RankDevice& rank, check::PeerTraffic traffic, PinnedArena& arena, LinkCopy copy, bool high_priority)
    : rank_(rank), traffic_(std::move(traffic)), copy_(copy) {
  COLLMM_CUDA(cudaSetDevice(rank_.device()));
  size_t total = 0;
  for (const auto* list : {&traffic_.received, &traffic_.sent})
    for (const check::LinkTransfer& t : *list) total += align_up(rank_.bytes(t.slice));
  char* at = arena.get(total);
  std::memset(at, 0, total);
  auto place = [&](const std::vector<check::LinkTransfer>& list, std::vector<Buffer>& into) {
    for (const check::LinkTransfer& t : list) {
      into.push_back({&t, at, rank_.bytes(t.slice)});
      at += align_up(rank_.bytes(t.slice));
    }
  };
  place(traffic_.received, received_);
  place(traffic_.sent, sent_);
  for (const Buffer& b : received_) recvs_of_[b.transfer->step].push_back(&b);
  for (const Buffer& b : sent_) sends_of_[b.transfer->step].push_back(&b);
  int least = 0, greatest = 0;
  COLLMM_CUDA(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  const int priority = high_priority ? greatest : 0;
  COLLMM_CUDA(cudaStreamCreateWithPriority(&send_st_, cudaStreamNonBlocking, priority));
  COLLMM_CUDA(cudaStreamCreateWithPriority(&recv_st_, cudaStreamNonBlocking, priority));
  auto make_events = [](const std::map<int, std::vector<const Buffer*>>& of, std::map<int, cudaEvent_t>& events) {
    for (const auto& [step, list] : of) COLLMM_CUDA(cudaEventCreateWithFlags(&events[step], cudaEventDisableTiming));
  };
  make_events(sends_of_, sent_ev_);
  make_events(recvs_of_, received_ev_);
}

HostLink::~HostLink() {
  cudaSetDevice(rank_.device());
  for (cudaStream_t st : {send_st_, recv_st_})
    if (st) cudaStreamSynchronize(st), cudaStreamDestroy(st);
  for (auto* events : {&sent_ev_, &received_ev_})
    for (auto& [step, e] : *events) cudaEventDestroy(e);
}

void HostLink::copy(void* dst, const void* src, size_t bytes, cudaStream_t st) const {
  if (bytes == 0) return;
  if (copy_ == LinkCopy::engine)
    COLLMM_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, st));
  else
    sm_copy(dst, src, bytes, kCopyCtas, st);
}

void HostLink::issue(int step) {
  cudaStream_t lane = rank_.lane(rank_.plan().steps.at(step).lane);
  const cudaEvent_t start = rank_.events(step).start;
  auto run = [&](const std::map<int, std::vector<const Buffer*>>& of, const std::map<int, cudaEvent_t>& done,
                 cudaStream_t st, bool send) {
    const auto it = of.find(step);
    if (it == of.end()) return;
    COLLMM_CUDA(cudaStreamWaitEvent(st, start, 0));
    for (const Buffer* b : it->second) {
      char* device = rank_.ptr(b->transfer->slice);
      send ? copy(b->host, device, b->bytes, st) : copy(device, b->host, b->bytes, st);
    }
    COLLMM_CUDA(cudaEventRecord(done.at(step), st));
    COLLMM_CUDA(cudaStreamWaitEvent(lane, done.at(step), 0));
  };
  run(sends_of_, sent_ev_, send_st_, true);
  run(recvs_of_, received_ev_, recv_st_, false);
}

void HostLink::stage(PeerInputs& inputs) {
  for (const Buffer& b : received_)
    inputs.materialize(*b.transfer, rank_.plan().buffers.at(b.transfer->slice.buf).cols, b.host);
}

void HostLink::poison_sent() {
  COLLMM_CUDA(cudaStreamSynchronize(send_st_));
  for (const Buffer& b : sent_) std::memset(b.host, 0xff, b.bytes);
}

Comparison HostLink::check_sent(PeerInputs& inputs) const {
  COLLMM_CUDA(cudaStreamSynchronize(send_st_));
  const Problem& p = rank_.plan().problem;
  Comparison all;
  for (const Buffer& b : sent_) {
    const Slice& s = b.transfer->slice;
    const int64_t cols = rank_.plan().buffers.at(s.buf).cols;
    const Dtype d = rank_.dtype_of(s.buf);
    std::vector<unsigned char> want(b.bytes);
    inputs.materialize(*b.transfer, cols, want.data());
    const size_t count = static_cast<size_t>(s.rows * cols);
    const HostMatrix w{s.rows, cols, decode(want.data(), count, d)};
    const std::vector<double> got = decode(b.host, count, d);
    if (gathers_a(p.op)) {  // rows of A travel exactly
      for (size_t e = 0; e < count; ++e) all.wrong += !(got[e] == w.v[e]);
      continue;
    }
    // Running sums are GEMM outputs, summed in another order than here: the tolerance of C.
    const Comparison c = compare(got, w, rank_.in_dtype(), d, p.k);
    all.wrong += c.wrong;
    all.max_rel_err = std::max(all.max_rel_err, c.max_rel_err);
  }
  return all;
}

}  // namespace collmm::cuda
