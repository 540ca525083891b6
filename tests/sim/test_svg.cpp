// test_svg.cpp: the SVG picture is well-formed XML (a small tag-matching parser reads it back) and
// has one step box per executed step, a legend entry per kind, labels and a title.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "collmm/sim.hpp"
#include "svg.hpp"
#include "xml_check.hpp"

namespace collmm {
namespace {

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

TEST(Svg, TagCheckerCatchesBadXml) {
  EXPECT_EQ(xml_problem("<svg><rect/></svg>"), "");
  EXPECT_NE(xml_problem("<svg><rect></svg>"), "");
  EXPECT_NE(xml_problem("<svg>a & b</svg>"), "");
  EXPECT_NE(xml_problem("<svg><text>a</svg></text>"), "");
}

TEST(Svg, OneBoxPerExecutedStep) {
  for (Op op : all_ops())
    for (Algo a : all_algos()) {
      Problem p;
      p.op = op, p.m = 64, p.n = 48, p.k = 32, p.world = 4;
      PlanOptions o;
      o.algo = a;
      const SimResult r = simulate(p, o, Dtype::bf16, builtin_profile("h200-nvlink"));
      size_t steps = 0;
      for (int q = 0; q < p.world; ++q) steps += make_plan(p, o, q).steps.size();
      ASSERT_EQ(r.timeline.events.size(), steps);

      const std::string svg = timeline_svg(r.timeline, {0, 1200, "predicted <h200> & more"});
      EXPECT_EQ(xml_problem(svg), "") << to_string(op) << " " << to_string(a);
      EXPECT_EQ(count(svg, "<rect class=\"step\""), steps);
      EXPECT_EQ(count(svg, "<rect class=\"legend\""), 6u);
      EXPECT_NE(svg.find(to_string(op) + " " + to_string(a) + ", P=4"), std::string::npos);
      EXPECT_NE(svg.find("&lt;h200&gt; &amp; more"), std::string::npos);
      EXPECT_NE(svg.find(">3 comm<"), std::string::npos);
      EXPECT_NE(svg.find(">3 gemm<"), std::string::npos);
      EXPECT_NE(svg.find("time (us)"), std::string::npos);
    }
}

TEST(Svg, ChunkNumbersAndLimitedRanks) {
  Problem p;
  p.m = 8192, p.n = 8192, p.k = 8192, p.world = 8;
  PlanOptions o;
  o.gemm_lanes = 2;
  const SimResult r = simulate(p, o, Dtype::bf16, builtin_profile("h200-nvlink"));
  const std::string svg = timeline_svg(r.timeline, {2, 1200, ""});
  EXPECT_EQ(xml_problem(svg), "");
  // Ranks 0 and 1: 8 GEMMs, 7 sendrecvs and a copy each.
  EXPECT_EQ(count(svg, "<rect class=\"step\""), 2u * 16u);
  EXPECT_NE(svg.find("(ranks 0-1 shown)"), std::string::npos);
  EXPECT_NE(svg.find(">1 gemm 2<"), std::string::npos);  // two GEMM lanes get numbered rows
  EXPECT_EQ(svg.find(">2 comm<"), std::string::npos);
  // Wide boxes carry their chunk number: every chunk 0..7 appears as a label.
  EXPECT_GE(count(svg, "class=\"chunk\""), 16u);
  for (int c = 0; c < 8; ++c) EXPECT_NE(svg.find(">" + std::to_string(c) + "</text>"), std::string::npos) << c;
}

}  // namespace
}  // namespace collmm
