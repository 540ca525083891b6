// mpi_transport.hpp: the cpu backend's transport: point-to-point groups, allgather and
// reduce-scatter over MPI on a communicator of its own (a duplicate of MPI_COMM_WORLD, so the front
// end's HostComm traffic never matches ours). Every call happens on the comm lane's thread during a
// run, or on the main thread between runs (MPI_THREAD_SERIALIZED is enough).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <vector>

#include <mpi.h>

#include "collmm/types.hpp"
#include "transport.hpp"

namespace collmm::cpu {

class MpiTransport : public Transport {
 public:
  MpiTransport();  // MPI must be initialized (make_mpi_host_comm)
  ~MpiTransport() override;
  MpiTransport(const MpiTransport&) = delete;
  MpiTransport& operator=(const MpiTransport&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  // One group: every receive and every send posted (MPI_Irecv, MPI_Isend, in list order), then
  // waited for with MPI_Testall, yielding the core between tests. The k-th send to q matches q's
  // k-th receive from this rank. The collectives are the library's blocking ones: its own
  // algorithms, measured as they are (the non-blocking ones were 1.7-2.4x slower in Open MPI 4.1).
  void sendrecv(const std::vector<Message>& sends, const std::vector<Message>& recvs) override;
  // MPI_Allgatherv of rows of `row_bytes` bytes: this rank's `mine_rows` rows at `mine` land in
  // parts[rank] of the buffer starting at `base`, and every rank's rows in its part. MPI_IN_PLACE
  // when `mine` already is this rank's part.
  void allgather(const void* mine, int64_t mine_rows, unsigned char* base, size_t row_bytes,
                 const std::vector<RowRange>& parts) override;
  // MPI_Reduce_scatter, MPI_SUM over `dtype` elements (f32, f64): `send` holds counts[0] elements
  // for rank 0, then counts[1] for rank 1, ...; the sum of every rank's part for this rank lands in
  // `recv` (counts[rank] elements).
  void reduce_scatter(const void* send, void* recv, Dtype dtype, const std::vector<int64_t>& counts) override;
  // MPI_Ibarrier, tested until it completes (true) or the deadline passes (false), napping between tests.
  bool barrier_until(std::chrono::steady_clock::time_point deadline) override;

 private:
  MPI_Datatype row_type(size_t row_bytes);  // a contiguous type of row_bytes bytes, cached

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
  std::map<size_t, MPI_Datatype> row_types_;
};

}  // namespace collmm::cpu
