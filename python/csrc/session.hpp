// session.hpp: what the ops keep per process group and device: an executor on that group (the
// ATen executor; for CPU tensors after set_cpu_executor("host"), the host executor: OpenBLAS GEMMs
// on lane threads with the group as its Transport), the plan
// last prepared on it, and the algorithms that "auto" chose per shape. The plan is prepared again only when the
// problem, options or dtype change; every call then binds the caller's tensors to the plan's buffers and runs it.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include "collmm/executor.hpp"
#include "collmm/measured_choice.hpp"
#include "collmm/plan.hpp"
#include "nccl_comm.hpp"
#include "store_channel.hpp"

namespace collmm::torch_ext {

enum class ExecutorKind { host, aten };
// How the ops agree: over the group's Store, through shared memory set up over it (every rank on
// one host), over the group's own collectives, or (auto) over the Store, in shared memory where the
// ranks share a host, where the group's collectives would run on the device (an NCCL-only group),
// else the group.
enum class Channel { automatic, store, shm, group };

// A plan made and prepared on an executor of its own, kept for the next call of that shape.
struct Prepared {
  std::unique_ptr<Executor> executor;
  Plan plan;
};

// A call's inputs as numbers: every property of its tensors and arguments that its checks, its
// agreement's keys and numbers, and its plan depend on (the op, sizes, strides, dtype, device,
// dims, algo, sizes given). Two calls with the same CallKey check, agree and plan alike.
using CallKey = std::vector<int64_t>;
// What a call with that key settled before data moved: every rank's agreed numbers, the plan, and
// what this rank sent to agree (the call's name, keys and numbers; their fingerprint).
struct CallMemo {
  std::vector<std::vector<double>> all;
  Prepared* prepared = nullptr;
  std::string call, print;
  std::vector<std::pair<std::string, std::string>> keys;
  std::vector<double> mine;
  std::string auto_report;  // with algo "auto": its decision as last_auto() reports it
};
using Agreed = std::vector<std::vector<double>>;

class Session {
 public:
  // `exchanges`: the group's failure of its collectives (bounded_wait), shared by every session on
  // the group.
  Session(c10d::ProcessGroup* group, c10::Device device, ExecutorKind kind, Channel channel, const std::string& name,
          std::shared_ptr<Failure> exchanges);

  HostComm& host() { return *host_; }  // the ops' own agreement checks
  int rank() const { return rank_; }
  int world() const { return world_; }

  // The ops' agreement for one call named `call` (agree_and_gather: any rank's `misfit`, the keys
  // every rank must share, each rank's `mine`), remembered per fingerprint (keys and mine). A
  // fingerprint seen before skips the exchange under CUDA graph capture, and on every call after
  // set_check("first"); under capture an unknown one throws UsageError (capture forbids the
  // first call's work). Returns every rank's `mine`.
  std::vector<std::vector<double>> agree(const std::string& call, const std::string& misfit,
                                         const std::vector<std::pair<std::string, std::string>>& keys,
                                         const std::vector<double>& mine);
  // The memo of a call with this key where the call may skip its checks, agreement and planning;
  // else null: the call does all of it, then remember()s it.
  // - Under check "first" or CUDA graph capture (a fingerprint agreed before exchanges nothing): the
  //   memo of a call with this key that ran before. Every memo's fingerprint is among the agreed
  //   ones, so whether a call exchanges is decided as agree() decides it, the same on every rank.
  // - Under check "every", where a call with this key ran before: one exchange of what that call
  //   sent (the same as the checks would send again: the key fixes them), so the per-call cost is
  //   the exchange alone. The memo where every rank's numbers came back as then; else null with the
  //   exchange's result in `agreed`, for the call to plan from instead of exchanging again. Any
  //   rank's mismatch throws UsageError on every rank, as agree() does.
  const CallMemo* recall(const CallKey& key, std::optional<Agreed>& agreed);
  // Records the call (its agreement as the last agree() or recall() exchanged it).
  void remember(const CallKey& key, const std::vector<std::vector<double>>& all, Prepared& prepared);
  // Runs a prepared plan on the tensors bound to it; while collmm.trace is on, with step times,
  // every rank's steps gathered over the group and recorded (trace.hpp). A group whose collectives
  // are out of step raises that first, whatever the executor (a call that exchanged nothing under
  // check "first" would run into it). `rows`: the caller's M (the plan's may be padded), for the
  // trace's table. `bound`: the tensors bound to the plan's buffers, kept (keep_after_give_up)
  // where the run gave up transfers that may still write into them.
  void run(Prepared& prepared, Dtype dtype, int64_t rows, const std::vector<at::Tensor>& bound);
  // Whether the current stream of this session's device records a CUDA graph now.
  bool capturing() const;

  // The plan options for `algo` ("auto": the measured choice, collmm/measured_choice.hpp: the
  // cost model's best few candidates for this problem and dtype, ranked with the cpu-2core profile
  // on CPU and h200-nvlink on CUDA, timed on this device on the shape's first call, the fastest
  // kept per shape; else the entry's algorithm and options, the rest at their defaults:
  // entry_options, algo_entries.hpp).
  PlanOptions options(const Problem& problem, Dtype dtype, const std::string& algo);
  // This rank's plan for (problem, options, dtype) on an executor prepared for it: made on first
  // use (collective: the executor checks that every rank prepares the same problem), then reused,
  // so a model whose layers alternate shapes (forward, backward) prepares each shape once. At most
  // kMaxPrepared are kept.
  Prepared& prepare(const Problem& problem, const PlanOptions& options, Dtype dtype);

 private:
  static constexpr size_t kMaxPrepared = 16;
  static constexpr size_t kMaxKnown = 256;
  std::unique_ptr<Executor> make_executor();
  // This rank's median time of `options`' plan on an executor of its own, on random inputs of the
  // problem's shapes on this device (the device synchronized after each run): auto's TimeCandidate.
  double time_candidate(const Problem& problem, const PlanOptions& options, Dtype dtype, int warmup, int iters);

  c10d::ProcessGroup* group_;  // alive during every call (session_for holds it)
  c10::Device device_;
  ExecutorKind kind_;
  std::shared_ptr<GroupComm> comm_ = std::make_shared<GroupComm>();  // its executors' (nccl_comm.hpp)
  std::shared_ptr<Failure> exchanges_;                               // the group's, before the host comms that leave it
  std::shared_ptr<StoreChannel> channel_;                            // null: the group's collectives
  std::unique_ptr<HostComm> host_;
  int rank_ = 0, world_ = 1;
  std::map<std::string, Prepared> prepared_;
  AutoChooser auto_;
  std::map<std::string, std::vector<std::vector<double>>> known_;  // agreed fingerprints, their gathered numbers
  std::map<CallKey, CallMemo> memos_;  // cleared with known_ and whenever a prepared plan is dropped
  CallMemo sent_;                      // what the last exchange sent (call, print, keys, mine)
  std::string auto_report_;            // auto's decision for the call being made ("" for another algo)
  // The exchange's result `all` for fingerprint `print`, noted as agreed.
  void note_agreed(const std::string& print, const Agreed& all);
};

// One op call's agreement, for the ops: agree_and_gather(Agreement, ...) is Session::agree.
struct Agreement {
  Session& session;
  std::string call;  // the op's name, in a timeout's message
};
inline std::vector<std::vector<double>> agree_and_gather(const Agreement& a, const std::string& misfit,
                                                         const std::vector<std::pair<std::string, std::string>>& keys,
                                                         const std::vector<double>& mine) {
  return a.session.agree(a.call, misfit, keys, mine);
}

// The session of the group named `group_name` (c10d::resolve_process_group) for tensors on
// `device`, made on first use. Holds a lock for the call: one op at a time per process.
// The session keeps no reference to its group between calls (a group the user destroys is
// destroyed, its threads joined); the lock holds one for the call. The sessions of destroyed
// groups are dropped at the next call (their executors, their channel's shared-memory mapping).
struct SessionLock {
  std::unique_lock<std::mutex> lock;
  c10::intrusive_ptr<c10d::ProcessGroup> group;
  Session& session;
};
SessionLock session_for(const std::string& group_name, c10::Device device);

// Which executor CPU tensors get from now on (sessions made later): "aten" (the default) or "host".
void set_cpu_executor(const std::string& kind);
// How sessions made from now on agree: "auto" (the default), "shm", "store" or "group" (Channel).
void set_channel(const std::string& channel);
// "every" (the default: every call agrees) or "first" (a call whose fingerprint this session agreed
// before trusts it and exchanges nothing, as torch.ops.symm_mem trusts its callers).
void set_check(const std::string& check);
// The bound of every wait for other ranks (agreement) and the host executor's run watchdog (plans
// prepared later), in seconds; 0: the group's own timeout for waits and 300 s for the watchdog.
void set_timeout(double seconds);
double timeout_seconds();  // 0: not set

}  // namespace collmm::torch_ext
