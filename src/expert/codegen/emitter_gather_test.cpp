// Indirect reads in kernels: embedding, index with several index tensors, and the bitwise ops of mask
// building.
#include <gtest/gtest.h>

#include "expert/codegen/candidate_file.h"
#include "expert/codegen/emitter.h"
#include "expert/ir/ops.h"
#include "expert/ir/test_graphs.h"
#include "expert/plan/plan.h"

namespace egg::expert {
namespace {

using testing::Count;
using testing::GraphJson;
using testing::Input;
using testing::LoadGraph;
using testing::Meta;
using testing::NodeJson;
using testing::Ref;

std::string CandidateSource(const Graph& graph) {
  const Candidate candidate = GenerateCandidate(graph, "", "indexing", CandidateDesign{});
  EXPECT_TRUE(candidate.source) << candidate.problem;
  return candidate.source.value_or("");
}

TEST(GatherEmitTest, EmbeddingReadsTheTableRowItsPositionHolds) {
  const Graph graph = LoadGraph(
      GraphJson({Input("table", 0, Meta({16, 8})), Input("ids", 1, Meta({2, 6}, "int64"))},
                {NodeJson("embedding", "aten.embedding.default", {Ref("table"), Ref("ids")}, Meta({2, 6, 8})),
                 NodeJson("relu", "aten.relu.default", Json::array({Ref("embedding")}), Meta({2, 6, 8}))},
                {"relu"}));
  const Plan plan = MakePlan(graph, {});
  EXPECT_TRUE(plan.extern_ops.empty());
  ASSERT_EQ(plan.kernels.size(), 1U);  // the look-up is computed where relu reads it
  const std::string source = CandidateSource(graph);
  EXPECT_EQ(Count(source, "tl.store("), 1U);
  EXPECT_NE(source.find("tl.load(ptr1 + ((xindex % 8) + 8*tmp0), xmask"), std::string::npos) << source;
}

TEST(GatherEmitTest, AdjacentIndexTensorsBroadcastInTheirPlace) {
  // x[rows, cols] with rows [2, 1] and cols [1, 3] (transformers' mask read at (batch, position)): out [2,
  // 3].
  const Graph graph = LoadGraph(GraphJson(
      {Input("x", 0, Meta({4, 5}, "int64")), Input("rows", 1, Meta({2, 1}, "int64")),
       Input("cols", 2, Meta({1, 3}, "int64"))},
      {NodeJson("index", "aten.index.Tensor", {Ref("x"), {Ref("rows"), Ref("cols")}}, Meta({2, 3}, "int64")),
       NodeJson("le", "aten.le.Scalar", {Ref("index"), 2}, Meta({2, 3}, "bool"))},
      {"le"}));
  const Plan plan = MakePlan(graph, {});
  EXPECT_TRUE(plan.extern_ops.empty());
  const std::string source = CandidateSource(graph);
  // Each position read at its own broadcast index, negative ones from the end.
  EXPECT_NE(source.find("tl.load(ptr0 + ((xindex // 3)), xmask"), std::string::npos) << source;
  EXPECT_NE(source.find("tl.load(ptr1 + ((xindex % 3)), xmask"), std::string::npos) << source;
  EXPECT_EQ(Count(source, " + 4, "), 1U) << source;
  EXPECT_EQ(Count(source, " + 5, "), 1U) << source;
  EXPECT_NE(source.find("tl.load(ptr2 + (5*tmp1 + tmp3), xmask"), std::string::npos) << source;
}

TEST(GatherEmitTest, SeparatedIndexTensorsPutTheirShapeFirst) {
  // x[rows, :, cols] with rows [2, 1], cols [1, 3] over x [4, 6, 5]: out [2, 3, 6] (NumPy's rule).
  const Graph graph =
      LoadGraph(GraphJson({Input("x", 0, Meta({4, 6, 5})), Input("rows", 1, Meta({2, 1}, "int64")),
                           Input("cols", 2, Meta({1, 3}, "int64"))},
                          {NodeJson("index", "aten.index.Tensor",
                                    {Ref("x"), {Ref("rows"), nullptr, Ref("cols")}}, Meta({2, 3, 6})),
                           NodeJson("neg", "aten.neg.default", Json::array({Ref("index")}), Meta({2, 3, 6}))},
                          {"neg"}));
  const Plan plan = MakePlan(graph, {});
  EXPECT_TRUE(plan.extern_ops.empty());
  const std::string source = CandidateSource(graph);
  EXPECT_NE(source.find("tl.load(ptr0 + ((xindex // 18)), xmask"), std::string::npos) << source;
  EXPECT_NE(source.find("tl.load(ptr1 + (((xindex // 6) % 3)), xmask"), std::string::npos) << source;
  EXPECT_NE(source.find("tl.load(ptr2 + (5*(xindex % 6) + 30*tmp1 + tmp3)"), std::string::npos)
      << source;  // the middle dim keeps its stride
}

TEST(GatherEmitTest, BooleanIndexTensorsStayInPyTorch) {
  const Graph graph = LoadGraph(GraphJson(
      {Input("x", 0, Meta({4, 5})), Input("keep", 1, Meta({4}, "bool"))},
      {NodeJson("index", "aten.index.Tensor", {Ref("x"), Json::array({Ref("keep")})}, Meta({3, 5}))},
      {"index"}));
  const Plan plan = MakePlan(graph, {});
  EXPECT_EQ(plan.extern_ops, std::vector<std::string>{"aten.index.Tensor"});
  std::map<int, TensorMeta> memory;
  for (int input : graph.Inputs()) {
    memory[input] = *ValueAt(graph, input).meta;
  }
  KernelEmitter emitter(graph, memory, MaskSet::Flat());
  const Index x = Index::Var("xindex", 15);
  try {
    emitter.Emit(graph.nodes[0].value, {x.FloorDiv(5), x.Mod(5)});
    ADD_FAILURE() << "a boolean index emitted";
  } catch (const NotFusable& error) {
    EXPECT_NE(std::string(error.what()).find("a boolean or scalar index"), std::string::npos) << error.what();
  }
}

// upsample(x) of x [1, 2, 4, 6] to `out`, read by relu.
Graph Upsample(const std::string& op, const Json& args, const std::vector<int64_t>& out) {
  Json all = Json::array({Ref("x")});
  for (const Json& arg : args) {
    all.push_back(arg);
  }
  return LoadGraph(GraphJson({Input("x", 0, Meta({1, 2, 4, 6}))},
                             {NodeJson("up", op, all, Meta(out)),
                              NodeJson("relu", "aten.relu.default", Json::array({Ref("up")}), Meta(out))},
                             {"relu"}));
}

TEST(InterpolateEmitTest, NearestAtIntegerRatiosIsIndexArithmetic) {
  // Twice the size (ATen's shortcut) and half of it (a float32 scale of exactly 2): no float arithmetic.
  std::string source = CandidateSource(
      Upsample("aten.upsample_nearest2d.vec", {nullptr, Json::array({2.0, 2.0})}, {1, 2, 8, 12}));
  EXPECT_EQ(Count(source, "tl.floor"), 0U) << source;
  EXPECT_NE(
      source.find("tl.load(ptr0 + (((xindex // 2) % 6) + 6*((xindex // 24) % 4) + 24*(xindex // 96)), xmask"),
      std::string::npos)
      << source;
  source = CandidateSource(
      Upsample("aten.upsample_nearest2d.vec", {nullptr, Json::array({0.5, 0.5})}, {1, 2, 2, 3}));
  EXPECT_EQ(Count(source, "tl.floor"), 0U) << source;
  EXPECT_EQ(Count(source, "tl.load("), 1U) << source;
}

TEST(InterpolateEmitTest, NearestAtOtherRatiosFloorsAFloat32Product) {
  // Three times the size: ATen multiplies by float(1 / 3); by size 7x5 from 4x6: by 4/7 and 6/5 in float32.
  std::string source = CandidateSource(
      Upsample("aten.upsample_nearest2d.vec", {nullptr, Json::array({3.0, 3.0})}, {1, 2, 12, 18}));
  EXPECT_EQ(Count(source, "* 0.333333343).to(tl.int32), "), 2U) << source;
  source =
      CandidateSource(Upsample("aten.upsample_nearest2d.vec", {Json::array({7, 5}), nullptr}, {1, 2, 7, 5}));
  EXPECT_NE(source.find("* 0.571428597).to(tl.int32), 3)"), std::string::npos) << source;
  EXPECT_NE(source.find("* 1.20000005).to(tl.int32), 5)"), std::string::npos) << source;
}

TEST(InterpolateEmitTest, BilinearBlendsFourNeighboursEitherAlignment) {
  const std::vector<int64_t> out = {1, 2, 6, 9};
  std::string source = CandidateSource(
      Upsample("aten.upsample_bilinear2d.vec", {nullptr, true, Json::array({1.5, 1.5})}, out));
  EXPECT_EQ(Count(source, "tl.load("), 4U) << source;
  EXPECT_EQ(Count(source, "tl.maximum("), 0U)
      << source;  // align_corners: scale * index, (in - 1) / (out - 1)
  EXPECT_NE(source.find("* 0.600000024"), std::string::npos) << source;
  source =
      CandidateSource(Upsample("aten.upsample_bilinear2d.vec", {Json::array({6, 9}), false, nullptr}, out));
  EXPECT_EQ(Count(source, "tl.load("), 4U) << source;
  EXPECT_EQ(Count(source, " + 0.5) * "), 2U) << source;  // half-pixel centres clamped at 0, in / out
  EXPECT_NE(source.find("* 0.666666687 - 0.5, 0.0)"), std::string::npos) << source;
}

TEST(BitwiseLoweringTest, BoolsAreInt1AndLiteralsGoRight) {
  Node node;
  node.op = "aten.bitwise_and.Tensor";
  const Operand literal{"1", DType::kBool, true};
  const Operand mask{"tmp3", DType::kBool, false};
  const Operand count{"tmp4", DType::kInt64, false};
  EXPECT_EQ(LowerPointwise(node, {literal, mask}, DType::kBool).code, "(tmp3 & True)");
  EXPECT_EQ(LowerPointwise(node, {mask, count}, DType::kBool).code,
            "(((tmp3).to(tl.int8) & ((tmp4 != 0)).to(tl.int8)) != 0)");
  node.op = "aten.bitwise_xor.Scalar";
  EXPECT_EQ(LowerPointwise(node, {count, Operand{"5", DType::kInt64, true}}, DType::kInt64).code,
            "(tmp4 ^ 5)");
  node.op = "aten.bitwise_or.Tensor";
  EXPECT_EQ(ClassifyOp(node.op), OpClass::kPointwise);
  EXPECT_EQ(ClassifyOp("aten.embedding.default"), OpClass::kGather);
  EXPECT_EQ(ClassifyOp("aten.upsample_bilinear2d.vec"), OpClass::kGather);
}

}  // namespace
}  // namespace egg::expert
