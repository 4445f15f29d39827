// Dynamic-batch candidates: one file for every batch of a range, generated at samples above its top.
#include <gtest/gtest.h>

#include "expert/codegen/generate_at.h"
#include "expert/ir/test_graphs.h"

namespace egg::expert {
namespace {

using testing::LoadGraph;

// relu over x [B, row], B a dynamic batch up to `max`.
Json DynamicRelu(int64_t row, int64_t max) {
  const Json b = {{"sym", {1, 0}}};
  const Json meta = {
      {"shape", Json::array({b, row})}, {"stride", {row, 1}}, {"offset", 0}, {"dtype", "float32"}};
  return {{"format", "egg-graph"},
          {"version", 1},
          {"torch", "test"},
          {"dynamic", {{"dim", "batch"}, {"min", 1}, {"max", max}, {"example", 1}}},
          {"inputs", {{{"name", "x"}, {"position", 0}, {"kind", "tensor"}, {"meta", meta}}}},
          {"state", Json::array()},
          {"nodes",
           {{{"name", "relu"},
             {"op", "aten.relu.default"},
             {"args", {{{"node", "x"}}}},
             {"kwargs", Json::object()},
             {"meta", meta}}}},
          {"outputs", {{{"node", "relu"}}}},
          {"returns", "tensor"}};
}

TEST(DynamicCandidateTest, AFarSampleThatPassesInt32IndexesInInt64Throughout) {
  // 2^21 floats a row: 2 rows stay under 2^31 elements, the far sample's 2 + 1024 rows do not, so the samples
  // would differ in their indexing; the module indexes in int64 at every batch instead.
  const Candidate wide = GenerateDynamic(LoadGraph(DynamicRelu(int64_t{1} << 21, 2)), "class Model: pass\n",
                                         "relu.py", CandidateDesign{});
  ASSERT_TRUE(wide.source) << wide.problem;
  EXPECT_NE(wide.source->find("egg_B"), std::string::npos);
  EXPECT_NE(wide.source->find("tl.int64"), std::string::npos) << *wide.source;
  // Far from 2^31 every sample indexes in int32, as a fixed module would.
  const Candidate narrow =
      GenerateDynamic(LoadGraph(DynamicRelu(1024, 2)), "class Model: pass\n", "relu.py", CandidateDesign{});
  ASSERT_TRUE(narrow.source) << narrow.problem;
  EXPECT_EQ(narrow.source->find("tl.int64"), std::string::npos) << *narrow.source;
}

TEST(DynamicCandidateTest, ASummedProductFoldsAtEveryBatch) {
  // x [B, 6] @ w.T summed over its 5 columns, B up to 8: the folded form holds at every sample.
  const Json b = {{"sym", {1, 0}}};
  const auto meta = [](const Json& rows, int64_t columns) {
    return Json{{"shape", Json::array({rows, columns})},
                {"stride", {columns, 1}},
                {"offset", 0},
                {"dtype", "float32"}};
  };
  const Json ir = {
      {"format", "egg-graph"},
      {"version", 1},
      {"torch", "test"},
      {"dynamic", {{"dim", "batch"}, {"min", 1}, {"max", 8}, {"example", 1}}},
      {"inputs", {{{"name", "x"}, {"position", 0}, {"kind", "tensor"}, {"meta", meta(b, 6)}}}},
      {"state", {{{"name", "p_w"}, {"kind", "parameter"}, {"target", "w"}, {"meta", meta(5, 6)}}}},
      {"nodes",
       {{{"name", "permute"},
         {"op", "aten.permute.default"},
         {"args", {{{"node", "p_w"}}, {1, 0}}},
         {"kwargs", Json::object()},
         {"meta", {{"shape", {6, 5}}, {"stride", {1, 6}}, {"offset", 0}, {"dtype", "float32"}}}},
        {{"name", "mm"},
         {"op", "aten.mm.default"},
         {"args", {{{"node", "x"}}, {{"node", "permute"}}}},
         {"kwargs", Json::object()},
         {"meta", meta(b, 5)}},
        {{"name", "sum"},
         {"op", "aten.sum.dim_IntList"},
         {"args", {{{"node", "mm"}}, {1}, true}},
         {"kwargs", Json::object()},
         {"meta", meta(b, 1)}}}},
      {"outputs", {{{"node", "sum"}}}},
      {"returns", "tensor"}};
  CandidateDesign design;
  const Candidate folded = GenerateDynamic(LoadGraph(ir), "class Model: pass\n", "sum.py", design);
  ASSERT_TRUE(folded.source) << folded.problem;
  EXPECT_NE(folded.source->find("egg_B"), std::string::npos);
  EXPECT_NE(folded.source->find("_egg_kept(self, \"egg_k0_sum_fold_weights\""), std::string::npos)
      << *folded.source;
  EXPECT_EQ(folded.source->find("tl.dot("), std::string::npos);
}

}  // namespace
}  // namespace egg::expert
