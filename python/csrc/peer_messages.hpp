// peer_messages.hpp: point-to-point messages over a c10d group, tagged per pair of ranks, as both
// the c10d transport (CPU tensors) and the ATen executor post a plan step's sends and receives.
#pragma once

#include <map>
#include <vector>

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

namespace collmm::torch_ext {

// Tags of point-to-point messages: the k-th message to a peer carries tag k, so the k-th send to
// q meets q's k-th receive from this rank.
class PeerTags {
 public:
  int next_send(int peer) { return sent_[peer]++; }
  int next_recv(int peer) { return received_[peer]++; }

 private:
  std::map<int, int> sent_, received_;
};

// One message: the peer it goes to or comes from, and the tensor it is sent from or received into.
struct PeerMessage {
  int peer;
  at::Tensor tensor;
};

// Posts a receive of every message of `recvs`, then a send of every one of `sends`
// (ProcessGroup::recv/send, each with its pair's next tag). Returns their Works in that order.
inline std::vector<c10::intrusive_ptr<c10d::Work>> post_messages(c10d::ProcessGroup& group, PeerTags& tags,
                                                                 const std::vector<PeerMessage>& recvs,
                                                                 const std::vector<PeerMessage>& sends) {
  std::vector<c10::intrusive_ptr<c10d::Work>> works;
  for (const PeerMessage& m : recvs) {
    std::vector<at::Tensor> t{m.tensor};
    works.push_back(group.recv(t, m.peer, tags.next_recv(m.peer)));
  }
  for (const PeerMessage& m : sends) {
    std::vector<at::Tensor> t{m.tensor};
    works.push_back(group.send(t, m.peer, tags.next_send(m.peer)));
  }
  return works;
}

}  // namespace collmm::torch_ext
