// test_main.cpp: the cpu tests' main: MPI comes up through the cpu executor (one per process), the
// tests run on every rank in the same order, rank 0 prints the usual GoogleTest report and the other
// ranks print only their failures (prefixed with the rank). If any rank fails, every rank exits 1.
#include <gtest/gtest.h>

#include <iostream>
#include <memory>

#include "cpu_test_env.hpp"

namespace collmm::cpu_test {
namespace {

std::unique_ptr<Executor> g_executor;

class RankFailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit RankFailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (r.failed())
      std::cerr << "[rank " << rank_ << "] " << (r.file_name() ? r.file_name() : "?") << ":" << r.line_number() << ": "
                << r.summary() << std::endl;
  }

 private:
  int rank_;
};

}  // namespace

Executor& executor() { return *g_executor; }
int rank() { return g_executor->local_ranks().at(0); }
int world() { return g_executor->world_size(); }

std::string case_name(const Problem& p, const PlanOptions& o, Dtype dtype) {
  return to_string(p.op) + " " + to_string(dtype) + " M=" + std::to_string(p.m) + " N=" + std::to_string(p.n) +
         " K=" + std::to_string(p.k) + " B " + to_string(p.b_layout) + " " + to_string(o) +
         " P=" + std::to_string(p.world) + " rank " + std::to_string(rank());
}

Checked run_and_check(const Problem& p, const PlanOptions& o, Dtype dtype, uint64_t seed) {
  Executor& ex = executor();
  const int r = rank();
  const Plan plan = make_plan(p, o, r);
  ex.prepare({plan}, dtype);
  const std::vector<unsigned char> a = encode(make_local_a(p, r, seed, dtype).v, dtype);
  const std::vector<unsigned char> b = encode(make_local_b(p, r, seed, dtype).v, dtype);
  ex.write(0, kBufA, a.data(), a.size());
  ex.write(0, kBufB, b.data(), b.size());
  ex.poison();
  ex.run(StepFilter::all, false);

  const Dtype out = ex.out_dtype(dtype);
  const BufferSpec& cs = plan.buffers[kBufC];
  std::vector<unsigned char> c(static_cast<size_t>(cs.rows * cs.cols) * dtype_size(out));
  ex.read(0, kBufC, c.data(), c.size());
  Checked result;
  result.c = compare(decode(c.data(), static_cast<size_t>(cs.rows * cs.cols), out), reference_c(p, r, seed, dtype),
                     dtype, out, p.k);
  for (size_t i = 0; i < plan.buffers.size(); ++i) {
    if (plan.buffers[i].role != Role::gathered) continue;
    const BufferSpec& gs = plan.buffers[i];
    const size_t n = static_cast<size_t>(gs.rows * gs.cols);
    std::vector<unsigned char> g(n * dtype_size(dtype));
    ex.read(0, static_cast<int>(i), g.data(), g.size());
    const std::vector<double> got = decode(g.data(), n, dtype);
    const HostMatrix want = make_global_a(p, seed, dtype);
    result.gathered_wrong = 0;
    for (size_t e = 0; e < n; ++e)
      if (!(got[e] == want.v[e])) ++result.gathered_wrong;  // copies must be exact; NaN is wrong
  }
  return result;
}

}  // namespace collmm::cpu_test

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  collmm::BackendOptions options;
  options.timeout_s = 60;  // a hang in a test aborts the job instead of stalling ctest
  try {
    collmm::cpu_test::g_executor = collmm::make_cpu_executor(options, argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "cannot start the cpu backend: " << e.what() << std::endl;
    return 2;
  }
  collmm::Executor& ex = collmm::cpu_test::executor();
  const int rank = collmm::cpu_test::rank();
  if (rank != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new collmm::cpu_test::RankFailurePrinter(rank));
  }
  const int rc = RUN_ALL_TESTS();
  const std::vector<double> failed = ex.host().allgather(std::vector<double>{rc != 0 ? 1.0 : 0.0});
  int failed_ranks = 0;
  for (double f : failed) failed_ranks += f != 0;
  if (rank == 0 && failed_ranks > 0)
    std::cerr << failed_ranks << " of " << failed.size() << " ranks had failures (see [rank r] lines)" << std::endl;
  collmm::cpu_test::g_executor.reset();  // MPI_Finalize
  return failed_ranks > 0 ? 1 : 0;
}
