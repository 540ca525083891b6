// rank_device.cpp: one rank's buffers, lanes (streams), step events and the local steps (gemm,
// copy, add); see rank_device.hpp.
#include "rank_device.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "collmm/element_types.hpp"
#include "cuda_check.hpp"
#include "elementwise.hpp"

namespace collmm::cuda {
RankDevice::RankDevice(int device, const Plan& plan, Dtype dtype, const EngineSettings& s,
                       const std::vector<int>& caller_buffers)
    : device_(device), plan_(plan), in_(dtype), out_(output_dtype(GemmLibrary::cublaslt, dtype)) {
  DeviceGuard guard(device_);
  engine_ = std::make_unique<GemmEngine>(device_, s.workspace_bytes);
  engine_->set_algo_choice(s.algo_choice);
  if (s.gemm_sms > 0)
    engine_->set_sm_target(s.gemm_sms);
  else if (s.sm_margin > 0)
    engine_->set_sm_target(engine_->sm_count() - s.sm_margin);
  for (size_t b = 0; b < plan_.buffers.size(); ++b) {
    void* p = nullptr;
    const size_t n = buffer_bytes(static_cast<int>(b));
    if (std::find(caller_buffers.begin(), caller_buffers.end(), static_cast<int>(b)) == caller_buffers.end())
      COLLMM_CUDA(cudaMalloc(&p, n > 0 ? n : 1));
    own_.push_back(p);
  }
  buffers_ = own_;
  int least = 0, greatest = 0;
  COLLMM_CUDA(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  for (int l = 0; l < plan_.lanes; ++l) {
    cudaStream_t st;
    const int priority = l == 0 && s.comm_high_priority ? greatest : 0;
    COLLMM_CUDA(cudaStreamCreateWithPriority(&st, cudaStreamNonBlocking, priority));
    lanes_.push_back(st);
    cudaEvent_t done;
    COLLMM_CUDA(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
    lane_done_.push_back(done);
    void* ws = nullptr;
    COLLMM_CUDA(cudaMalloc(&ws, s.workspace_bytes));
    workspaces_.push_back(ws);
  }
  events_.resize(plan_.steps.size());
  for (auto& e : events_) {
    COLLMM_CUDA(cudaEventCreateWithFlags(&e.start, cudaEventDisableTiming));
    COLLMM_CUDA(cudaEventCreateWithFlags(&e.end, cudaEventDisableTiming));
    COLLMM_CUDA(cudaEventCreateWithFlags(&e.copied, cudaEventDisableTiming));
    COLLMM_CUDA(cudaEventCreate(&e.t_start));
    COLLMM_CUDA(cudaEventCreate(&e.t_end));
  }
  COLLMM_CUDA(cudaEventCreateWithFlags(&begin_, cudaEventDisableTiming));
  COLLMM_CUDA(cudaEventCreateWithFlags(&finish_, cudaEventDisableTiming));
  COLLMM_CUDA(cudaEventCreate(&t_begin_));
  COLLMM_CUDA(cudaEventCreate(&t_finish_));
  skip_.assign(plan_.steps.size(), false);
  caller_binds_ = !caller_buffers.empty();
  for (size_t i = 0; i < plan_.steps.size(); ++i)
    unwanted_.push_back(only_fills_output(plan_, static_cast<int>(i)) && plan_.steps[i].out.buf > kBufC);
  waited_.assign(plan_.steps.size(), false);
  for (const Step& s : plan_.steps)
    for (int w : s.waits) waited_[static_cast<size_t>(w)] = true;
}

void RankDevice::stamp(cudaEvent_t e, cudaStream_t st) const {
  if (capturing_)
    COLLMM_CUDA(cudaEventRecordWithFlags(e, st, cudaEventRecordExternal));
  else
    COLLMM_CUDA(cudaEventRecord(e, st));
}

RankDevice::~RankDevice() {
  cudaSetDevice(device_);
  cudaDeviceSynchronize();
  for (auto& e : events_)
    for (cudaEvent_t ev : {e.start, e.end, e.copied, e.t_start, e.t_end}) cudaEventDestroy(ev);
  for (cudaEvent_t ev : {begin_, finish_, t_begin_, t_finish_}) cudaEventDestroy(ev);
  for (cudaEvent_t ev : lane_done_) cudaEventDestroy(ev);
  engine_.reset();
  for (void* p : workspaces_) cudaFree(p);
  for (auto st : lanes_) cudaStreamDestroy(st);
  for (void* p : own_) cudaFree(p);
  if (scratch_) cudaFree(scratch_);
}

void RankDevice::bind(int buf, void* data) {
  void* p = data ? data : own_.at(static_cast<size_t>(buf));
  if (!p) throw UsageError("buffer " + std::to_string(buf) + " of rank " + std::to_string(rank()) + " is the caller's");
  buffers_.at(static_cast<size_t>(buf)) = p;
}

void RankDevice::reserve_scratch(size_t bytes) {
  if (bytes <= scratch_bytes_) return;
  DeviceGuard guard(device_);
  if (scratch_) COLLMM_CUDA(cudaFree(scratch_));
  scratch_ = nullptr;
  scratch_bytes_ = 0;
  COLLMM_CUDA(cudaMalloc(&scratch_, bytes));
  scratch_bytes_ = bytes;
}

Dtype RankDevice::dtype_of(int buf) const { return buffer_dtype(plan_.buffers.at(buf).role, in_, out_); }

size_t RankDevice::buffer_bytes(int buf) const {
  const BufferSpec& b = plan_.buffers.at(buf);
  return static_cast<size_t>(b.rows) * static_cast<size_t>(b.cols) * dtype_size(dtype_of(buf));
}

char* RankDevice::ptr(const Slice& s) const {
  const BufferSpec& b = plan_.buffers.at(s.buf);
  if (s.row < 0 || s.rows < 0 || s.row + s.rows > b.rows)
    throw std::runtime_error("rank " + std::to_string(rank()) + ": slice rows [" + std::to_string(s.row) + ", " +
                             std::to_string(s.row + s.rows) + ") outside buffer " + std::to_string(s.buf) + " of " +
                             std::to_string(b.rows) + " rows");
  return static_cast<char*>(buffers_[s.buf]) +
         static_cast<size_t>(s.row) * static_cast<size_t>(b.cols) * dtype_size(dtype_of(s.buf));
}

size_t RankDevice::bytes(const Slice& s) const {
  return static_cast<size_t>(s.rows) * static_cast<size_t>(plan_.buffers.at(s.buf).cols) * dtype_size(dtype_of(s.buf));
}

void RankDevice::set_filter(StepFilter f) {
  for (size_t i = 0; i < plan_.steps.size(); ++i) skip_[i] = skips(f, plan_.steps[i].kind);
}

void RankDevice::begin_iteration(cudaEvent_t origin) {
  COLLMM_CUDA(cudaSetDevice(device_));
  if (origin) COLLMM_CUDA(cudaStreamWaitEvent(lanes_[0], origin, 0));
  // Every lane joins lane 0's capture (if any) through begin_ below: one question for the iteration.
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  COLLMM_CUDA(cudaStreamIsCapturing(lanes_[0], &status));
  capturing_ = status == cudaStreamCaptureStatusActive;
  stamp(t_begin_, lanes_[0]);  // before begin_: a step on another lane may start the moment begin_ is done
  COLLMM_CUDA(cudaEventRecord(begin_, lanes_[0]));
  for (size_t l = 1; l < lanes_.size(); ++l) COLLMM_CUDA(cudaStreamWaitEvent(lanes_[l], begin_, 0));
}

void RankDevice::open_step(int i) {
  const Step& s = plan_.steps[i];
  COLLMM_CUDA(cudaSetDevice(device_));
  cudaStream_t st = lanes_.at(s.lane);
  for (int w : s.waits)
    if (!skipped(w)) COLLMM_CUDA(cudaStreamWaitEvent(st, events_[w].end, 0));
  if (is_transfer(s.kind)) COLLMM_CUDA(cudaEventRecord(events_[i].start, st));
  stamp(events_[i].t_start, st);
}

void RankDevice::close_step(int i) {
  cudaStream_t st = lanes_[plan_.steps[i].lane];
  stamp(events_[i].t_end, st);
  if (waited_[static_cast<size_t>(i)]) COLLMM_CUDA(cudaEventRecord(events_[i].end, st));
}

void RankDevice::issue_local_step(int i) {
  const Step& s = plan_.steps[i];
  open_step(i);
  cudaStream_t st = lanes_[s.lane];
  switch (s.kind) {
    case StepKind::gemm: {
      if (s.out.rows != s.a.rows)
        throw std::runtime_error("gemm step " + std::to_string(i) + ": rows of out and a differ");
      const LocalShape ls = local_shape(plan_.problem, plan_.rank);
      GemmArgs g;
      g.m = s.out.rows, g.n = ls.gemm_n, g.k = ls.gemm_k;
      g.a = ptr(s.a), g.b = buffers_[kBufB], g.c = ptr(s.out);
      g.lda = plan_.buffers[s.a.buf].cols, g.ldb = plan_.buffers[kBufB].cols, g.ldc = plan_.buffers[s.out.buf].cols;
      g.dtype = in_, g.b_layout = plan_.problem.b_layout, g.accumulate = s.accumulate;
      engine_->gemm(g, st, workspaces_[s.lane]);
      break;
    }
    case StepKind::copy:
      if (bytes(s.out) != bytes(s.a)) throw std::runtime_error("copy step " + std::to_string(i) + ": sizes differ");
      COLLMM_CUDA(cudaMemcpyAsync(ptr(s.out), ptr(s.a), bytes(s.a), cudaMemcpyDeviceToDevice, st));
      break;
    case StepKind::add:
      if (bytes(s.out) != bytes(s.a)) throw std::runtime_error("add step " + std::to_string(i) + ": sizes differ");
      add_into(ptr(s.out), ptr(s.a), bytes(s.a) / dtype_size(out_), out_, st);
      break;
    default: throw std::runtime_error("step " + std::to_string(i) + " is a comm step, not a local one");
  }
  close_step(i);
}

void RankDevice::end_iteration() {
  COLLMM_CUDA(cudaSetDevice(device_));
  for (size_t l = 1; l < lanes_.size(); ++l) {  // every lane joins lane 0 (a graph capture needs it)
    COLLMM_CUDA(cudaEventRecord(lane_done_[l], lanes_[l]));
    COLLMM_CUDA(cudaStreamWaitEvent(lanes_[0], lane_done_[l], 0));
  }
  stamp(t_finish_, lanes_[0]);  // before finish_: what follows finish_ on lane 0 would be unjoined in a capture
  COLLMM_CUDA(cudaEventRecord(finish_, lanes_[0]));
}

void RankDevice::issue_iteration(cudaEvent_t origin, const std::function<void(int step)>& transfer) {
  begin_iteration(origin);
  for (size_t j = 0; j < plan_.steps.size(); ++j) {
    const int step = static_cast<int>(j);
    if (skipped(step)) continue;
    if (!is_transfer(plan_.steps[j].kind)) {
      issue_local_step(step);
      continue;
    }
    open_step(step);
    transfer(step);
    close_step(step);
  }
  end_iteration();
}

RankRun RankDevice::times(bool timestamps) const {
  RankRun run;
  run.rank = plan_.rank;
  float ms = 0;
  COLLMM_CUDA(cudaEventElapsedTime(&ms, t_begin_, t_finish_));
  run.total_us = 1e3 * ms;
  if (!timestamps) return run;
  run.steps.resize(plan_.steps.size());
  for (size_t i = 0; i < plan_.steps.size(); ++i) {
    if (skipped(static_cast<int>(i))) continue;
    float a = 0, b = 0;
    COLLMM_CUDA(cudaEventElapsedTime(&a, t_begin_, events_[i].t_start));
    COLLMM_CUDA(cudaEventElapsedTime(&b, t_begin_, events_[i].t_end));
    run.steps[i] = {1e3 * a, 1e3 * b};
  }
  return run;
}

void RankDevice::poison() {
  DeviceGuard guard(device_);
  for (size_t b = 0; b < buffers_.size(); ++b) {
    if (written_by_run(plan_.buffers[b].role))
      COLLMM_CUDA(cudaMemsetAsync(buffers_[b], 0xff, buffer_bytes(static_cast<int>(b)), lanes_[0]));
  }
  COLLMM_CUDA(cudaStreamSynchronize(lanes_[0]));
}

}  // namespace collmm::cuda
