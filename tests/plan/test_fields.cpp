// test_fields.cpp: what the field lists of Problem and PlanOptions (collmm/types.hpp) give: every
// integer field's range checked by validate() with its name and range in the message, the text of
// a value, the key of a problem and dtype, and the tables' case cells (src/plan/table_cells.hpp), a
// column per field.
#include <gtest/gtest.h>

#include <sstream>

#include "collmm/algorithms.hpp"
#include "collmm/sizes.hpp"
#include "collmm/types.hpp"
#include "table_cells.hpp"

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

// validate's messages: sentences joined by one space, the last ending in a full stop (no trailing
// space), in words every front end reads (no "--pieces": the Python ops say pieces=, the CLIs
// --pieces). validate_sizes names the sizes alone, whichever op.
TEST(Fields, ValidateWritesSentencesInWordsOfNoOneFrontEnd) {
  Problem p = kProblem;
  p.m = 0, p.world = 0;
  const std::string both = validate_error(p);
  EXPECT_EQ(both, "M must be 1.." + std::to_string(kMaxSize) + " (got 0). world size must be 1.." +
                      std::to_string(kMaxWorld) + " (got 0).");
  try {
    validate_sizes(p);
    ADD_FAILURE() << "validate_sizes accepted M = 0";
  } catch (const UsageError& e) {
    EXPECT_EQ(std::string(e.what()), both);
  }
  EXPECT_NO_THROW(validate_sizes({.op = Op::ag_gemm, .m = 1, .n = 1, .k = 1, .world = 4}));  // the split: validate's
  const Problem small{.op = Op::ag_gemm, .m = 16, .n = 8, .k = 8, .world = 4};
  EXPECT_EQ(validate_error(small, {.algo = Algo::pipelined, .stages = 9, .pieces = 2}),
            "pieces 2 applies to ring and bidir only (got pipelined, which cuts every transfer already: stages). "
            "stages 9 cannot split M=16 over 4 ranks: the smallest rank's block has 4 rows, so at most 4 stages.");
  EXPECT_EQ(validate_error(small, {.algo = Algo::ring, .pieces = 5}),
            "pieces 5 cannot cut the ring's edge chunk: the smallest chunk of M=16 over 4 ranks has 4 rows, so at "
            "most 4 pieces.");
  EXPECT_EQ(validate_error(small, {.algo = Algo::bidir, .merge = 2}),
            "merge 2 applies to ag_gemm ring only (got ag_gemm bidir).");
  for (const PlanOptions& o : {PlanOptions{.algo = Algo::sequential, .piece_sizes = PieceSizes::halving},
                               PlanOptions{.algo = Algo::ring, .pieces = 9, .piece_sizes = PieceSizes::halving},
                               PlanOptions{.gemm_lanes = 0}}) {
    const std::string text = validate_error(small, o);
    ASSERT_FALSE(text.empty()) << to_string(o);
    EXPECT_EQ(text.back(), '.') << text;
    EXPECT_EQ(text.find("--"), std::string::npos) << text;
  }
}

TEST(Fields, TextOfAProblem) { EXPECT_EQ(to_string(kProblem), "op=gemm_rs m=64 n=32 k=16 world_size=4 b_layout=nk"); }

// The key of a problem and dtype tells apart every field, and orders them as their list does: an
// earlier field weighs more than a later one, the dtype least.
TEST(Fields, ProblemKeyIsEveryFieldInTheListsOrderThenTheDtype) {
  const ProblemKey base{{.op = Op::ag_gemm, .m = 64, .n = 32, .k = 16, .world = 4, .b_layout = BLayout::kn},
                        Dtype::f32};
  size_t fields = 0;
  for_each_field(base.problem, [&](const Field&, const auto&) { ++fields; });
  std::vector<ProblemKey> bumped;  // base with one field one more, in the list's order, the dtype last
  for (size_t i = 0; i < fields; ++i) {
    ProblemKey key = base;
    size_t j = 0;
    for_each_field(key.problem, [&](const Field&, auto& v) {
      if (j++ == i) v = static_cast<std::decay_t<decltype(v)>>(static_cast<int64_t>(v) + 1);
    });
    bumped.push_back(key);
  }
  bumped.push_back({base.problem, Dtype::tf32});
  EXPECT_EQ(base, (ProblemKey{base.problem, Dtype::f32}));
  for (size_t i = 0; i < bumped.size(); ++i) {
    EXPECT_NE(bumped[i], base) << i;
    EXPECT_GT(bumped[i], base) << i;
    if (i > 0) {
      EXPECT_LT(bumped[i], bumped[i - 1]) << i;
    }
  }
  EXPECT_EQ(to_string(base), "op=ag_gemm m=64 n=32 k=16 world_size=4 b_layout=kn dtype=f32");
}

TEST(Fields, CaseCellsAreAColumnPerField) {
  const PlanOptions o{.algo = Algo::pipelined, .stages = 2, .post = Post::gemm_first, .gemm_lanes = 3};
  std::vector<std::string> heads, texts;
  for (const Cell& c : case_cells(kProblem, o, Dtype::bf16)) {
    heads.push_back(c.head);
    texts.push_back(c.text);
    EXPECT_GT(c.width, static_cast<int>(c.head.size())) << c.head;  // a space before every heading
  }
  EXPECT_EQ(heads, (std::vector<std::string>{"op", "M", "N", "K", "P", "B", "dtype", "algo", "stages", "waves", "post",
                                             "lanes", "merge", "pieces", "sizes"}));
  EXPECT_EQ(texts, (std::vector<std::string>{"gemm_rs", "64", "32", "16", "4", "nk", "bf16", "pipelined", "2", "0",
                                             "gemm-first", "3", "1", "1", "equal"}));
  // A header and a row line up: every column as wide in both.
  std::ostringstream head, row;
  print_heads(head, case_cells(Problem{}, PlanOptions{}, Dtype::f32));
  print_texts(row, case_cells(kProblem, o, Dtype::bf16));
  EXPECT_EQ(head.str().size(), row.str().size()) << head.str() << row.str();
  // The algo cell holds the row's label (algo_label where none is given), as wide for every label up
  // to kLabelWidth, so that rows of one algorithm with other options are told apart and line up.
  const PlanOptions pieces{.algo = Algo::ring, .pieces = 4, .piece_sizes = PieceSizes::halving};
  for (const auto& [label, text] :
       {std::pair{"", "ring:pieces4h"}, std::pair{"auto:ring:pieces4h", "auto:ring:pieces4h"}}) {
    std::ostringstream line;
    print_texts(line, case_cells(kProblem, pieces, Dtype::bf16, label));
    EXPECT_NE(line.str().find(" " + std::string(text) + " "), std::string::npos) << line.str();
    EXPECT_EQ(line.str().size(), head.str().size()) << line.str();
  }
}

}  // namespace
}  // namespace collmm
