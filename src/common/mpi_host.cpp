// mpi_host.cpp: MPI_COMM_WORLD as a HostComm; MPI init with the thread-level check; node-local
// rank and size; the checked-call helper.
#include "collmm/mpi_host.hpp"

#include <cstdlib>
#include <sstream>

namespace collmm {
namespace {

const char* level_name(int level) {
  switch (level) {
    case MPI_THREAD_SINGLE: return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED: return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED: return "MPI_THREAD_SERIALIZED";
    case MPI_THREAD_MULTIPLE: return "MPI_THREAD_MULTIPLE";
  }
  return "unknown";
}

int g_users = 0;  // live MpiHostComm objects; MPI_Finalize when the last goes

class MpiHostComm : public HostComm {
 public:
  MpiHostComm() {
    ++g_users;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
  }
  ~MpiHostComm() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (--g_users == 0 && !finalized) MPI_Finalize();
  }
  int proc() const override { return rank_; }
  int procs() const override { return size_; }
  void barrier() override { COLLMM_MPI(MPI_Barrier(MPI_COMM_WORLD)); }

  std::vector<std::string> allgather(const std::string& mine) override {
    int len = static_cast<int>(mine.size());
    std::vector<int> lens(size_), displs(size_);
    COLLMM_MPI(MPI_Allgather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, MPI_COMM_WORLD));
    int total = 0;
    for (int i = 0; i < size_; ++i) displs[i] = total, total += lens[i];
    std::string all(static_cast<size_t>(total), '\0');
    COLLMM_MPI(MPI_Allgatherv(mine.data(), len, MPI_CHAR, all.data(), lens.data(), displs.data(), MPI_CHAR,
                              MPI_COMM_WORLD));
    std::vector<std::string> out;
    for (int i = 0; i < size_; ++i) out.push_back(all.substr(displs[i], lens[i]));
    return out;
  }

  std::vector<double> allgather(const std::vector<double>& mine) override {
    int len = static_cast<int>(mine.size());
    std::vector<int> lens(size_), displs(size_);
    COLLMM_MPI(MPI_Allgather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, MPI_COMM_WORLD));
    int total = 0;
    for (int i = 0; i < size_; ++i) displs[i] = total, total += lens[i];
    std::vector<double> all(static_cast<size_t>(total));
    COLLMM_MPI(MPI_Allgatherv(mine.data(), len, MPI_DOUBLE, all.data(), lens.data(), displs.data(),
                              MPI_DOUBLE, MPI_COMM_WORLD));
    return all;
  }

  [[noreturn]] void abort(int code) override {
    MPI_Abort(MPI_COMM_WORLD, code);
    std::_Exit(code);
  }

 private:
  int rank_ = 0, size_ = 1;
};

}  // namespace

void mpi_check(int code, const char* call, const char* file, int line) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(code, text, &len);
  std::ostringstream msg;
  msg << file << ":" << line << ": " << call << " failed: " << std::string(text, static_cast<size_t>(len));
  throw std::runtime_error(msg.str());
}

std::unique_ptr<HostComm> make_mpi_host_comm(int needed) {
  int initialized = 0, provided = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  } else {
    MPI_Query_thread(&provided);
  }
  if (provided < needed) {
    std::ostringstream msg;
    msg << "the MPI library provides " << level_name(provided) << " but collmm needs " << level_name(needed)
        << " (its comm lane calls MPI from its own thread); use an MPI built with thread support";
    throw UsageError(msg.str());
  }
  return std::make_unique<MpiHostComm>();
}

static MPI_Comm node_comm() {
  static MPI_Comm node = MPI_COMM_NULL;
  if (node == MPI_COMM_NULL)
    COLLMM_MPI(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
  return node;
}

int mpi_node_size() {
  int n = 1;
  MPI_Comm_size(node_comm(), &n);
  return n;
}

int mpi_node_rank() {
  int r = 0;
  MPI_Comm_rank(node_comm(), &r);
  return r;
}

bool launched_by_mpi() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MPI_LOCALNRANKS"})
    if (std::getenv(v)) return true;
  return false;
}

}  // namespace collmm
