// sim_engine.hpp (private to src/sim): the event-driven engine behind collmm/sim.hpp. Plans are
// added one rank at a time and compacted (a plan's step vectors are not kept), then matched
// (messages, collectives), given their host issue times (sim_host.cpp) and run. See sim.hpp for
// the rules it follows.
#pragma once

#include <cstdint>
#include <queue>
#include <vector>

#include "collmm/rank_run.hpp"
#include "collmm/step_filter.hpp"
#include "collmm/timeline.hpp"
#include "cost_model.hpp"

namespace collmm::sim {

struct SimStep {
  StepKind kind = StepKind::gemm;
  int lane = 0;
  int index = -1, chunk = -1;
  int waits_begin = 0, waits_end = 0;  // into SimRank::waits
  int msgs_begin = 0, msgs_end = 0;    // into SimRank::msgs (sendrecv: its messages' ids)
  int coll = -1;                       // collective id
  int pending = 0;                     // sendrecv: messages not yet done
  int share_send[2] = {0, 0};          // sendrecv: sends / receives per class (0 intra, 1 inter)
  int share_recv[2] = {0, 0};
  double work_us = 0;    // gemm, copy, add: nominal time
  double issued_us = 0;  // when the host has enqueued it (0: host issue not modelled)
  bool skip = false;     // left out by the StepFilter: takes no time
  bool wake = false;     // a wake-up is pending at issued_us
  bool started = false, done = false;
};

struct SimRank {
  std::vector<SimStep> steps;
  std::vector<int> waits;
  std::vector<int> msgs;
  std::vector<std::vector<int>> lane_steps;  // per lane, its steps in list order
  std::vector<size_t> lane_head;
  std::vector<StepTime> times;
  std::vector<int> active;  // activities touching this rank
  int gemm_running = 0;     // its GEMMs running (they share its rate; the launch-order rule)
  int comm_running = 0;     // its comm activities running that contend for SMs
};

struct SimMessage {
  int src = -1, dst = -1, src_step = -1, dst_step = -1;
  double bytes = 0;
  bool src_posted = false, dst_posted = false;
};

struct Collective {
  StepKind kind = StepKind::allgather;
  double max_part_bytes = 0;
  int posted = 0;
  bool skip = false;
  std::vector<int> steps;  // per rank, its step
};

// Something that takes time: a local step (gemm, copy, add), a message, a collective, or the wait
// of a ready step for the host to issue it (wake: ends at the step's issued_us).
struct Activity {
  enum Type { local, message, collective, wake } type = local;
  int rank = -1, id = -1;  // local, wake: (rank, step); message: id; collective: id
  bool gemm = false;       // local gemm
  bool counted = false;    // counts in the contention state
  double remaining = 0, speed = 1, last = 0;
  uint32_t version = 0;
  bool finished = false;
};

class Engine {
 public:
  Engine(Dtype dtype, const Profile& profile, StepFilter filter, int world);
  void add_rank(const Plan& plan);  // ranks in order 0..world-1
  void run();                       // matches, then simulates; throws on mismatch or deadlock
  std::vector<RankRun> rank_runs() const;
  Timeline timeline(Op op, Algo algo) const;

 private:
  struct Event {
    double t;
    uint64_t seq;
    int act;
    uint32_t version;
    bool operator>(const Event& o) const { return t != o.t ? t > o.t : seq > o.seq; }
  };

  void match_messages();
  void issue_times();  // sim_host.cpp: every step's issued_us from Profile::host
  void try_start(int r, double t);
  void start(int r, int s, double t);
  void start_activity(Activity a, double t);
  void start_collective(int id, double t);
  void finish(int act, double t);
  void step_done(int r, int s, double t);
  void wake_at(int r, int s, double t);  // rank r's ready step s comes back at its issued_us
  void set_counts(const Activity& a, int delta, double t);
  double speed_of(const Activity& a) const;
  void rerate(int act, double t);
  void rerate_rank(int r, double t);
  void rerate_all(double t);
  void schedule(int act);
  bool sm_comm(StepKind k) const;

  Dtype dtype_;
  Profile prof_;
  StepFilter filter_;
  int world_;
  std::vector<SimRank> ranks_;
  std::vector<SimMessage> msgs_;
  std::vector<Collective> colls_;
  // Per rank, in order: (peer, step, slot in SimRank::msgs, bytes) of each send and receive.
  struct End {
    int peer, step, slot;
    double bytes;
  };
  std::vector<std::vector<End>> sends_, recvs_;
  std::vector<Activity> acts_;
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> heap_;
  uint64_t seq_ = 0;
  int gemm_total_ = 0, colls_running_ = 0;
  std::vector<int> active_colls_;
  std::vector<int> touched_, touched_now_;
  std::vector<char> is_touched_;
  std::vector<int> ready_;  // try_start's scratch
};

}  // namespace collmm::sim
