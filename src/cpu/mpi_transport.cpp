// mpi_transport.cpp: MPI point-to-point groups and collectives for the cpu backend, every call
// checked (COLLMM_MPI). Counts travel as rows of a contiguous row datatype, so a slice of more than
// INT_MAX elements still moves in one call. Reductions need a basic type, so they count elements
// and say so clearly when a part is too large.
#include "mpi_transport.hpp"

#include <algorithm>
#include <chrono>
#include <climits>
#include <sstream>
#include <stdexcept>

#include "fault_point.hpp"
#include "mpi_host.hpp"

namespace collmm::cpu {
namespace {

int to_int(int64_t v, const char* what, const char* file, int line) {
  if (v < 0 || v > INT_MAX) {
    std::ostringstream msg;
    msg << file << ":" << line << ": " << what << " = " << v << " does not fit MPI's int count (max " << INT_MAX
        << "); use more ranks or pipeline stages";
    throw std::runtime_error(msg.str());
  }
  return static_cast<int>(v);
}
#define COLLMM_MPI_INT(v) to_int((v), #v, __FILE__, __LINE__)

MPI_Datatype element_type(Dtype d) {
  if (d == Dtype::f32) return MPI_FLOAT;
  if (d == Dtype::f64) return MPI_DOUBLE;
  throw std::runtime_error("cpu backend: no MPI reduction for " + to_string(d) + " elements");
}

// Waits for every request at the transfers' pace (poll.hpp): a plain MPI_Waitall spins and keeps
// one of the cores the BLAS threads were given. A peer stopped past it is the run watchdog's.
void wait_napping(std::vector<MPI_Request>& requests) {
  poll_until_done(
      [&] {
        int done = 0;
        COLLMM_MPI(MPI_Testall(static_cast<int>(requests.size()), requests.data(), &done, MPI_STATUSES_IGNORE));
        return done != 0;
      },
      kTransferPace);
}

}  // namespace

MpiTransport::MpiTransport() {
  COLLMM_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &comm_));
  COLLMM_MPI(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
  COLLMM_MPI(MPI_Comm_rank(comm_, &rank_));
  COLLMM_MPI(MPI_Comm_size(comm_, &size_));
}

MpiTransport::~MpiTransport() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  for (auto& [bytes, type] : row_types_) MPI_Type_free(&type);
  MPI_Comm_free(&comm_);
}

MPI_Datatype MpiTransport::row_type(size_t row_bytes) {
  auto it = row_types_.find(row_bytes);
  if (it != row_types_.end()) return it->second;
  MPI_Datatype t;
  COLLMM_MPI(MPI_Type_contiguous(COLLMM_MPI_INT(static_cast<int64_t>(row_bytes)), MPI_BYTE, &t));
  COLLMM_MPI(MPI_Type_commit(&t));
  row_types_.emplace(row_bytes, t);
  return t;
}

void MpiTransport::sendrecv(const std::vector<Message>& sends, const std::vector<Message>& recvs) {
  constexpr int kTag = 0;  // one tag: MPI's non-overtaking order matches the k-th send to the k-th receive
  fault_point("sendrecv", rank_);
  std::vector<MPI_Request> requests(sends.size() + recvs.size(), MPI_REQUEST_NULL);
  size_t i = 0;
  for (const Message& m : recvs)
    COLLMM_MPI(MPI_Irecv(m.data, COLLMM_MPI_INT(m.rows), row_type(m.row_bytes), m.peer, kTag, comm_, &requests[i++]));
  for (const Message& m : sends)
    COLLMM_MPI(MPI_Isend(m.data, COLLMM_MPI_INT(m.rows), row_type(m.row_bytes), m.peer, kTag, comm_, &requests[i++]));
  wait_napping(requests);
}

void MpiTransport::allgather(const void* mine, int64_t mine_rows, unsigned char* base, size_t row_bytes,
                             const std::vector<RowRange>& parts) {
  if (static_cast<int>(parts.size()) != size_)
    throw std::runtime_error("cpu backend: allgather has " + std::to_string(parts.size()) + " parts for " +
                             std::to_string(size_) + " ranks");
  if (mine_rows != parts[static_cast<size_t>(rank_)].rows)
    throw std::runtime_error("cpu backend: allgather contributes " + std::to_string(mine_rows) + " rows to a part of " +
                             std::to_string(parts[static_cast<size_t>(rank_)].rows));
  std::vector<int> counts, displs;
  for (const RowRange& q : parts) {
    counts.push_back(COLLMM_MPI_INT(q.rows));
    displs.push_back(COLLMM_MPI_INT(q.row));
  }
  const MPI_Datatype row = row_type(row_bytes);
  const unsigned char* own = base + static_cast<size_t>(parts[static_cast<size_t>(rank_)].row) * row_bytes;
  const void* send = mine == own ? MPI_IN_PLACE : mine;
  std::vector<MPI_Request> request(1, MPI_REQUEST_NULL);  // non-blocking: the wait naps (wait_napping)
  COLLMM_MPI(MPI_Iallgatherv(send, counts[static_cast<size_t>(rank_)], row, base, counts.data(), displs.data(), row,
                             comm_, &request[0]));
  wait_napping(request);
}

void MpiTransport::reduce_scatter(const void* send, void* recv, Dtype dtype, const std::vector<int64_t>& counts) {
  if (static_cast<int>(counts.size()) != size_)
    throw std::runtime_error("cpu backend: reduce-scatter has " + std::to_string(counts.size()) + " parts for " +
                             std::to_string(size_) + " ranks");
  std::vector<int> recvcounts;
  for (int64_t c : counts) recvcounts.push_back(COLLMM_MPI_INT(c));
  std::vector<MPI_Request> request(1, MPI_REQUEST_NULL);
  COLLMM_MPI(MPI_Ireduce_scatter(send, recv, recvcounts.data(), element_type(dtype), MPI_SUM, comm_, &request[0]));
  wait_napping(request);
}

bool MpiTransport::barrier_until(std::chrono::steady_clock::time_point deadline) {
  MPI_Request request;
  COLLMM_MPI(MPI_Ibarrier(comm_, &request));
  return mpi_wait_until(request, deadline, kRunStartPace);
}

}  // namespace collmm::cpu
