// test_fields.cpp: what the field lists of Problem and PlanOptions (collmm/types.hpp) give: every
// integer field's range checked by validate() with its name and range in the message, the text of
// a value, and the tables' case cells (collmm/table_cells.hpp), a column per field.
#include <gtest/gtest.h>

#include <sstream>

#include "collmm/sizes.hpp"
#include "collmm/table_cells.hpp"
#include "collmm/types.hpp"

namespace collmm {
namespace {

std::string validate_error(const Problem& p, const PlanOptions& o = {}) {
  try {
    validate(p, o);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

const Problem kProblem{.op = Op::gemm_rs, .m = 64, .n = 32, .k = 16, .world = 4, .b_layout = BLayout::nk};

TEST(Fields, ValidateNamesEveryProblemFieldOutOfItsRange) {
  EXPECT_EQ(validate_error(kProblem), "");
  Problem p = kProblem;
  p.m = 0;
  EXPECT_NE(validate_error(p).find("M must be 1.." + std::to_string(kMaxSize) + " (got 0)"), std::string::npos);
  p = kProblem;
  p.n = kMaxSize + 1;
  EXPECT_NE(
      validate_error(p).find("N must be 1.." + std::to_string(kMaxSize) + " (got " + std::to_string(kMaxSize + 1)),
      std::string::npos);
  p = kProblem;
  p.k = -3;
  EXPECT_NE(validate_error(p).find("K must be 1.." + std::to_string(kMaxSize) + " (got -3)"), std::string::npos);
  p = kProblem;
  p.world = kMaxWorld + 1;
  EXPECT_NE(validate_error(p).find("world size must be 1.." + std::to_string(kMaxWorld) + " (got " +
                                   std::to_string(kMaxWorld + 1) + ")"),
            std::string::npos);
  // Every field out of range is named at once.
  p = kProblem;
  p.m = 0, p.world = 0;
  const std::string both = validate_error(p);
  EXPECT_NE(both.find("M must be"), std::string::npos) << both;
  EXPECT_NE(both.find("world size must be"), std::string::npos) << both;
}

TEST(Fields, TextOfAProblem) { EXPECT_EQ(to_string(kProblem), "op=gemm_rs m=64 n=32 k=16 world_size=4 b_layout=nk"); }

TEST(Fields, CaseCellsAreAColumnPerField) {
  const PlanOptions o{.algo = Algo::pipelined, .stages = 2, .post = Post::gemm_first, .gemm_lanes = 3};
  std::vector<std::string> heads, texts;
  for (const Cell& c : case_cells(kProblem, Dtype::bf16, o)) {
    heads.push_back(c.head);
    texts.push_back(c.text);
    EXPECT_GT(c.width, static_cast<int>(c.head.size())) << c.head;  // a space before every heading
  }
  EXPECT_EQ(heads, (std::vector<std::string>{"op", "M", "N", "K", "P", "B", "dtype", "algo", "stages", "post", "lanes",
                                             "merge", "pieces", "sizes"}));
  EXPECT_EQ(texts, (std::vector<std::string>{"gemm_rs", "64", "32", "16", "4", "nk", "bf16", "pipelined", "2",
                                             "gemm-first", "3", "1", "1", "equal"}));
  // A header and a row line up: every column as wide in both.
  std::ostringstream head, row;
  print_heads(head, case_cells(Problem{}, Dtype::f32, PlanOptions{}));
  print_texts(row, case_cells(kProblem, Dtype::bf16, o));
  EXPECT_EQ(head.str().size(), row.str().size()) << head.str() << row.str();
}

}  // namespace
}  // namespace collmm
