// peer_traffic.hpp: what one rank of a job receives from its peers and sends to them, row by row,
// in terms of the job's inputs, as the plan checker's dataflow sees it. A transport that plays the
// other ranks (the host transport: one GPU rank, its peers in host memory) stages what this tells
// it the rank receives, and checks what the rank sends against it.
//
// Terms: a row holds a multiset of terms; each is an input row of A or a product of one with some
// rank's B:
//   ag_gemm: {A row i} is row i of the global A [M, K];
//   gemm_rs: {A_q row i} is row i of rank q's A_q (columns block q of A), and the product
//            {A_q row i @ B_q} is rank q's partial of output row i; a running sum holds several.
#pragma once

#include <string>
#include <vector>

#include "collmm/plan.hpp"

namespace collmm::check {

struct Term {
  int kind;     // 0: an input row of A, 1: a product of one with B, 2: a product of a product
  int rank;     // the rank whose A holds the row (ag_gemm: its row block; gemm_rs: its columns)
  int64_t row;  // global row
  int b_rank;   // products: the rank whose B_r multiplied it; -1 for inputs
  bool operator<(const Term& o) const;
  bool operator==(const Term& o) const;
};
using Terms = std::vector<Term>;  // sorted

// One transfer of a sendrecv step of this rank.
struct LinkTransfer {
  int step = -1;   // the step of this rank's plan
  int index = -1;  // into that step's sends (sent) or recvs (received)
  int peer = -1;
  int peer_step = -1;       // the step of the peer's plan that holds the other side
  Slice slice;              // the rows on this rank: what is sent, or where received rows land
  std::vector<Terms> rows;  // what each row carries
};

struct PeerTraffic {
  std::vector<LinkTransfer> received, sent;  // in the order the job's dataflow moves them
};

// plans[q] is rank q's plan; collectives must have been lowered (lower_collectives) so that every
// transfer is a sendrecv. Throws std::runtime_error when the plans do not check.
PeerTraffic peer_traffic(const std::vector<Plan>& plans, int rank);

// Rank `rank`'s plan run alone, in list order, with every receive filled from traffic.received.
// Returns the sentences describing where what it sends differs from traffic.sent, or where its
// outputs are not what the job's outputs must be (none: staging this traffic reproduces the job).
std::vector<std::string> replay_alone(const std::vector<Plan>& plans, int rank, const PeerTraffic& traffic);

}  // namespace collmm::check
