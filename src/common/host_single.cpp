// host_single.cpp: the HostComm of a job that is one process (no MPI).
#include <cstdlib>

#include "host_comm.hpp"

namespace collmm {
namespace {

class SingleProcessComm : public HostComm {
 public:
  int proc() const override { return 0; }
  int procs() const override { return 1; }
  void barrier() override {}
  std::vector<std::string> allgather(const std::string& mine) override { return {mine}; }
  std::vector<double> allgather(const std::vector<double>& mine) override { return mine; }
  [[noreturn]] void abort(int code) override { std::_Exit(code); }
};

}  // namespace

std::unique_ptr<HostComm> make_single_process_comm() { return std::make_unique<SingleProcessComm>(); }

}  // namespace collmm
