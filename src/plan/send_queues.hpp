// send_queues.hpp (internal to collmm): the rule that pairs point-to-point transfers, for
// everything that walks the plans of several ranks together (the plan checker, the simulator, the
// cuda local transport). The k-th send from rank r to rank q meets the k-th receive on q from r,
// k counted in list order. Each link (r, q) queues its sends; each receive takes the next one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

namespace collmm {

class SendQueues {
 public:
  // The next send on the link from -> to; `id` is the caller's name for it.
  void send(int from, int to, int id);

  // The next receive on `to` from `from`: the id of the send it meets (-1: none left) and its
  // number k among the receives of the link.
  struct Match {
    int send = -1;
    size_t k = 0;
  };
  Match receive(int from, int to);

  // Every link that has sends, ascending by (from, to): its send ids in order and how many
  // receives came (those past sends.size() met nothing).
  struct Link {
    int from = 0, to = 0;
    std::vector<int> sends;
    size_t received = 0;
  };
  std::vector<Link> links() const;

 private:
  static uint64_t key(int from, int to) { return (uint64_t(uint32_t(from)) << 32) | uint32_t(to); }
  std::unordered_map<uint64_t, Link> links_;
};

}  // namespace collmm
