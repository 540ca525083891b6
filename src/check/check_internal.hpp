// check_internal.hpp: what the parts of the plan checker share: step labels for messages, the
// buffer rows each step reads and writes, the pairing of sends with receives and of collectives,
// and the symbolic data state that the simulation drives.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "collmm/plan.hpp"
#include "peer_traffic.hpp"

namespace collmm::check {

using Errors = std::vector<std::string>;

// "rank 1 step 4 (lane 0 sendrecv step 1 ...)"
std::string where(const Plan&, int step);

// Rows of one buffer that a step reads or writes (B, read whole by every GEMM, is left out).
struct Access {
  Slice slice;
  bool write = false;
};
std::vector<Access> accesses(const Step&);
bool overlap(const Slice&, const Slice&);

// structure.cpp: per-step shapes and bounds, and the ranks agreeing on the problem. Returns false
// when a later check could not run safely (a slice outside its buffer, a bad wait, ...).
bool check_structure(const std::vector<Plan>&, Errors&);

// matching.cpp: the k-th send r->q paired with the k-th receive on q from r, and every rank's
// k-th collective with the others'. Sizes and agreement are checked; what is left unpaired is an
// error (and will also stall the simulation).
struct TransferRef {
  int rank = -1, step = -1, index = -1;  // index into the step's sends or recvs
};
struct Pair {
  TransferRef send, recv;
};
struct Matching {
  std::vector<Pair> pairs;
  // [rank][step][index] -> index into pairs, -1 where unpaired.
  std::vector<std::vector<std::vector<int>>> send_pair, recv_pair;
  // [rank] -> the collective steps in list order; [rank][step] -> its ordinal k, or -1.
  std::vector<std::vector<int>> collectives, collective_ordinal;
  size_t common_collectives = 0;  // the k every rank has (the rest are unmatched)
};
Matching match_comm(const std::vector<Plan>&, Errors&);

// races.cpp: unordered steps of one rank touching the same rows, one of them writing.
void check_races(const std::vector<Plan>&, Errors&);

// dataflow.cpp: per buffer row, the multiset of terms it holds (Term: peer_traffic.hpp).
class DataFlow {
 public:
  explicit DataFlow(const std::vector<Plan>& plans);
  void run_local(int rank, int step);  // gemm, copy, add
  void transfer(const Pair&);
  void collective(size_t k, const Matching&);  // every rank's k-th collective at once
  void check_final(Errors&) const;
  void check_rank(int rank, Errors&) const;  // check_final for one rank
  // Replaying one rank alone: its receives get these rows instead of a peer's.
  void receive(int rank, int step, const Slice& into, std::vector<Terms> rows) {
    write(rank, step, into, std::move(rows), false);
  }
  std::vector<Terms> read(int rank, const Slice&) const;
  // Called with every transfer as it happens, and the rows it carries.
  std::function<void(const Pair&, const std::vector<Terms>&)> on_transfer;

 private:
  struct Buffer {
    std::vector<Terms> rows;
    std::vector<int> writes;       // how many steps wrote each row
    std::vector<int> last_writer;  // the step that last wrote it, -1: none
  };
  void write(int rank, int step, const Slice&, std::vector<Terms> value, bool accumulate);
  std::string term_str(const Term&) const;
  void check_rows(int rank, int buf, const std::vector<Terms>& expected, Errors&) const;

  const std::vector<Plan>& plans_;
  std::vector<std::vector<Buffer>> buffers_;  // [rank][buffer]
};

// symbolic.cpp (run_symbolic): runs every rank's steps under the execution rules of plan.hpp, driving the data
// state; returns false (and reports each rank's stuck steps) when it stalls.
bool run_symbolic(const std::vector<Plan>&, const Matching&, DataFlow&, Errors&);

}  // namespace collmm::check
