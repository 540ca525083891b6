// test_host.cpp: the host issue term of the simulator (Profile::host): times worked out by hand
// when the host is much slower than the device (the run is the host's issue of every step, in
// the order of the issuer), when it is much faster (the device's time, hardly changed), and with
// no host term (exactly the old results). Issue order of the shared issuer: see sim_host.cpp.
#include <gtest/gtest.h>

#include "collmm/sim.hpp"
#include "host_issue.hpp"
#include "sim_test_util.hpp"

namespace collmm {
namespace {

using test::analytic_profile;

constexpr double kTflops = 1.0;  // 1e6 flop per us
constexpr int64_t kMc = 256, kNr = 256, kK = 512;

Problem ag(int P) {
  Problem p;
  p.op = Op::ag_gemm;
  p.m = kMc * P, p.n = kNr * P, p.k = kK, p.world = P;
  return p;
}

PlanOptions algo(Algo a) {
  PlanOptions o;
  o.algo = a;
  return o;
}

double g_us() { return test::gemm_us(kMc, kNr, kK, kTflops); }  // one chunk's GEMM

// A chunk's transfer in c = g / 2; memory so fast that copies take ~0; the host's figures.
Profile with_host(double issue_us, bool shared) {
  Profile p = analytic_profile(kTflops, kMc * kK * 4.0 / (0.5 * g_us() * 1e3));
  p.host = {issue_us, shared};
  return p;
}

// The device operations of rank r's plan (the unit of issue_us).
int ops_of(const Problem& p, const PlanOptions& o, int r) {
  int n = 0;
  for (const Step& s : make_plan(p, o, r).steps) n += issue_ops(s.kind, static_cast<int>(s.recvs.size()), p.world);
  return n;
}

TEST(HostIssue, OpsPerStep) {
  EXPECT_EQ(issue_ops(StepKind::gemm, 0, 8), 1);
  EXPECT_EQ(issue_ops(StepKind::copy, 0, 8), 1);
  EXPECT_EQ(issue_ops(StepKind::add, 0, 8), 1);
  EXPECT_EQ(issue_ops(StepKind::sendrecv, 0, 8), 1);  // a send alone: its events
  EXPECT_EQ(issue_ops(StepKind::sendrecv, 2, 8), 2);  // one copy per receive
  EXPECT_EQ(issue_ops(StepKind::allgather, 0, 8), 8);
  EXPECT_EQ(issue_ops(StepKind::reduce_scatter, 0, 8), 8);
  // ag_gemm ring, P = 4, per rank: 3 sendrecv (one receive each), 4 GEMMs, 1 copy.
  EXPECT_EQ(ops_of(ag(4), algo(Algo::ring), 0), 8);
}

// No host term (issue_us 0, shared or not): every step exactly where it was without one.
TEST(HostIssue, ZeroChangesNothing) {
  for (Algo a : all_algos())
    for (bool shared : {false, true}) {
      const Profile none = with_host(0, false);
      const Profile zero = with_host(0, shared);
      const SimResult x = simulate(ag(4), algo(a), Dtype::f32, none);
      const SimResult y = simulate(ag(4), algo(a), Dtype::f32, zero);
      EXPECT_EQ(x.time_us, y.time_us) << to_string(a);
      for (int r = 0; r < 4; ++r)
        for (size_t s = 0; s < x.runs[r].steps.size(); ++s) {
          EXPECT_EQ(x.runs[r].steps[s].start_us, y.runs[r].steps[s].start_us);
          EXPECT_EQ(x.runs[r].steps[s].end_us, y.runs[r].steps[s].end_us);
        }
    }
}

// One issuer per rank, h = 100 g: rank r's k-th op is enqueued at k h and the device finishes each
// step long before the next is issued, so every rank ends at S h + g (its S = 8 ops; the last
// step, the last chunk's GEMM, takes g) whatever the device does.
TEST(HostIssue, PerRankIssuerTakesSTimesH) {
  const int P = 4, S = 8;
  const double h = 100 * g_us();
  const SimResult r = simulate(ag(P), algo(Algo::ring), Dtype::f32, with_host(h, false));
  EXPECT_NEAR(r.time_us, S * h + g_us(), 1e-6 * r.time_us);
  const Plan plan = make_plan(ag(P), algo(Algo::ring), 0);
  for (size_t s = 0; s < plan.steps.size(); ++s)  // step s is the (s+1)-th op: one op each here
    EXPECT_NEAR(r.runs[0].steps[s].start_us, (s + 1) * h, 1e-6 * h) << describe(plan.steps[s]);
}

// One issuer for all ranks: P S ops in a row, the run is at least P S h and ends with the last
// one issued (work <= g after it).
TEST(HostIssue, SharedIssuerTakesPTimesSTimesH) {
  for (int P : {2, 4, 7}) {
    const int S = ops_of(ag(P), algo(Algo::ring), 0);
    const double h = 100 * g_us();
    const double t = simulate(ag(P), algo(Algo::ring), Dtype::f32, with_host(h, true)).time_us;
    EXPECT_GE(t, P * S * h * (1 - 1e-12)) << "P=" << P;
    EXPECT_LE(t, (P * S * h + g_us()) * (1 + 1e-12)) << "P=" << P;
  }
}

// ag_gemm sequential: an allgather (P ops per rank) then one GEMM of P chunks (G = P g).
//  per rank: every rank posts the allgather at P h, its GEMM is issued at (P + 1) h and runs after
//            the collective ((P - 1) c < h): T = (P + 1) h + G.
//  shared:   the local transport issues the allgather of every rank when rank 0 stands at it
//            (rank x's at (x + 1) P h; the collective runs, (P - 1) c, once its last member is
//            issued at P^2 h), then, in the same round,
//            the GEMMs of ranks 1 .. P-1 (their turn: P^2 h + h .. ), and rank 0's in the next
//            round, last: T = (P^2 + P) h + G.
TEST(HostIssue, SequentialFollowsTheIssueOrder) {
  const int P = 4;
  const double h = 100 * g_us(), G = P * g_us(), c = 0.5 * g_us();
  const SimResult own = simulate(ag(P), algo(Algo::sequential), Dtype::f32, with_host(h, false));
  EXPECT_NEAR(own.time_us, (P + 1) * h + G, 1e-6 * own.time_us);
  const SimResult one = simulate(ag(P), algo(Algo::sequential), Dtype::f32, with_host(h, true));
  EXPECT_NEAR(one.time_us, (P * P + P) * h + G, 1e-6 * one.time_us);
  for (int r = 0; r < P; ++r) {
    EXPECT_NEAR(one.runs[r].steps[0].start_us, (r + 1) * P * h, 1e-6 * h) << "allgather posted, rank " << r;
    EXPECT_NEAR(one.runs[r].steps[0].end_us, P * P * h + (P - 1) * c, 1e-6 * h) << "allgather done, rank " << r;
    const double gemm_issued = r == 0 ? (P * P + P) * h : (P * P + r) * h;
    EXPECT_NEAR(one.runs[r].steps[1].start_us, gemm_issued, 1e-6 * h) << "GEMM, rank " << r;
  }
}

// A collective issued member by member by one thread runs once its last member is issued, as any
// collective runs once every member is posted. Issue h per op (P per member), collective work
// W = (P - 1) c: the last member is issued at P^2 h.
TEST(HostIssue, SharedIssuerStartsACollectiveAtItsLastMember) {
  const int P = 4;
  const double c = 0.5 * g_us(), W = (P - 1) * c;
  for (double h : {0.01 * c, 10 * c}) {  // a fast host or a slow one: the collective waits for its last member
    const SimResult one =
        simulate(ag(P), algo(Algo::sequential), Dtype::f32, with_host(h, true), StepFilter::comm_only);
    EXPECT_NEAR(one.runs[0].steps[0].end_us, P * P * h + W, 1e-6 * W) << "h/c=" << h / c;
  }
}

// Skipped steps are not issued: the GEMMs alone of the sequential plan (what calibration times)
// are issued at h, 2h, .., P h by the shared issuer; issue_time_us is that host's share.
TEST(HostIssue, SkippedStepsAreNotIssued) {
  const int P = 4;
  const double h = 100 * g_us(), G = P * g_us();
  const Profile prof = with_host(h, true);
  const double t = simulate(ag(P), algo(Algo::sequential), Dtype::f32, prof, StepFilter::gemm_only).time_us;
  EXPECT_NEAR(t, P * h + G, 1e-6 * t);
  EXPECT_NEAR(issue_time_us(ag(P), algo(Algo::sequential), prof.host, StepFilter::gemm_only), P * h, 1e-6 * h);
  EXPECT_NEAR(issue_time_us(ag(P), algo(Algo::sequential), prof.host), (P * P + P) * h, 1e-6 * h);
  EXPECT_NEAR(issue_time_us(ag(P), algo(Algo::sequential), {h, false}), (P + 1) * h, 1e-6 * h);
  EXPECT_EQ(issue_time_us(ag(P), algo(Algo::sequential), {0, true}), 0);
}

// A GEMM launch may cost the host more than a copy (gemm_issue_us): sequential ag_gemm issues P
// copies (the allgather) and one GEMM per rank.
TEST(HostIssue, GemmsHaveTheirOwnIssueCost) {
  const int P = 4;
  const double h = 100 * g_us(), hg = 3 * h;
  EXPECT_NEAR(issue_time_us(ag(P), algo(Algo::sequential), {h, false, hg}), P * h + hg, 1e-6 * h);
  EXPECT_NEAR(issue_time_us(ag(P), algo(Algo::sequential), {h, true, hg}), P * P * h + P * hg, 1e-6 * h);
  EXPECT_NEAR(issue_time_us(ag(P), algo(Algo::sequential), {h, true, hg}, StepFilter::gemm_only), P * hg, 1e-6 * h);
  EXPECT_DOUBLE_EQ(issue_cost_us({h, false, 0}, StepKind::gemm, 2), 2 * h);  // 0: the same as the rest
  EXPECT_DOUBLE_EQ(issue_cost_us({h, false, hg}, StepKind::copy, 2), 2 * h);
}

// A host much faster than the device: the issue runs ahead (it never waits for the device), so
// the run is the device's, later by at most the issue of its steps.
TEST(HostIssue, FastHostHidesBehindTheDevice) {
  const int P = 4;
  const double h = 0.01 * g_us();
  for (Algo a : all_algos()) {
    const double t0 = simulate(ag(P), algo(a), Dtype::f32, with_host(0, false)).time_us;
    for (bool shared : {false, true}) {
      const double t = simulate(ag(P), algo(a), Dtype::f32, with_host(h, shared)).time_us;
      int ops = 0;
      for (int r = 0; r < P; ++r) ops += ops_of(ag(P), algo(a), r);
      EXPECT_GE(t, t0 * (1 - 1e-12)) << to_string(a);
      EXPECT_LE(t, t0 + ops * h) << to_string(a);
    }
  }
}

// Every algorithm of both ops runs to the end under either issuer (no deadlock of the issue order).
TEST(HostIssue, EveryAlgorithmRunsToTheEnd) {
  for (Op op : all_ops())
    for (Algo a : all_algos())
      for (int P : {2, 5, 8})
        for (bool shared : {false, true}) {
          Problem p;
          p.op = op, p.m = 97, p.n = 61, p.k = 45, p.world = P;
          Profile prof = builtin_profile("h200-nvlink");
          prof.host = {5, shared};
          const SimResult r = simulate(p, algo(a), Dtype::bf16, prof);
          EXPECT_GT(r.time_us, 0);
          for (const RankRun& run : r.runs)
            for (const StepTime& s : run.steps) EXPECT_GE(s.end_us, s.start_us);
        }
}

// P = 1024 with one issuer for all: 2P^2 ops (2M) in issue order, still quick, still exact.
TEST(HostIssue, SharedIssuerAt1024Ranks) {
  const int P = 1024;
  const int S = 2 * P;  // per rank: P - 1 sendrecv, P GEMMs, 1 copy
  ASSERT_EQ(ops_of(ag(P), algo(Algo::ring), 0), S);
  const double h = 100 * g_us();
  const double t = simulate(ag(P), algo(Algo::ring), Dtype::f32, with_host(h, true), StepFilter::all, false).time_us;
  EXPECT_GE(t, double(P) * S * h * (1 - 1e-12));
  EXPECT_LE(t, double(P) * S * h * (1 + 1e-9) + g_us());
}

}  // namespace
}  // namespace collmm
