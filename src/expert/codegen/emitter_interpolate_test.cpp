// The emitter's interpolation, emitted directly: nearest source positions as index arithmetic where exact,
// the scales of .default overloads, linear blends over 2^dims neighbours, and the inputs it refuses.
#include <gtest/gtest.h>

#include "expert/codegen/emitter.h"
#include "expert/ir/test_graphs.h"

namespace egg::expert {
namespace {

using testing::Count;
using testing::GraphJson;
using testing::Input;
using testing::LoadGraph;
using testing::Meta;
using testing::NodeJson;
using testing::Ref;

// x `in` (any rank) -> `op`(x, args...) -> `out`.
Graph Upsample(const std::string& op, const Json& args, const std::vector<int64_t>& in,
               const std::vector<int64_t>& out, const std::string& dtype = "float32") {
  Json all = Json::array({Ref("x")});
  for (const Json& arg : args) {
    all.push_back(arg);
  }
  return LoadGraph(
      GraphJson({Input("x", 0, Meta(in, dtype))}, {NodeJson("up", op, all, Meta(out, dtype))}, {"up"}));
}

struct Emitted {
  std::string code;
  std::set<int> loaded;
  std::set<int> computed;
};

// The upsample's value at every output position (one flat lane variable), emitted over the graph's inputs.
Emitted EmitUpsample(const Graph& graph) {
  std::map<int, TensorMeta> memory;
  for (int input : graph.Inputs()) {
    memory[input] = *ValueAt(graph, input).meta;
  }
  KernelEmitter emitter(graph, memory, MaskSet::Flat());
  const Value& out = ValueAt(graph, graph.nodes[0].value);
  const Index x = Index::Var("xindex", out.meta->Numel());
  emitter.Emit(graph.nodes[0].value, Delinearize(x, out.meta->shape));
  std::string code;
  for (const std::string& line : emitter.CloseScope()) {
    code += line + "\n";
  }
  return {code, emitter.Loaded(), emitter.Computed()};
}

std::string Problem(const Graph& graph) {
  try {
    EmitUpsample(graph);
  } catch (const NotFusable& error) {
    return error.what();
  }
  return "";
}

TEST(InterpolateTest, NearestAtTheSameSizeReadsInPlace) {
  const Emitted emitted = EmitUpsample(
      Upsample("aten.upsample_nearest2d.vec", {Json::array({4, 6}), nullptr}, {1, 2, 4, 6}, {1, 2, 4, 6}));
  EXPECT_EQ(Count(emitted.code, "tl.load("), 1U);
  EXPECT_NE(emitted.code.find("tl.load(ptr0 + (xindex), xmask, other=0.0)"), std::string::npos)
      << emitted.code;
  EXPECT_EQ(emitted.loaded, std::set<int>{0});
  EXPECT_EQ(emitted.computed, std::set<int>{0}) << "the upsample node";
}

TEST(InterpolateTest, NearestAtIntegerAndPowerOfTwoRatiosIsExactIndexArithmetic) {
  // 8 -> 2 (every fourth position) and 2 -> 8 (each position four times): no float arithmetic.
  Emitted emitted = EmitUpsample(
      Upsample("aten.upsample_nearest1d.vec", {Json::array({2}), nullptr}, {1, 1, 8}, {1, 1, 2}));
  EXPECT_EQ(Count(emitted.code, "tl.floor"), 0U) << emitted.code;
  EXPECT_NE(emitted.code.find("4*"), std::string::npos) << emitted.code;
  emitted = EmitUpsample(
      Upsample("aten.upsample_nearest1d.vec", {Json::array({8}), nullptr}, {1, 1, 2}, {1, 1, 8}));
  EXPECT_EQ(Count(emitted.code, "tl.floor"), 0U) << emitted.code;
  EXPECT_NE(emitted.code.find("// 4"), std::string::npos) << emitted.code;
}

TEST(InterpolateTest, DefaultOverloadsTakeTheirScalesPositionally) {
  // 4 -> 10 with scales_w 2.6: ATen uses 1 / 2.6, not 4 / 10.
  Emitted emitted = EmitUpsample(
      Upsample("aten.upsample_nearest1d.default", {Json::array({10}), 2.6}, {1, 1, 4}, {1, 1, 10}));
  EXPECT_NE(emitted.code.find("* 0.384615391).to(tl.int32), 3)"), std::string::npos) << emitted.code;
  emitted = EmitUpsample(
      Upsample("aten.upsample_nearest1d.default", {Json::array({10}), nullptr}, {1, 1, 4}, {1, 1, 10}));
  EXPECT_NE(emitted.code.find("* 0.400000006).to(tl.int32), 3)"), std::string::npos)
      << "without a scale: in / out. " << emitted.code;
}

TEST(InterpolateTest, NearestThreeDimsMapsEachSpatialDim) {
  const Emitted emitted =
      EmitUpsample(Upsample("aten.upsample_nearest3d.vec", {nullptr, Json::array({2.0, 2.0, 2.0})},
                            {1, 1, 2, 3, 4}, {1, 1, 4, 6, 8}));
  EXPECT_EQ(Count(emitted.code, "tl.load("), 1U);
  EXPECT_EQ(Count(emitted.code, "tl.floor"), 0U) << emitted.code;
}

TEST(InterpolateTest, TrilinearBlendsEightNeighbours) {
  const Emitted emitted =
      EmitUpsample(Upsample("aten.upsample_trilinear3d.vec", {Json::array({4, 6, 8}), false, nullptr},
                            {1, 1, 2, 3, 4}, {1, 1, 4, 6, 8}));
  EXPECT_EQ(Count(emitted.code, "tl.load("), 8U) << emitted.code;
  EXPECT_EQ(Count(emitted.code, " + 0.5) * "), 3U) << "one source position per dim: " << emitted.code;
  EXPECT_EQ(Count(emitted.code, "tl.minimum("), 6U)
      << "lower and upper neighbour per dim, clamped: " << emitted.code;
}

TEST(InterpolateTest, LinearAtTheSameSizeCopiesWhateverTheScaleFactor) {
  // nn.Upsample(scale_factor=1.05, mode='bilinear') on 10x10 keeps 10x10: ATen copies the input; blending
  // with positions scaled by 1/1.05 would mix row 9 with row 8
  const Emitted same =
      EmitUpsample(Upsample("aten.upsample_bilinear2d.vec", {nullptr, false, Json::array({1.05, 1.05})},
                            {1, 1, 10, 10}, {1, 1, 10, 10}));
  EXPECT_EQ(Count(same.code, "tl.load("), 1U) << same.code;
  EXPECT_EQ(same.code.find("0.5"), std::string::npos) << same.code;
  // one size kept and the other grown: both dims blend (ATen's copy needs every size kept)
  const Emitted grown =
      EmitUpsample(Upsample("aten.upsample_bilinear2d.vec", {nullptr, false, Json::array({1.05, 1.2})},
                            {1, 1, 10, 10}, {1, 1, 10, 12}));
  EXPECT_EQ(Count(grown.code, "tl.load("), 4U) << grown.code;
  EXPECT_EQ(Count(grown.code, " + 0.5) * "), 2U) << grown.code;
}

TEST(InterpolateTest, AlignedCornersScaleByInMinusOneOverOutMinusOne) {
  // 3 -> 5 aligned: scale 2 / 4, no half-pixel offset, no clamp at 0.
  const Emitted emitted = EmitUpsample(
      Upsample("aten.upsample_linear1d.vec", {Json::array({5}), true, nullptr}, {1, 1, 3}, {1, 1, 5}));
  EXPECT_EQ(Count(emitted.code, "tl.load("), 2U) << emitted.code;
  EXPECT_NE(emitted.code.find("* 0.5"), std::string::npos) << emitted.code;
  EXPECT_EQ(Count(emitted.code, "tl.maximum("), 0U) << emitted.code;
  EXPECT_EQ(Count(emitted.code, " + 0.5) * "), 0U) << emitted.code;
}

TEST(InterpolateTest, RefusesWhatItCannotCompute) {
  EXPECT_NE(Problem(Upsample("aten.upsample_bilinear2d.vec", {Json::array({8, 12}), false, nullptr},
                             {1, 2, 4, 6}, {1, 2, 8, 12}, "int64"))
                .find("linear interpolation of integers"),
            std::string::npos);
  EXPECT_NE(Problem(Upsample("aten.upsample_nearest1d.vec", {Json::array({8}), nullptr}, {4, 4}, {4, 8}))
                .find("unsupported interpolation"),
            std::string::npos)
      << "no batch and channel dims";
  EXPECT_EQ(Problem(Upsample("aten.upsample_nearest2d.vec", {Json::array({8, 12}), nullptr}, {1, 2, 4, 6},
                             {1, 2, 8, 12}, "int64")),
            "")
      << "nearest copies integers";
}

}  // namespace
}  // namespace egg::expert
