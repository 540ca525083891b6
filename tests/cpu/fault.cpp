// fault.cpp: a job that goes wrong on purpose, to show the cpu backend ends it in bounded time
// with a non-zero exit (run by ctest under mpirun -np 2; the test passes when the job fails).
//   hang: rank 1 skips the comm (gemm_only) while rank 0 waits for it (comm_only): rank 0's
//         watchdog must name its rank and the sendrecv step it is stuck in, then abort the job.
//   die:  rank 1 exits before the run; rank 0 must not wait forever.
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <thread>

#include "backends.hpp"
#include "data.hpp"

int main(int argc, char** argv) {
  using namespace collmm;
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode != "hang" && mode != "die") {
    std::cerr << "usage: collmm_cpu_fault hang|die (under mpirun -np 2)\n";
    return 2;
  }
  BackendOptions options;
  options.timeout_s = 3;
  auto ex = make_cpu_executor(options, argc, argv);
  const int r = ex->local_ranks().at(0);
  if (ex->world_size() != 2) {
    std::cerr << "collmm_cpu_fault needs exactly 2 ranks\n";
    return 2;
  }
  const Problem p{.op = Op::ag_gemm, .m = 8, .n = 4, .k = 4, .world = 2, .b_layout = BLayout::kn};
  const Plan plan = make_plan(p, PlanOptions{}, r);  // the ring
  ex->prepare({plan}, Dtype::f32);
  const auto a = encode(make_local_a(p, r, 1, Dtype::f32).v, Dtype::f32);
  ex->write(0, kBufA, a.data(), a.size());
  if (mode == "die" && r == 1) std::_Exit(7);
  ex->run(r == 0 || mode == "die" ? StepFilter::comm_only : StepFilter::gemm_only, false);
  // Rank 1 of `hang` waits (longer than rank 0's watchdog, so that rank 0's message is the one
  // that ends the job; a host barrier here would end it at the same --timeout, naming rank 1).
  if (mode == "hang" && r == 1) std::this_thread::sleep_for(std::chrono::seconds(30));
  ex->host().barrier();
  std::cerr << "rank " << r << ": the faulty job finished, which it must not\n";
  return 0;
}
