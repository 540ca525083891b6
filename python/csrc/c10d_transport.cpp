// c10d_transport.cpp: the plan's comm steps and the agreement checks over a c10d ProcessGroup.
#include "c10d_transport.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <numeric>
#include <sstream>
#include <stdexcept>

#include <ATen/ATen.h>

#include "torch_util.hpp"

namespace collmm::torch_ext {
namespace {

at::Tensor bytes_at(const void* data, size_t nbytes) {
  return at::from_blob(const_cast<void*>(data), {static_cast<int64_t>(nbytes)}, at::TensorOptions().dtype(at::kByte));
}

void wait_all(std::vector<c10::intrusive_ptr<c10d::Work>>& works) {
  for (auto& w : works) w->wait();
}

}  // namespace

C10dTransport::C10dTransport(c10d::ProcessGroup* group) : group_(group) {}
int C10dTransport::rank() const { return group_->getRank(); }
int C10dTransport::size() const { return group_->getSize(); }

void C10dTransport::sendrecv(const std::vector<cpu::Message>& sends, const std::vector<cpu::Message>& recvs) {
  auto as_tensors = [](const std::vector<cpu::Message>& messages) {
    std::vector<PeerMessage> out;
    for (const cpu::Message& m : messages)
      out.push_back({m.peer, bytes_at(m.data, static_cast<size_t>(m.rows) * m.row_bytes)});
    return out;
  };
  std::vector<c10::intrusive_ptr<c10d::Work>> works =
      post_messages(*group_, tags_, as_tensors(recvs), as_tensors(sends));
  wait_all(works);
}

void C10dTransport::allgather(const void* mine, int64_t mine_rows, unsigned char* base, size_t row_bytes,
                              const std::vector<cpu::RowRange>& parts) {
  if (static_cast<int>(parts.size()) != size())
    throw std::runtime_error("collmm c10d transport: allgather of " + std::to_string(parts.size()) + " parts on " +
                             std::to_string(size()) + " ranks");
  std::vector<int64_t> rows;
  for (const cpu::RowRange& q : parts) rows.push_back(q.rows);
  const PartSize size = part_size(rows);
  const int64_t row_len = static_cast<int64_t>(row_bytes);
  std::vector<at::Tensor> in{
      padded_rows(bytes_at(mine, static_cast<size_t>(mine_rows) * row_bytes).view({mine_rows, row_len}), size.most)};
  std::vector<std::vector<at::Tensor>> out(1);
  for (const cpu::RowRange& q : parts)
    out[0].push_back(
        size.equal
            ? bytes_at(base + static_cast<size_t>(q.row) * row_bytes, size.most * row_bytes).view({size.most, row_len})
            : at::empty({size.most, row_len}, at::kByte));
  group_->allgather(out, in)->wait();
  if (size.equal) return;
  for (size_t q = 0; q < parts.size(); ++q)
    std::memcpy(base + static_cast<size_t>(parts[q].row) * row_bytes, out[0][q].data_ptr(),
                static_cast<size_t>(parts[q].rows) * row_bytes);
}

void C10dTransport::reduce_scatter(const void* send, void* recv, Dtype dtype, const std::vector<int64_t>& counts) {
  if (static_cast<int>(counts.size()) != size())
    throw std::runtime_error("collmm c10d transport: reduce-scatter of " + std::to_string(counts.size()) +
                             " parts on " + std::to_string(size()) + " ranks");
  const at::TensorOptions opts = at::TensorOptions().dtype(scalar_type(dtype));
  const int64_t total = std::accumulate(counts.begin(), counts.end(), int64_t{0});
  const PartSize size = part_size(counts);
  const at::Tensor all = at::from_blob(const_cast<void*>(send), {total}, opts);
  std::vector<std::vector<at::Tensor>> in(1);
  int64_t offset = 0;
  for (int64_t c : counts) {
    in[0].push_back(padded_rows(all.narrow(0, offset, c), size.most));
    offset += c;
  }
  const int64_t own = counts[static_cast<size_t>(rank())];
  const at::Tensor mine = at::from_blob(recv, {own}, opts);
  std::vector<at::Tensor> out{size.equal ? mine : at::empty({size.most}, opts)};
  group_->reduce_scatter(out, in)->wait();
  if (!size.equal) mine.copy_(out[0].narrow(0, 0, own));
}

bool C10dTransport::barrier_until(std::chrono::steady_clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
  try {
    return group_->barrier()->wait(std::max(left, std::chrono::milliseconds(1)));
  } catch (const std::exception&) {  // gloo reports a timed-out wait by throwing
    return false;
  }
}

namespace {

c10::Device host_comm_device(c10d::ProcessGroup& group, c10::Device device) {
  if (device.is_cpu()) return device;
  try {
    group.getBackend(c10::DeviceType::CPU);
    return c10::Device(c10::kCPU);
  } catch (const std::exception&) {  // no CPU backend in this group
    return device;
  }
}

}  // namespace

std::string wait_failed(int rank, int size, std::chrono::milliseconds bound, std::chrono::duration<double> waited,
                        const std::string& what, const std::string& error, const std::vector<int>& peers) {
  const std::string first_line = error.substr(0, error.find('\n'));
  if (waited >= bound) return no_answer(rank, size, peers, bound, what) + ": " + first_line;
  std::ostringstream m;
  m << "collmm: rank " << rank << " of " << size << ": the wait in " << what << " failed after " << waited.count()
    << " s (bound " << static_cast<double>(bound.count()) / 1000 << " s): " << first_line
    << " (a peer left: it died, or gave up on this group after a timeout of its own)";
  return m.str();
}

void keep_after_give_up(std::vector<at::Tensor> tensors, std::vector<c10::intrusive_ptr<c10d::Work>> works) {
  static std::mutex mutex;
  static auto& kept =
      *new std::vector<std::pair<std::vector<at::Tensor>, std::vector<c10::intrusive_ptr<c10d::Work>>>>();
  std::lock_guard<std::mutex> lock(mutex);
  kept.emplace_back(std::move(tensors), std::move(works));  // never freed: once per group that failed
}

void bounded_wait(c10d::ProcessGroup& group, c10d::Work& work, const std::string& what, Failure& failure) {
  const std::chrono::milliseconds bound = wait_bound(group);
  const auto t0 = std::chrono::steady_clock::now();
  try {
    if (!work.wait(bound)) throw std::runtime_error("the wait was aborted");
  } catch (const std::exception& e) {  // gloo throws when the wait runs out, or when a peer left
    const std::string why = e.what(), first_line = why.substr(0, why.find('\n'));
    const int rank = group.getRank(), size = group.getSize();
    std::ostringstream out_of_step;
    out_of_step << "collmm: rank " << rank << " of " << size
                << ": the group's collectives are out of step since a wait in " << what << " (bound "
                << static_cast<double>(bound.count()) / 1000 << " s) failed: " << first_line
                << "; make a new group for the ops (dist.new_group)";
    failure.set(out_of_step.str());
    C10_THROW_ERROR(DistBackendError, wait_failed(rank, size, bound, std::chrono::steady_clock::now() - t0, what, why));
  }
}

C10dHostComm::C10dHostComm(c10d::ProcessGroup* group, c10::Device device, std::shared_ptr<StoreChannel> channel,
                           std::shared_ptr<Failure> failure)
    : group_(group),
      device_(host_comm_device(*group_, device)),
      channel_(std::move(channel)),
      failure_(std::move(failure)) {}
int C10dHostComm::proc() const { return group_->getRank(); }
int C10dHostComm::procs() const { return group_->getSize(); }
void C10dHostComm::barrier() { allgather(std::vector<double>{0.0}); }

c10d::AllgatherOptions C10dHostComm::bounded_options() const {
  c10d::AllgatherOptions opts;
  // On gloo the collective ends itself at the bound (an error): a rank that gave up leaves nothing
  // posted past it, so destroy_process_group, which waits for what is posted, returns. NCCL's
  // timeout would end the process (its watchdog): there the group's own stays.
  if (device_.is_cpu()) opts.timeout = wait_bound(*group_);
  return opts;
}

void C10dHostComm::raise_if_failed() const {
  if (const std::string why = failure_->why(); !why.empty()) C10_THROW_ERROR(DistBackendError, why);
}

std::vector<double> C10dHostComm::allgather(const std::vector<double>& mine) {
  raise_if_failed();
  if (channel_) {  // the numbers as their bytes
    const std::string bytes(reinterpret_cast<const char*>(mine.data()), mine.size() * sizeof(double));
    std::vector<double> all;
    const std::vector<std::string> parts = channel_->allgather(bytes, wait_bound(*group_), phase());
    for (size_t q = 0; q < parts.size(); ++q) {
      if (parts[q].size() % sizeof(double) != 0)
        bad_number(static_cast<int>(q), std::to_string(parts[q].size()) + " bytes");
      const size_t at = all.size();
      all.resize(at + parts[q].size() / sizeof(double));
      std::memcpy(all.data() + at, parts[q].data(), parts[q].size());
      check_numbers(static_cast<int>(q), all.data() + at, all.size() - at);
    }
    return all;
  }
  const at::TensorOptions opts = at::TensorOptions().dtype(at::kDouble).device(device_);
  std::vector<at::Tensor> in{at::tensor(c10::ArrayRef<double>(mine), at::kDouble).to(device_)};
  std::vector<std::vector<at::Tensor>> out(1);
  for (int q = 0; q < procs(); ++q) out[0].push_back(at::empty({static_cast<int64_t>(mine.size())}, opts));
  bounded_wait(*group_, *group_->allgather(out, in, bounded_options()), phase(), *failure_);
  std::vector<double> all;
  for (size_t q = 0; q < out[0].size(); ++q) {
    const at::Tensor t = out[0][q].cpu();
    check_numbers(static_cast<int>(q), t.data_ptr<double>(), static_cast<size_t>(t.numel()));
    all.insert(all.end(), t.data_ptr<double>(), t.data_ptr<double>() + t.numel());
  }
  return all;
}

void C10dHostComm::bad_number(int q, const std::string& what) const {
  C10_THROW_ERROR(DistBackendError, "collmm: rank " + std::to_string(proc()) + " of " + std::to_string(procs()) +
                                        ": rank " + std::to_string(q) + " sent " + what + " in " + phase() +
                                        ": not the numbers collmm exchanges (its memory or the channel is corrupt)");
}

void C10dHostComm::check_numbers(int q, const double* numbers, size_t count) const {
  // Every number collmm exchanges (sizes, counts, a fingerprint's halves, times) is finite and
  // exact as a double: within +-2^53, so that a cast to an integer is defined.
  constexpr double kMost = 9007199254740992.0;
  for (size_t i = 0; i < count; ++i)
    if (!std::isfinite(numbers[i]) || std::fabs(numbers[i]) > kMost) {
      std::ostringstream v;
      v << "the number " << numbers[i] << " (at " << i << ")";
      bad_number(q, v.str());
    }
}

std::vector<std::string> C10dHostComm::allgather(const std::string& mine) {
  raise_if_failed();
  if (channel_) return channel_->allgather(mine, wait_bound(*group_), phase());
  const std::vector<double> lengths = allgather(std::vector<double>{static_cast<double>(mine.size())});
  for (size_t q = 0; q < lengths.size(); ++q)
    if (lengths[q] < 0 || lengths[q] > static_cast<double>(1 << 30) || lengths[q] != std::floor(lengths[q]))
      bad_number(static_cast<int>(q), "a string length of " + std::to_string(lengths[q]));
  const int64_t most = static_cast<int64_t>(*std::max_element(lengths.begin(), lengths.end()));
  at::Tensor padded = at::zeros({std::max<int64_t>(most, 1)}, at::kByte);
  std::memcpy(padded.data_ptr(), mine.data(), mine.size());
  std::vector<at::Tensor> in{padded.to(device_)};
  std::vector<std::vector<at::Tensor>> out(1);
  for (int q = 0; q < procs(); ++q) out[0].push_back(at::empty({std::max<int64_t>(most, 1)}, in[0].options()));
  bounded_wait(*group_, *group_->allgather(out, in, bounded_options()), phase(), *failure_);
  std::vector<std::string> all;
  for (size_t q = 0; q < out[0].size(); ++q) {
    const at::Tensor t = out[0][q].cpu();
    all.emplace_back(static_cast<const char*>(t.data_ptr()), static_cast<size_t>(lengths[q]));
  }
  return all;
}

void C10dHostComm::abort(int code) {
  (void)code;
  std::abort();
}

}  // namespace collmm::torch_ext
