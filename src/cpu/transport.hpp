// transport.hpp: what the host executor needs to move data between ranks: point-to-point groups,
// an allgather and a reduce-scatter of host rows, and a barrier with a deadline. Implemented over
// MPI (mpi_transport.hpp, collmm-bench and the C++ API) and over a c10d ProcessGroup (the PyTorch
// extension, python/csrc/c10d_transport.hpp). Every call happens on the comm lane's thread during a
// run, or on the main thread between runs: never two at once.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "collmm/types.hpp"

namespace collmm::cpu {

// `rows` rows of `row_bytes` bytes each, contiguous, starting at `data`; to or from rank `peer`.
struct Message {
  void* data = nullptr;
  int64_t rows = 0;
  size_t row_bytes = 0;
  int peer = -1;
};

// Where rank q's rows land in an allgather: rows [row, row + rows) of one buffer.
struct RowRange {
  int64_t row = 0, rows = 0;
};

class Transport {
 public:
  virtual ~Transport() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // One group: every receive and every send posted together; returns when all are done. The k-th
  // send to q matches q's k-th receive from this rank.
  virtual void sendrecv(const std::vector<Message>& sends, const std::vector<Message>& recvs) = 0;
  // Rows of `row_bytes` bytes: this rank's `mine_rows` rows at `mine` land in parts[rank] of the
  // buffer starting at `base`, and every rank's rows in its part. `mine` may already be its part.
  virtual void allgather(const void* mine, int64_t mine_rows, unsigned char* base, size_t row_bytes,
                         const std::vector<RowRange>& parts) = 0;
  // Sum over ranks of `dtype` elements: `send` holds counts[0] elements for rank 0, then counts[1]
  // for rank 1, ...; the sum of every rank's part for this rank lands in `recv` (counts[rank]).
  virtual void reduce_scatter(const void* send, void* recv, Dtype dtype, const std::vector<int64_t>& counts) = 0;
  // A barrier that gives up (false) when the deadline passes first.
  virtual bool barrier_until(std::chrono::steady_clock::time_point deadline) = 0;
};

}  // namespace collmm::cpu
