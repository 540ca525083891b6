// test_overlap.cpp: the hidden-comm metric on hand-built timelines whose answers are worked out
// by hand.
#include <gtest/gtest.h>

#include "overlap.hpp"

namespace collmm {
namespace {

TimelineEvent ev(int rank, StepKind kind, double s, double e) {
  TimelineEvent x;
  x.rank = rank;
  x.lane = kind == StepKind::gemm ? 1 : 0;
  x.kind = kind;
  x.start_us = s;
  x.end_us = e;
  return x;
}

TEST(Overlap, FullNonePartial) {
  Timeline t;
  t.world = 3;
  t.events = {ev(0, StepKind::sendrecv, 0, 10),  ev(0, StepKind::gemm, 0, 20),   // all hidden
              ev(1, StepKind::sendrecv, 0, 10),  ev(1, StepKind::gemm, 10, 20),  // none
              ev(2, StepKind::allgather, 0, 10), ev(2, StepKind::gemm, 5, 20)};  // half
  const Overlap o = measure_overlap(t);
  ASSERT_EQ(o.ranks.size(), 3u);
  EXPECT_DOUBLE_EQ(o.ranks[0].fraction, 1.0);
  EXPECT_DOUBLE_EQ(o.ranks[1].fraction, 0.0);
  EXPECT_DOUBLE_EQ(o.ranks[2].fraction, 0.5);
  EXPECT_DOUBLE_EQ(o.ranks[2].hidden_us, 5.0);
  EXPECT_DOUBLE_EQ(o.ranks[2].comm_us, 10.0);
  EXPECT_DOUBLE_EQ(o.ranks[2].gemm_us, 15.0);
  EXPECT_DOUBLE_EQ(o.mean_fraction, 0.5);
  EXPECT_DOUBLE_EQ(o.min_fraction, 0.0);
}

TEST(Overlap, SeveralIntervalsOverlappingEachOther) {
  // comm: [0,10] [20,30] [25,35] -> union [0,10] [20,35], 25 us. Adds and copies are comm.
  // gemm: [5,22] [30,40] [31,33] -> union [5,22] [30,40]. Hidden: [5,10] [20,22] [30,35] = 12 us.
  Timeline t;
  t.events = {ev(0, StepKind::sendrecv, 0, 10), ev(0, StepKind::add, 20, 30),  ev(0, StepKind::copy, 25, 35),
              ev(0, StepKind::gemm, 5, 22),     ev(0, StepKind::gemm, 30, 40), ev(0, StepKind::gemm, 31, 33)};
  const Overlap o = measure_overlap(t);
  ASSERT_EQ(o.ranks.size(), 1u);
  EXPECT_DOUBLE_EQ(o.ranks[0].comm_us, 25.0);
  EXPECT_DOUBLE_EQ(o.ranks[0].gemm_us, 27.0);
  EXPECT_DOUBLE_EQ(o.ranks[0].hidden_us, 12.0);
  EXPECT_DOUBLE_EQ(o.ranks[0].fraction, 12.0 / 25.0);
}

TEST(Overlap, RankWithoutCommIsLeftOutOfTheSummary) {
  Timeline t;
  t.events = {ev(0, StepKind::gemm, 0, 10), ev(1, StepKind::sendrecv, 0, 4), ev(1, StepKind::gemm, 1, 10),
              ev(2, StepKind::reduce_scatter, 0, 4), ev(2, StepKind::gemm, 0, 1)};
  const Overlap o = measure_overlap(t);
  ASSERT_EQ(o.ranks.size(), 3u);
  EXPECT_EQ(o.ranks[0].comm_us, 0.0);
  EXPECT_EQ(o.ranks[0].fraction, 0.0);
  EXPECT_DOUBLE_EQ(o.mean_fraction, (0.75 + 0.25) / 2);
  EXPECT_DOUBLE_EQ(o.min_fraction, 0.25);
}

TEST(Overlap, EmptyTimeline) {
  const Overlap o = measure_overlap(Timeline{});
  EXPECT_TRUE(o.ranks.empty());
  EXPECT_EQ(o.mean_fraction, 0.0);
}

TEST(Overlap, IntervalHelpers) {
  const Intervals u = interval_union({{5, 6}, {0, 2}, {1, 3}, {3, 4}, {7, 7}});
  ASSERT_EQ(u.size(), 2u);
  EXPECT_EQ(u[0], std::make_pair(0.0, 4.0));
  EXPECT_EQ(u[1], std::make_pair(5.0, 6.0));
  EXPECT_DOUBLE_EQ(length(u), 5.0);
  EXPECT_DOUBLE_EQ(intersection_length(u, interval_union({{3.5, 5.5}})), 1.0);
}

}  // namespace
}  // namespace collmm
