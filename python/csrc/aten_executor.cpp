// aten_executor.cpp: a Plan walked with ATen ops and c10d Works (aten_executor.hpp).
#include "aten_executor.hpp"

#include <algorithm>
#include <chrono>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <utility>

#include <ATen/ATen.h>
#include <c10/core/Event.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/version.h>

#include "agreement.hpp"
#include "c10d_transport.hpp"  // wait_bound
#include "chrome_trace.hpp"
#include "collmm/element_types.hpp"
#include "comm_watch.hpp"
#include "nccl_comm.hpp"
#include "peer_messages.hpp"
#include "step_marks.hpp"
#include "torch_util.hpp"
#include "trace.hpp"

namespace collmm::torch_ext {
namespace {

// What a posted comm step leaves to do: its Works (c10d), then `finish` (a copy out of padded
// scratch; for a transfer of collmm's own, the current stream's wait for it).
struct Pending {
  std::vector<c10::intrusive_ptr<c10d::Work>> works;
  std::function<void()> finish;
  std::vector<int> peers;  // a transfer's peers (a collective's: none, every rank): named if it stalls
};

class AtenExecutor : public Executor {
 public:
  AtenExecutor(c10d::ProcessGroup* group, c10::Device device, std::unique_ptr<HostComm> host,
               std::shared_ptr<GroupComm> comm)
      : group_(group), device_(device), host_(std::move(host)), comm_(std::move(comm)) {}

  std::string backend() const override { return "aten"; }
  int world_size() const override { return group_->getSize(); }
  std::vector<int> local_ranks() const override { return {group_->getRank()}; }
  HostComm& host() override { return *host_; }
  bool supports(Dtype d) const override {
    return d == Dtype::f64 || d == Dtype::f32 || d == Dtype::f16 || d == Dtype::bf16;
  }
  GemmLibrary gemm_library() const override { return GemmLibrary::aten; }
  bool can_bind() const override { return true; }
  // Nothing to refuse ahead: the caller's tensors already exist, and the scratch (gathered A,
  // receive buffers) comes from PyTorch's allocator, whose out-of-memory error names the size.
  void check_memory(const MemoryNeed&) const override {}

  void prepare(const std::vector<Plan>& plans, Dtype dtype) override {
    if (plans.size() != 1) throw UsageError("aten executor: one plan per process");
    const Plan& p = plans[0];
    check_processes_agree(*host_, agreement_keys(p.problem, p.options, dtype));
    if (p.rank != group_->getRank() || p.problem.world != group_->getSize())
      throw std::runtime_error("aten executor: a plan for rank " + std::to_string(p.rank) + " of " +
                               std::to_string(p.problem.world) + " on a group of " + std::to_string(group_->getSize()));
    plan_ = p;
    dtype_ = dtype;
    tensors_.assign(p.buffers.size(), at::Tensor());
    own_.assign(p.buffers.size(), at::Tensor());
    bound_.assign(p.buffers.size(), false);
    fills_only_.assign(p.steps.size(), false);
    alone_.assign(p.steps.size(), false);
    names_.clear();
    forks_.clear();
    dones_.clear();
    if (device_.is_cuda()) {  // a transfer of collmm's own: on this stream, between two events of its step
      comm_stream_ = c10::impl::getDeviceGuardImpl(device_.type())->getStreamFromGlobalPool(device_, true);
      for (size_t i = 0; i < p.steps.size(); ++i) {
        forks_.emplace_back(device_.type(), c10::EventFlag::BACKEND_DEFAULT);
        dones_.emplace_back(device_.type(), c10::EventFlag::BACKEND_DEFAULT);
      }
    }
    plan_options_ = to_string(p.options);
    run_name_ = "collmm " + to_string(p.problem.op) + " " + to_string(p.options.algo) + " (M " +
                std::to_string(p.problem.m) + " N " + std::to_string(p.problem.n) + " K " +
                std::to_string(p.problem.k) + ", rank " + std::to_string(p.rank) + " of " +
                std::to_string(p.problem.world) + ")";
    for (size_t i = 0; i < p.steps.size(); ++i) {
      const Step& st = p.steps[i];
      fills_only_[i] = only_fills_output(p, static_cast<int>(i));
      names_.push_back("collmm " + event_name(p.problem.op, p.options.algo,
                                              TimelineEvent{p.rank, st.lane, st.kind, st.index, st.chunk, 0, 0}));
    }
    for (size_t i = 0; i < p.buffers.size(); ++i)  // scratch: allocated once per plan, reused by every run
      if (p.buffers[i].role == Role::gathered || p.buffers[i].role == Role::work)
        tensors_[i] = own(static_cast<int>(i));
  }

  void bind(int i, int buffer, void* data, size_t nbytes) override {
    at::Tensor& t = slot(i, buffer);
    const BufferSpec& b = plan_.buffers[static_cast<size_t>(buffer)];
    const size_t want = static_cast<size_t>(b.rows * b.cols) * dtype_size(dtype_);
    if (data && nbytes != want)
      throw UsageError("aten executor: buffer " + std::to_string(buffer) + " holds " + std::to_string(want) +
                       " bytes, not " + std::to_string(nbytes));
    t = data ? at::from_blob(data, {b.rows, b.cols}, options()) : own(buffer);
    bound_[static_cast<size_t>(buffer)] = data != nullptr;
  }
  void write(int i, int buffer, const void* bytes, size_t nbytes) override {
    backed(i, buffer).copy_(at::from_blob(const_cast<void*>(bytes), {static_cast<int64_t>(nbytes)}, at::kByte)
                                .view(scalar_type(dtype_))
                                .view(backed(i, buffer).sizes()));
  }
  void read(int i, int buffer, void* bytes, size_t nbytes) override {
    at::from_blob(bytes, {static_cast<int64_t>(nbytes)}, at::kByte)
        .view(scalar_type(dtype_))
        .view(backed(i, buffer).sizes())
        .copy_(backed(i, buffer));
  }
  void poison() override {
    for (size_t i = 0; i < plan_.buffers.size(); ++i)
      if (plan_.buffers[i].role != Role::a && plan_.buffers[i].role != Role::b)
        backed(0, static_cast<int>(i)).fill_(std::numeric_limits<double>::quiet_NaN());
  }

  std::vector<RankRun> run(StepFilter filter, bool timestamps) override {
    const auto t0 = std::chrono::steady_clock::now();
    if (const std::string why = comm_->failure->why(); !why.empty()) C10_THROW_ERROR(DistBackendError, why);
    // The group's communicator, once c10d has made it for this device (a first run through c10d),
    // asked again at every run: one that c10d aborted since is not used.
    nccl_ = comm_->c10d_ran && direct_comm_allowed() ? NcclComm::of(*group_, device_) : nullptr;
    used_direct_ = used_c10d_ = false;
    std::optional<StepClock> clock;
    if (timestamps) clock.emplace(device_, plan_.steps.size());
    for (size_t i = 0; i < tensors_.size(); ++i) backed(0, static_cast<int>(i));
    std::vector<Pending> pending(plan_.steps.size());
    std::vector<int> last_on_lane(static_cast<size_t>(plan_.lanes), -1);
    wait_limit_ = device_.is_cuda() ? c10d::kUnsetTimeout : wait_bound(*group_);
    auto settle = [&](int j) {
      if (j < 0) return;
      Pending& p = pending[static_cast<size_t>(j)];
      const bool was_pending = !p.works.empty() || p.finish;
      stalled_peers_ = p.peers;
      for (auto& w : p.works) wait_for(*w);
      stalled_peers_.clear();
      p.works.clear();
      if (p.finish) std::exchange(p.finish, nullptr)();
      if (clock && was_pending) clock->end(static_cast<size_t>(j));
    };
    try {
      if (nccl_) connect_once();  // this plan's first run on the communicator
      mark_alone(filter);
      for (size_t i = 0; i < plan_.steps.size(); ++i) {
        const Step& s = plan_.steps[i];
        for (int w : s.waits) settle(w);
        settle(std::exchange(last_on_lane[static_cast<size_t>(s.lane)], static_cast<int>(i)));
        if (skips(filter, s.kind) || unwanted(static_cast<int>(i))) continue;
        StepRange range(names_[i]);
        if (clock) clock->start(i);
        pending[i] = issue(s, i);
        // c10d returns no Work for what is already ordered on the current stream (NCCL's coalesced
        // sends and receives, a collective with asyncOp false): nothing to wait for.
        std::erase_if(pending[i].works, [](const auto& w) { return !w; });
        if (clock && pending[i].works.empty() && !pending[i].finish) clock->end(i);
      }
      for (size_t i = 0; i < pending.size(); ++i) settle(static_cast<int>(i));
      // The group's first run went through c10d, which made the communicator: connect the later
      // runs' transfers now, in this call, which was slow anyway.
      if (!nccl_ && used_c10d_ && device_.is_cuda() && direct_comm_allowed()) {
        nccl_ = NcclComm::of(*group_, device_);
        if (nccl_) connect_once();
      }
    } catch (...) {
      // On CPU, once a transfer was posted, whatever failed leaves it posted into this run's memory.
      if (!device_.is_cuda() && used_c10d_)
        give_up(pending, std::current_exception(), std::chrono::steady_clock::now() - t0);
      // What is on the comm stream still writes the caller's and the plan's memory: the current
      // stream waits for all of it before anything reuses that memory, and it stays watched.
      if (used_direct_) {
        try {
          c10::Event all(device_.type(), c10::EventFlag::BACKEND_DEFAULT);
          all.record(*comm_stream_);
          all.block(current_stream());
          watch_run();
        } catch (const std::exception&) {  // the device itself failed: the first error is the one to raise
        }
      }
      throw;
    }
    if (used_direct_) watch_run();
    if (used_c10d_ && device_.is_cuda()) comm_->c10d_ran = true;
    note_last_run(used_direct_ && used_c10d_ ? "nccl+c10d"
                  : used_direct_             ? "nccl"
                  : used_c10d_               ? "c10d"
                                             : "none",
                  plan_options_);
    RankRun r;
    if (clock) r.steps = clock->finish();
    r.rank = group_->getRank();
    r.total_us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    return {r};
  }

 private:
  at::TensorOptions options() const { return at::TensorOptions().device(device_).dtype(scalar_type(dtype_)); }

  // A Work of this run: on CUDA the current stream's wait for it; on CPU (gloo) the host's, bounded
  // by wait_bound (collectives carry it as their own timeout too: gloo ends them itself).
  void wait_for(c10d::Work& w) {
    if (device_.is_cuda()) {
      w.wait();
      return;
    }
    if (!w.wait(wait_limit_)) throw std::runtime_error("the transfer's wait was aborted");
  }

  // A CPU run whose transfer failed or ran out (a peer stopped, died, or gave up). gloo has closed
  // the group's connections (a wait that runs out does so) or will at its own bound, and no Work
  // can be taken back. The Works still posted and the plan's scratch are kept (keep_after_give_up;
  // the call's tensors by Session::run), the group's failure says why (every later call on the
  // group raises it), and this raises DistBackendError.
  [[noreturn]] void give_up(std::vector<Pending>& pending, std::exception_ptr error,
                            std::chrono::duration<double> waited) {
    std::string what = "an exception";
    try {
      std::rethrow_exception(error);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    std::vector<c10::intrusive_ptr<c10d::Work>> works;
    for (Pending& p : pending)
      for (auto& w : p.works)
        if (w && !w->isCompleted()) works.push_back(w);
    std::vector<at::Tensor> scratch;
    for (const at::Tensor& t : own_)
      if (t.defined()) scratch.push_back(t);
    keep_after_give_up(std::move(scratch), std::move(works));
    const int rank = group_->getRank(), size = group_->getSize();
    const std::string why =
        wait_failed(rank, size, wait_limit_, waited, "the transfers of " + run_name_, what, stalled_peers_);
    comm_->exchanges->set(why +
                          "; the group's gloo transfers were given up: make a new group for the ops "
                          "(dist.new_group)");
    C10_THROW_ERROR(DistBackendError, why);
  }
  at::Tensor& slot(int i, int buffer) {
    if (i != 0) throw UsageError("aten executor: one local rank (got index " + std::to_string(i) + ")");
    if (buffer < 0 || static_cast<size_t>(buffer) >= tensors_.size())
      throw std::runtime_error("aten executor: no buffer " + std::to_string(buffer) + " (prepare first)");
    return tensors_[static_cast<size_t>(buffer)];
  }
  const at::Tensor& own(int buffer) {
    at::Tensor& t = own_[static_cast<size_t>(buffer)];
    const BufferSpec& b = plan_.buffers[static_cast<size_t>(buffer)];
    if (!t.defined()) t = at::zeros({b.rows, b.cols}, options());
    return t;
  }
  at::Tensor& backed(int i, int buffer) {
    at::Tensor& t = slot(i, buffer);
    if (!t.defined()) t = own(buffer);
    return t;
  }
  // run() settles a step before it issues the next one on its lane or one that waits for it: where
  // that is the next step it issues (or none follows), nothing runs beside this one. Steps it does
  // not issue (the filter's, unwanted copies) are passed over: with gemm-first posting the own
  // chunk's copy lies between step 0's transfer and the GEMM that waits for it.
  void mark_alone(StepFilter filter) {
    const std::vector<Step>& steps = plan_.steps;
    const Step* next = nullptr;
    for (size_t i = steps.size(); i-- > 0;) {
      const int me = static_cast<int>(i);
      alone_[i] = !next || next->lane == steps[i].lane ||
                  std::find(next->waits.begin(), next->waits.end(), me) != next->waits.end();
      if (!skips(filter, steps[i].kind) && !unwanted(me)) next = &steps[i];
    }
  }
  // A copy that only completes a buffer the caller did not bind (the gathered A kept in scratch).
  bool unwanted(int i) const {
    const Step& s = plan_.steps[static_cast<size_t>(i)];
    return fills_only_[static_cast<size_t>(i)] && s.out.buf > kBufC && !bound_[static_cast<size_t>(s.out.buf)];
  }
  at::Tensor rows(const Slice& s) { return tensors_.at(static_cast<size_t>(s.buf)).narrow(0, s.row, s.rows); }
  // B as the [K, N] matrix of the GEMMs: itself (kn) or the transpose of the stored [N, K] (nk).
  at::Tensor b_matrix() {
    const at::Tensor& b = tensors_[kBufB];
    return plan_.problem.b_layout == BLayout::kn ? b : b.t();
  }
  bool coalesce() const { return device_.is_cuda(); }  // NCCL: a group's sends and receives in one ncclGroup
  c10::Stream current_stream() const { return c10::impl::getDeviceGuardImpl(device_.type())->getStream(device_); }

  // A transfer of collmm's own (NcclComm), on the comm stream: after what the current stream holds
  // now (step i's fork event), and before whatever the current stream runs after the step settles
  // (its done event). With `alone` (nothing runs beside it), on the current stream itself.
  Pending direct(size_t i, bool alone, const std::function<void(void* stream)>& transfer) {
    const c10::DeviceGuard guard(device_);
    used_direct_ = true;
    if (alone) {
      transfer(current_stream().native_handle());
      return {};
    }
    forks_[i].record(current_stream());
    forks_[i].block(*comm_stream_);
    transfer(comm_stream_->native_handle());
    dones_[i].record(*comm_stream_);
    return {{}, [this, i] { dones_[i].block(current_stream()); }, {}};
  }

  // NCCL connects a peer (ncclSend/ncclRecv) or a collective's algorithm on its first use
  // (NCCL_RUNTIME_CONNECT, on by default), inside ncclGroupEnd: a handshake with the peers' hosts,
  // 12-20 ms per kind on an H100 (docs/perf/log-2026-12.md). So a plan's first run that
  // can reach the communicator issues each of its transfers once more, on scratch memory: the
  // same peers, sizes, datatypes and streams as its runs, which then never connect. Collectives
  // the run pads through c10d are issued at the padded size c10d calls NCCL with. Every rank does
  // this at the same run of the same plan, so the transfers meet. Not under CUDA graph capture: the
  // graph would replay them.
  void connect_once() {
    if (connected_ || stream_capturing(current_stream())) return;
    connected_ = true;
    mark_alone(StepFilter::all);
    const bool was_direct = used_direct_;
    const size_t world = static_cast<size_t>(world_size()), elem = dtype_size(dtype_);
    // A collective's part, in bytes: the largest rank's rows (c10d pads to them; equal parts: all).
    auto part_bytes = [&](const Step& s) {
      const at::Tensor mine = rows(s.kind == StepKind::allgather ? s.a : s.out);
      return static_cast<size_t>(part_size(part_rows(s)).most * mine.size(1)) * elem;
    };
    auto need = [&](const Step& s) -> size_t {
      if (s.kind == StepKind::allgather || s.kind == StepKind::reduce_scatter) return (world + 1) * part_bytes(s);
      size_t bytes = 0;
      if (s.kind == StepKind::sendrecv)
        for (const auto* ts : {&s.recvs, &s.sends})
          for (const Transfer& t : *ts) bytes += message(t).bytes;
      return bytes;
    };
    // Every sendrecv step with messages is issued as its runs issue it, 0-byte messages included. So
    // a rank whose messages of a step are all empty (an uneven split's empty chunk) still meets its
    // peers' messages to it, which they post whatever their size. A collective's size is the same on
    // every rank, so one of 0 bytes is left out everywhere.
    auto issued = [&](const Step& s) {
      if (s.kind == StepKind::sendrecv) return !s.recvs.empty() || !s.sends.empty();
      return (s.kind == StepKind::allgather || s.kind == StepKind::reduce_scatter) && need(s) > 0;
    };
    size_t most = 1;
    for (const Step& s : plan_.steps) most = std::max(most, need(s));
    const at::Tensor scratch = at::empty({static_cast<int64_t>(most)}, options().dtype(at::kByte));
    auto* base = static_cast<unsigned char*>(scratch.data_ptr());
    for (size_t i = 0; i < plan_.steps.size(); ++i) {
      const Step& s = plan_.steps[i];
      if (!issued(s) || unwanted(static_cast<int>(i))) continue;
      std::function<void(void*)> transfer;
      if (s.kind == StepKind::sendrecv) {
        std::vector<NcclComm::Message> recvs, sends;
        size_t offset = 0;  // each message its own bytes of the scratch
        for (const Transfer& t : s.recvs) {
          recvs.push_back({t.peer, base + offset, message(t).bytes});
          offset += recvs.back().bytes;
        }
        for (const Transfer& t : s.sends) {
          sends.push_back({t.peer, base + offset, message(t).bytes});
          offset += sends.back().bytes;
        }
        transfer = [&, recvs, sends](void* stream) { nccl_->sendrecv(recvs, sends, stream); };
      } else if (s.kind == StepKind::allgather) {
        const size_t each = part_bytes(s);
        transfer = [&, each](void* stream) { nccl_->all_gather(base, base + each, each, stream); };
      } else {
        const size_t each = part_bytes(s);
        transfer = [&, each](void* stream) { nccl_->reduce_scatter(base + each, base, each / elem, dtype_, stream); };
      }
      if (std::function<void()> finish = direct(i, alone_[i], transfer).finish) finish();  // one at a time
    }
    watch_run();
    used_direct_ = was_direct;  // a run's path says how its own data moved
  }

  // The bound on this run's transfers (comm_watch.hpp): an event after all of them, watched.
  void watch_run() {
    if (stream_capturing(current_stream())) return;
    c10::Event done = watch_event(device_);
    done.record(current_stream());
    watch_comm(std::move(done), wait_bound(*group_), run_name_, nccl_->backend(), comm_->failure);
  }
  // NCCL has all_gather_into_tensor and reduce_scatter_tensor; gloo has both in the torch versions
  // from 2.8 on (older ones: the collectives of a list of tensors).
  bool one_tensor_collectives() const {
    return device_.is_cuda() || TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 8);
  }

  Pending issue(const Step& s, size_t i) {
    switch (s.kind) {
      case StepKind::gemm: {
        at::Tensor out = rows(s.out);
        if (s.accumulate)
          out.addmm_(rows(s.a), b_matrix());
        else
          at::mm_out(out, rows(s.a), b_matrix());
        return {};
      }
      case StepKind::copy: rows(s.out).copy_(rows(s.a)); return {};
      case StepKind::add: rows(s.out).add_(rows(s.a)); return {};
      case StepKind::sendrecv: return sendrecv(s, i);
      case StepKind::allgather: return allgather(s, i);
      case StepKind::reduce_scatter: return reduce_scatter(s, i);
    }
    return {};
  }

  Pending sendrecv(const Step& s, size_t i) {
    if (nccl_) {
      std::vector<NcclComm::Message> recvs, sends;
      for (const Transfer& t : s.recvs) recvs.push_back(message(t));
      for (const Transfer& t : s.sends) sends.push_back(message(t));
      return direct(i, alone_[i], [&](void* stream) { nccl_->sendrecv(recvs, sends, stream); });
    }
    used_c10d_ = true;
    Pending p;
    if (coalesce()) group_->startCoalescing(device_.type());
    std::vector<PeerMessage> recvs, sends;
    for (const Transfer& t : s.recvs) {
      recvs.push_back({t.peer, rows(t.slice)});
      if (std::find(p.peers.begin(), p.peers.end(), t.peer) == p.peers.end()) p.peers.push_back(t.peer);
    }
    for (const Transfer& t : s.sends) sends.push_back({t.peer, rows(t.slice)});
    p.works = post_messages(*group_, tags_, recvs, sends);
    if (coalesce()) p.works = {group_->endCoalescing(device_.type())};  // one Work for the group, as batch_isend_irecv
    return p;
  }

  NcclComm::Message message(const Transfer& t) {
    const at::Tensor r = rows(t.slice);
    return {t.peer, r.data_ptr(), r.nbytes()};
  }

  std::vector<int64_t> part_rows(const Step& s) const {
    std::vector<int64_t> rows;
    for (const Slice& q : s.parts) rows.push_back(q.rows);
    return rows;
  }

  // The rows the parts cover, as one tensor, where they are equal and follow each other in one
  // buffer in rank order (collmm's usual layout): the collective then runs on it directly.
  std::optional<at::Tensor> one_tensor(const Step& s) {
    const PartSize size = part_size(part_rows(s));
    if (!one_tensor_collectives() || !size.equal || s.parts.empty()) return std::nullopt;
    const Slice& first = s.parts.front();
    for (size_t q = 0; q < s.parts.size(); ++q)
      if (s.parts[q].buf != first.buf || s.parts[q].row != first.row + static_cast<int64_t>(q) * size.most)
        return std::nullopt;
    return tensors_.at(static_cast<size_t>(first.buf))
        .narrow(0, first.row, size.most * static_cast<int64_t>(s.parts.size()));
  }

  // Equal parts go straight into their rows (on NCCL as one tensor: all_gather_into_tensor, no
  // copies out of a flat buffer; on the current stream where nothing overlaps it, async_op false);
  // uneven ones through parts padded to the largest.
  Pending allgather(const Step& s, size_t i) {
    Pending p;
    const bool async_op = !alone_[i];
    if (std::optional<at::Tensor> all = one_tensor(s)) {
      at::Tensor mine = rows(s.a);
      if (nccl_) {
        TORCH_CHECK(all->nbytes() == mine.nbytes() * static_cast<size_t>(world_size()), "collmm: all-gather of ",
                    mine.nbytes(), " bytes per rank into ", all->nbytes());
        return direct(i, alone_[i], [&](void* stream) {
          nccl_->all_gather(mine.data_ptr(), all->data_ptr(), mine.nbytes(), stream);
        });
      }
      used_c10d_ = true;
      p.works.push_back(gather_single(*group_, *all, mine, async_op, wait_limit_));
      return p;
    }
    used_c10d_ = true;
    const PartSize size = part_size(part_rows(s));
    const at::Tensor mine = rows(s.a);
    std::vector<at::Tensor> in{padded_rows(mine, size.most)};
    std::vector<std::vector<at::Tensor>> out(1);
    for (const Slice& q : s.parts)
      out[0].push_back(size.equal ? rows(q) : at::empty({size.most, mine.size(1)}, mine.options()));
    c10d::AllgatherOptions opts;
    opts.timeout = wait_limit_;
    p.works.push_back(group_->allgather(out, in, opts));
    if (!size.equal)
      p.finish = [this, parts = s.parts, out] {
        for (size_t q = 0; q < parts.size(); ++q) rows(parts[q]).copy_(out[0][q].narrow(0, 0, parts[q].rows));
      };
    return p;
  }

  Pending reduce_scatter(const Step& s, size_t i) {
    Pending p;
    const bool async_op = !alone_[i];
    if (std::optional<at::Tensor> all = one_tensor(s)) {  // reduce_scatter_tensor
      at::Tensor mine = rows(s.out);
      if (nccl_) {
        TORCH_CHECK(all->numel() == mine.numel() * world_size(), "collmm: reduce-scatter of ", all->numel(),
                    " elements into ", mine.numel(), " per rank");
        return direct(i, alone_[i], [&](void* stream) {
          nccl_->reduce_scatter(all->data_ptr(), mine.data_ptr(), static_cast<size_t>(mine.numel()), dtype_, stream);
        });
      }
      used_c10d_ = true;
      p.works.push_back(scatter_single(*group_, mine, *all, async_op, wait_limit_));
      return p;
    }
    used_c10d_ = true;
    const PartSize size = part_size(part_rows(s));
    std::vector<std::vector<at::Tensor>> in(1);
    for (const Slice& q : s.parts) in[0].push_back(padded_rows(rows(q), size.most));
    const at::Tensor mine = rows(s.out);
    std::vector<at::Tensor> out{size.equal ? mine : at::empty({size.most, mine.size(1)}, mine.options())};
    c10d::ReduceScatterOptions opts;
    opts.timeout = wait_limit_;
    p.works.push_back(group_->reduce_scatter(out, in, opts));
    if (!size.equal) p.finish = [mine, out] { mine.copy_(out[0].narrow(0, 0, mine.size(0))); };
    return p;
  }

  c10d::ProcessGroup* group_;  // alive during every call (session_for holds it)
  c10::Device device_;
  std::unique_ptr<HostComm> host_;
  Plan plan_;
  Dtype dtype_ = Dtype::f32;
  std::vector<at::Tensor> tensors_, own_;  // per buffer: what steps use (bound or own), and our own
  std::vector<bool> bound_;                // per buffer: the caller's memory
  std::vector<bool> fills_only_;           // per step: only_fills_output (made once per plan)
  std::vector<bool> alone_;                // per step: nothing is issued beside it (mark_alone, per run)
  PeerTags tags_;
  std::vector<std::string> names_;                // per step: its range's name
  std::shared_ptr<GroupComm> comm_;               // the session's (nccl_comm.hpp)
  std::unique_ptr<NcclComm> nccl_;                // this run's: its transfers through it; null: through c10d
  bool used_direct_ = false, used_c10d_ = false;  // this run's transfers, by way
  std::optional<c10::Stream> comm_stream_;
  std::vector<c10::Event> forks_, dones_;  // per step
  bool connected_ = false;                 // connect_once ran
  std::string run_name_, plan_options_;
  std::vector<int> stalled_peers_;  // the peers of the transfer being waited for (named if it stalls)
  std::chrono::milliseconds wait_limit_ = c10d::kUnsetTimeout;  // this run's transfers' (CPU: wait_bound)
};

}  // namespace

std::unique_ptr<Executor> make_aten_executor(c10d::ProcessGroup* group, c10::Device device,
                                             std::unique_ptr<HostComm> host, std::shared_ptr<GroupComm> comm) {
  return std::make_unique<AtenExecutor>(group, device, std::move(host), std::move(comm));
}

}  // namespace collmm::torch_ext
