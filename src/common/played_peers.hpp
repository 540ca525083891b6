// played_peers.hpp: what a backend offers when it plays the peers of its ranks (cuda
// --transport host): it makes what they send from the job's inputs, and checks what its ranks
// send them. Reached through Executor::played_peers() (null where the peers are real processes
// or emulated ranks).
#pragma once

#include <cstdint>

#include "data.hpp"

namespace collmm {

class PlayedPeers {
 public:
  virtual ~PlayedPeers() = default;
  // After prepare(): the inputs are the bench's seeded ones (data.hpp); stages every receive.
  virtual void stage(uint64_t seed) = 0;
  // After a run: what this process's ranks sent, against what their receivers needed.
  virtual Comparison check_sent() = 0;
};

}  // namespace collmm
