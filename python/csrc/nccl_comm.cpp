// nccl_comm.cpp: the group's NCCL communicator called directly (nccl_comm.hpp).
#include "nccl_comm.hpp"

#include <dlfcn.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <typeinfo>

#include <c10/core/DeviceGuard.h>
#include <c10/util/Exception.h>

#include "c10d_transport.hpp"  // wait_bound
#include "poll.hpp"

#if defined(COLLMM_NCCL_HEADERS)
#include <nccl.h>
#endif

namespace collmm::torch_ext {
namespace {
std::atomic<bool> g_direct{true};
}  // namespace

void set_comm(const std::string& path) {
  if (path != "auto" && path != "c10d") throw UsageError("comm must be auto or c10d (got " + path + ")");
  g_direct = path == "auto";
}
bool direct_comm_allowed() { return g_direct; }

#if defined(COLLMM_NCCL_HEADERS)
namespace {

// The NCCL functions torch runs (nccl_lib below), never a library of our own: the communicator must
// meet the code that made it.
struct NcclLib {
  decltype(&ncclGroupStart) group_start = nullptr;
  decltype(&ncclGroupEnd) group_end = nullptr;
  decltype(&ncclSend) send = nullptr;
  decltype(&ncclRecv) recv = nullptr;
  decltype(&ncclAllGather) all_gather = nullptr;
  decltype(&ncclReduceScatter) reduce_scatter = nullptr;
  decltype(&ncclCommGetAsyncError) async_error = nullptr;
  decltype(&ncclGetErrorString) error_string = nullptr;
  decltype(&ncclGetLastError) last_error = nullptr;
  decltype(&ncclGetVersion) version = nullptr;
};

template <class F>
bool find(void* lib, const char* name, F& f) {
  f = reinterpret_cast<F>(dlsym(lib, name));
  return f != nullptr;
}

// The NCCL that torch's libtorch_cuda.so runs: each function looked up through its handle, which
// searches it and then the libraries it needs. That finds libnccl.so.2 where torch links NCCL as a
// library, torch's own copy where it links NCCL in and exports it; neither: null.
const NcclLib* nccl_lib() {
  static const NcclLib* lib = []() -> const NcclLib* {
    void* so = dlopen("libtorch_cuda.so", RTLD_NOW | RTLD_NOLOAD);
    if (!so) return nullptr;
    static NcclLib l;
    const bool all = find(so, "ncclGroupStart", l.group_start) && find(so, "ncclGroupEnd", l.group_end) &&
                     find(so, "ncclSend", l.send) && find(so, "ncclRecv", l.recv) &&
                     find(so, "ncclAllGather", l.all_gather) && find(so, "ncclReduceScatter", l.reduce_scatter) &&
                     find(so, "ncclCommGetAsyncError", l.async_error) &&
                     find(so, "ncclGetErrorString", l.error_string) && find(so, "ncclGetLastError", l.last_error) &&
                     find(so, "ncclGetVersion", l.version);
    int version = 0;
    // The functions above as this header declares them: NCCL 2.x from 2.13 on (ncclGetLastError).
    if (!all || l.version(&version) != ncclSuccess || version < 21300 || version >= 30000) return nullptr;
    return &l;
  }();
  return lib;
}

// Two members of c10d::ProcessGroupNCCL, from the libtorch_cuda.so this process loaded (called on a
// ProcessGroupNCCL only). isInitialized(): its communicators made (not virtual in every torch).
// getCommPtr(): the current device's communicator as an integer; it reads a missing one through a
// null pointer, hence isInitialized first.
struct PgNccl {
  bool (*is_initialized)(c10d::Backend*) = nullptr;
  int64_t (*comm_ptr)(c10d::Backend*) = nullptr;
};
const PgNccl* pg_nccl() {
  static const PgNccl* pg = []() -> const PgNccl* {
    void* so = dlopen("libtorch_cuda.so", RTLD_NOW | RTLD_NOLOAD);
    static PgNccl f;
    if (!so || !find(so, "_ZN4c10d16ProcessGroupNCCL13isInitializedEv", f.is_initialized) ||
        !find(so, "_ZN4c10d16ProcessGroupNCCL10getCommPtrEv", f.comm_ptr))
      return nullptr;
    return &f;
  }();
  return pg;
}

ncclDataType_t nccl_type(Dtype d) {
  switch (d) {
    case Dtype::f64: return ncclFloat64;
    case Dtype::f32: return ncclFloat32;
    case Dtype::f16: return ncclFloat16;
    case Dtype::bf16: return ncclBfloat16;
    default: throw UsageError("collmm: no NCCL type for " + to_string(d) + " elements");
  }
}

}  // namespace

std::unique_ptr<NcclComm> NcclComm::of(c10d::ProcessGroup& group, c10::Device device) {
  if (!device.is_cuda() || !direct_comm_allowed() || !nccl_lib() || !pg_nccl()) return nullptr;
  try {
    c10::intrusive_ptr<c10d::Backend> backend = group.getBackend(c10::DeviceType::CUDA);
    // ProcessGroupNCCL itself: not a wrapper that answers "nccl" too (ProcessGroupWrapper, under
    // TORCH_DISTRIBUTED_DEBUG=DETAIL), whose fields are not ProcessGroupNCCL's.
    if (!backend) return nullptr;
    const c10d::Backend& held = *backend;  // typeid of a plain reference: no call inside typeid
    if (std::strcmp(typeid(held).name(), "N4c10d16ProcessGroupNCCLE") != 0 || !pg_nccl()->is_initialized(backend.get()))
      return nullptr;
    c10::DeviceGuard guard(device);  // getCommPtr gives the current device's communicator
    void* comm = reinterpret_cast<void*>(pg_nccl()->comm_ptr(backend.get()));
    if (!comm) return nullptr;
    return std::unique_ptr<NcclComm>(
        new NcclComm(comm, group.getRank(), wait_bound(group), c10::weak_intrusive_ptr<c10d::Backend>(backend)));
  } catch (const std::exception&) {  // no CUDA backend; a communicator c10d found aborted
    return nullptr;
  }
}

void NcclComm::check(int result, const char* what) const {
  const NcclLib& nccl = *nccl_lib();
  auto comm = static_cast<ncclComm_t>(comm_);
  ncclResult_t r = static_cast<ncclResult_t>(result);
  // A non-blocking communicator: the call goes on in NCCL's threads.
  const bool settled = poll_until(
      [&] {
        if (r != ncclInProgress) return true;
        return nccl.async_error(comm, &r) != ncclSuccess || r != ncclInProgress;
      },
      std::chrono::steady_clock::now() + bound_, kDevicePace);
  if (!settled)
    C10_THROW_ERROR(DistBackendError, std::string("collmm: rank ") + std::to_string(rank_) + ": NCCL's " + what +
                                          " still in progress after " + std::to_string(bound_.count()) + " ms");
  if (r == ncclSuccess) return;
  const char* last = nccl.last_error(comm);
  C10_THROW_ERROR(DistBackendError, std::string("collmm: rank ") + std::to_string(rank_) + ": NCCL's " + what +
                                        " failed: " + nccl.error_string(r) +
                                        (last && *last ? std::string(" (") + last + ")" : ""));
}

void NcclComm::sendrecv(const std::vector<Message>& recvs, const std::vector<Message>& sends, void* stream) const {
  const NcclLib& nccl = *nccl_lib();
  auto comm = static_cast<ncclComm_t>(comm_);
  auto s = static_cast<cudaStream_t>(stream);
  check(nccl.group_start(), "ncclGroupStart");
  // A send or receive that fails still ends the group: else every later NCCL call of this thread
  // (c10d's too) would join a group that never ends.
  struct GroupEnd {
    const NcclLib& nccl;
    bool open = true;
    ~GroupEnd() {
      if (open) nccl.group_end();
    }
  } group{nccl};
  for (const Message& m : recvs) check(nccl.recv(m.data, m.bytes, ncclUint8, m.peer, comm, s), "ncclRecv");
  for (const Message& m : sends) check(nccl.send(m.data, m.bytes, ncclUint8, m.peer, comm, s), "ncclSend");
  group.open = false;
  check(nccl.group_end(), "ncclGroupEnd (a step's sends and receives)");
}

void NcclComm::all_gather(const void* mine, void* all, size_t bytes_each, void* stream) const {
  check(nccl_lib()->all_gather(mine, all, bytes_each, ncclUint8, static_cast<ncclComm_t>(comm_),
                               static_cast<cudaStream_t>(stream)),
        "ncclAllGather");
}

void NcclComm::reduce_scatter(const void* all, void* mine, size_t count_each, Dtype dtype, void* stream) const {
  check(nccl_lib()->reduce_scatter(all, mine, count_each, nccl_type(dtype), ncclSum, static_cast<ncclComm_t>(comm_),
                                   static_cast<cudaStream_t>(stream)),
        "ncclReduceScatter");
}

#else  // built without NCCL's header: always through c10d

std::unique_ptr<NcclComm> NcclComm::of(c10d::ProcessGroup&, c10::Device) { return nullptr; }
void NcclComm::check(int, const char*) const {}
void NcclComm::sendrecv(const std::vector<Message>&, const std::vector<Message>&, void*) const {}
void NcclComm::all_gather(const void*, void*, size_t, void*) const {}
void NcclComm::reduce_scatter(const void*, void*, size_t, Dtype, void*) const {}

#endif

}  // namespace collmm::torch_ext
