// send_queues.cpp: the k-th send from r to q meets the k-th receive on q from r (send_queues.hpp).
#include "send_queues.hpp"

#include <algorithm>

namespace collmm {

void SendQueues::send(int from, int to, int id) {
  Link& l = links_[key(from, to)];
  l.from = from, l.to = to;
  l.sends.push_back(id);
}

SendQueues::Match SendQueues::receive(int from, int to) {
  Link& l = links_[key(from, to)];
  l.from = from, l.to = to;
  const size_t k = l.received++;
  return {k < l.sends.size() ? l.sends[k] : -1, k};
}

std::vector<SendQueues::Link> SendQueues::links() const {
  std::vector<Link> all;
  for (const auto& [k, l] : links_)
    if (!l.sends.empty()) all.push_back(l);
  std::sort(all.begin(), all.end(), [](const Link& a, const Link& b) { return key(a.from, a.to) < key(b.from, b.to); });
  return all;
}

}  // namespace collmm
