// session.hpp: what the ops keep per process group and device (Session). The group's links (a host
// comm for the ops' own exchanges, over the channel set_channel picked; the group's failure). The
// call memos and agreement (call_memo.hpp), the prepared plans (plan_cache.hpp), and the run of a
// plan. session_for finds a session and holds it for one call; the settings sessions read are here
// (set_check is call_memo.hpp's).
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include "call_memo.hpp"
#include "nccl_comm.hpp"
#include "plan_cache.hpp"
#include "store_channel.hpp"
#include "torch_util.hpp"

namespace collmm::torch_ext {

// How the ops agree: over the group's Store, through shared memory set up over it (every rank on
// one host), or over the group's own collectives. automatic: where the group's collectives would
// run on the device (an NCCL-only group), over the Store, in shared memory where the ranks share a
// host; else the group.
enum class Channel { automatic, store, shm, group };

class Session {
 public:
  // `exchanges`: the group's failure of its collectives (bounded_wait), shared by every session on
  // the group.
  Session(c10d::ProcessGroup* group, c10::Device device, ExecutorKind kind, Channel channel, const std::string& name,
          std::shared_ptr<Failure> exchanges);

  int rank() const { return rank_; }
  int world() const { return world_; }
  // check and agree: what calls settled (recall, agree, remember).
  CallMemos& calls() { return calls_; }
  // plan: PlanCache::options, its decision kept for the call's memo.
  PlanOptions options(const Problem& problem, Dtype dtype, const std::string& algo) {
    const PlanOptions o = plans_.options(problem, dtype, algo);
    calls_.set_auto_report(plans_.auto_report());
    return o;
  }
  // plan: PlanCache::prepare (under capture, only a plan kept).
  Prepared& prepare(const Problem& problem, const PlanOptions& options, Dtype dtype) {
    return plans_.prepare(problem, options, dtype, capturing(device_));
  }
  // run: a prepared plan on the tensors bound to it; while collmm.trace is on, with step times,
  // every rank's steps gathered over the group and recorded (trace.hpp). A group whose collectives
  // are out of step raises that first, whatever the executor (a call that exchanged nothing under
  // check "first" would run into it). `rows`: the caller's M (the plan's may be padded), for the
  // trace's table. `bound`: the tensors bound to the plan's buffers, kept (keep_after_give_up)
  // where the run gave up transfers that may still write into them.
  void run(Prepared& prepared, Dtype dtype, int64_t rows, const std::vector<at::Tensor>& bound);

 private:
  // An executor on the group for one plan (collective when prepared: it checks that every rank
  // prepares the same plan).
  std::unique_ptr<Executor> make_executor();

  c10d::ProcessGroup* group_;  // alive during every call (session_for holds it)
  c10::Device device_;
  ExecutorKind kind_;
  std::shared_ptr<GroupComm> comm_ = std::make_shared<GroupComm>();  // its executors' (nccl_comm.hpp)
  std::shared_ptr<Failure> exchanges_;                               // the group's, before the host comms that leave it
  std::shared_ptr<StoreChannel> channel_;                            // null: the group's collectives
  std::unique_ptr<HostComm> host_;                                   // the ops' own exchanges
  int rank_ = 0, world_ = 1;
  CallMemos calls_;
  PlanCache plans_;  // after calls_: dropping a plan forgets the memos
};

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
// The bound of every wait for other ranks (agreement) and the host executor's run watchdog (plans
// prepared later), in seconds; 0: the group's own timeout for waits and 300 s for the watchdog.
void set_timeout(double seconds);
double timeout_seconds();  // 0: not set

}  // namespace collmm::torch_ext
