#include "expert/ir/fold.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "expert/ir/test_graphs.h"

namespace egg::expert {
namespace {

using testing::GraphJson;
using testing::Input;
using testing::LoadGraph;
using testing::Meta;
using testing::NodeJson;
using testing::Ref;

// The graph document `json` with module parameters named p_NAME (target NAME) of the given metas, parsed.
Graph WithParameters(Json json, const std::vector<std::pair<std::string, Json>>& parameters) {
  json["state"] = Json::array();
  for (const auto& [name, meta] : parameters) {
    json["state"].push_back({{"name", "p_" + name}, {"kind", "parameter"}, {"target", name}, {"meta", meta}});
  }
  return LoadGraph(json);
}

// x [4, 6] times a parameter w [5, 6] transposed, then `chain` (nodes reading "mm" onward), returning
// `outputs`.
Graph ProductGraph(const std::vector<Json>& chain, const std::vector<std::string>& outputs,
                   const std::string& dtype = "float32", bool addmm = false) {
  std::vector<Json> nodes = {
      NodeJson("permute", "aten.permute.default", {Ref("p_w"), {1, 0}}, Meta({6, 5}, dtype))};
  nodes.push_back(addmm ? NodeJson("mm", "aten.addmm.default", {Ref("p_b"), Ref("x"), Ref("permute")},
                                   Meta({4, 5}, dtype))
                        : NodeJson("mm", "aten.mm.default", {Ref("x"), Ref("permute")}, Meta({4, 5}, dtype)));
  nodes.insert(nodes.end(), chain.begin(), chain.end());
  return WithParameters(
      GraphJson({Input("x", 0, Meta({4, 6}, dtype))}, nodes, outputs),
      {{"w", Meta({5, 6}, dtype)}, {"b", Meta({5}, dtype)}, {"shift", Meta({1, 5}, dtype)}});
}

std::vector<std::string> Ops(const Graph& graph) {
  std::vector<std::string> ops;
  for (const Node& node : graph.nodes) {
    ops.push_back(node.op);
  }
  return ops;
}

const Node& Produced(const Graph& graph, const Arg& arg) {
  return graph.nodes.at(static_cast<size_t>(graph.ValueOf(arg).node));
}

TEST(FoldTest, ScaledSumOfAProductIsTheInputTimesTheWeightsRowSums) {
  // KernelBench 2_14: (x @ w.T / 2).sum(1, keepdim=True) * 1.5
  const Graph graph =
      ProductGraph({NodeJson("div", "aten.div.Tensor", {Ref("mm"), 2}, Meta({4, 5})),
                    NodeJson("sum", "aten.sum.dim_IntList", {Ref("div"), {1}, true}, Meta({4, 1})),
                    NodeJson("mul", "aten.mul.Tensor", {Ref("sum"), 1.5}, Meta({4, 1}))},
                   {"mul"});
  const auto folded = FoldSummedProducts(graph);
  ASSERT_TRUE(folded);
  EXPECT_EQ(Ops(*folded),
            (std::vector<std::string>{"aten.permute.default", "aten.sum.dim_IntList", "aten.mul.Tensor",
                                      "aten.sum.dim_IntList", "aten.mul.Tensor", "aten.mul.Tensor"}));
  const Node& weights = folded->nodes[1];  // the row sums of w.T: [6]
  EXPECT_EQ(weights.name, "sum_fold_weights");
  EXPECT_EQ(ValueAt(*folded, weights.value).meta->shape, std::vector<int64_t>{6});
  EXPECT_EQ(Produced(*folded, weights.args[0]).op, "aten.permute.default");
  const Node& product = folded->nodes[2];  // x * rowsums, broadcast along x's rows
  EXPECT_EQ(folded->ValueOf(product.args[0]).name, "x");
  EXPECT_EQ(product.args[1].value, weights.value);
  const Node& rows = folded->nodes[3];
  EXPECT_EQ(ValueAt(*folded, rows.value).meta->shape, (std::vector<int64_t>{4, 1}));
  EXPECT_TRUE(rows.args[2].b) << "keepdim as the captured sum";
  const Node& scaled = folded->nodes[4];
  EXPECT_DOUBLE_EQ(scaled.args[1].f, 0.5);
  EXPECT_EQ(folded->nodes[5].args[0].value, scaled.value) << "the captured consumer reads the folded sum";
  EXPECT_EQ(folded->ValueOf(folded->outputs[0]).name, "mul");
  EXPECT_EQ(folded->ValueOf(product.args[0]).users, std::vector<int>{2});
}

TEST(FoldTest, BiasesAndNumbersAlongTheChainAreSummedOverTheColumns) {
  // mean(0.5 * (x @ w.T + b) - shift, -1); then -(3 + x @ w.T) summed, over an mm
  const Graph graph =
      ProductGraph({NodeJson("mul", "aten.mul.Tensor", {Ref("mm"), 0.5}, Meta({4, 5})),
                    NodeJson("sub", "aten.sub.Tensor", {Ref("mul"), Ref("p_shift")}, Meta({4, 5})),
                    NodeJson("mean", "aten.mean.dim", {Ref("sub"), {-1}}, Meta({4}))},
                   {"mean"}, "float32", /*addmm=*/true);
  const auto folded = FoldSummedProducts(graph);
  ASSERT_TRUE(folded);
  EXPECT_EQ(Ops(*folded),
            (std::vector<std::string>{"aten.permute.default", "aten.sum.dim_IntList", "aten.sum.default",
                                      "aten.sum.default", "aten.mul.Tensor", "aten.sum.dim_IntList",
                                      "aten.mul.Tensor", "aten.add.Tensor", "aten.add.Tensor"}));
  EXPECT_EQ(folded->ValueOf(folded->nodes[2].args[0]).name, "p_b");
  EXPECT_EQ(folded->ValueOf(folded->nodes[3].args[0]).name, "p_shift");
  EXPECT_DOUBLE_EQ(folded->nodes[6].args[1].f, 0.5 / 5);              // the scale, over the mean's 5
  EXPECT_DOUBLE_EQ(folded->nodes[7].kwargs.at("alpha").f, 0.5 / 5);   // sum(b), scaled with the product
  EXPECT_DOUBLE_EQ(folded->nodes[8].kwargs.at("alpha").f, -1.0 / 5);  // minus sum(shift)
  EXPECT_EQ(ValueAt(*folded, folded->nodes[8].value).meta->shape, std::vector<int64_t>{4});

  const Graph negated =
      ProductGraph({NodeJson("add", "aten.add.Tensor", {3.0, Ref("mm")}, Meta({4, 5})),
                    NodeJson("neg", "aten.neg.default", Json::array({Ref("add")}), Meta({4, 5})),
                    NodeJson("sum", "aten.sum.dim_IntList", {Ref("neg"), {1}}, Meta({4}))},
                   {"sum"});
  const auto second = FoldSummedProducts(negated);
  ASSERT_TRUE(second);
  ASSERT_EQ(second->nodes.size(), 6U);
  EXPECT_DOUBLE_EQ(second->nodes[4].args[1].f, -1.0);   // the negation
  EXPECT_DOUBLE_EQ(second->nodes[5].args[1].f, -15.0);  // -(3 * 5 columns)
}

TEST(FoldTest, SumsThatAreNotOverAProductsColumnsThroughLinearOpsStay) {
  const auto refused = [](const std::vector<Json>& chain, const std::vector<std::string>& outputs,
                          const std::string& dtype = "float32") {
    return !FoldSummedProducts(ProductGraph(chain, outputs, dtype)).has_value();
  };
  EXPECT_TRUE(refused({NodeJson("sum", "aten.sum.dim_IntList", {Ref("mm"), {0}}, Meta({5}))}, {"sum"}))
      << "over the rows";
  EXPECT_TRUE(refused({NodeJson("sum", "aten.sum.dim_IntList", {Ref("mm"), {1}}, Meta({4})),
                       NodeJson("amax", "aten.amax.default", {Ref("mm"), {1}}, Meta({4}))},
                      {"sum", "amax"}))
      << "the product read twice";
  EXPECT_TRUE(refused({NodeJson("sum", "aten.sum.dim_IntList", {Ref("mm"), {1}}, Meta({4}))}, {"sum", "mm"}))
      << "the product returned";
  EXPECT_TRUE(refused({NodeJson("relu", "aten.relu.default", Json::array({Ref("mm")}), Meta({4, 5})),
                       NodeJson("sum", "aten.sum.dim_IntList", {Ref("relu"), {1}}, Meta({4}))},
                      {"sum"}))
      << "not linear";
  EXPECT_TRUE(refused({NodeJson("mul", "aten.mul.Tensor", {Ref("mm"), Ref("mm")}, Meta({4, 5})),
                       NodeJson("sum", "aten.sum.dim_IntList", {Ref("mul"), {1}}, Meta({4}))},
                      {"sum"}))
      << "a square";
  // one row: x @ w.T is [1, 5], the shape of a bias row, but adding it to itself is not adding a bias
  const Graph one_row = WithParameters(
      GraphJson({Input("x", 0, Meta({1, 6}))},
                {NodeJson("permute", "aten.permute.default", {Ref("p_w"), {1, 0}}, Meta({6, 5})),
                 NodeJson("mm", "aten.mm.default", {Ref("x"), Ref("permute")}, Meta({1, 5})),
                 NodeJson("add", "aten.add.Tensor", {Ref("mm"), Ref("mm")}, Meta({1, 5})),
                 NodeJson("sum", "aten.sum.dim_IntList", {Ref("add"), {1}}, Meta({1}))},
                {"sum"}),
      {{"w", Meta({5, 6})}});
  EXPECT_FALSE(FoldSummedProducts(one_row)) << "the product added to itself";
  EXPECT_TRUE(refused({NodeJson("add", "aten.add.Tensor", {Ref("mm"), Ref("x")}, Meta({4, 5})),
                       NodeJson("sum", "aten.sum.dim_IntList", {Ref("add"), {1}}, Meta({4}))},
                      {"sum"}))
      << "a tensor with rows added (x is [4, 6]: a malformed graph refused all the same)";
  EXPECT_TRUE(refused({NodeJson("sum", "aten.sum.dim_IntList", {Ref("mm"), {1}}, Meta({4}, "float16"))},
                      {"sum"}, "float16"))
      << "half products round their sums otherwise";
}

// x [2, 3, 4, 4] through a transposed convolution with w [3, 5, 3, 3] and bias [5] (stride 2: [2, 5, 9, 9]),
// with `padding`, then `chain` (nodes reading "conv" onward), returning `output`.
Graph ConvolutionGraph(const std::vector<Json>& chain, const std::string& output, int64_t padding = 0,
                       int64_t groups = 1) {
  std::vector<Json> nodes = {
      NodeJson("conv", "aten.convolution.default",
               {Ref("x"), Ref("p_w"), Ref("p_b"), {2, 2}, {padding, padding}, {1, 1}, true, {0, 0}, groups},
               Meta({2, 5, 9 - 2 * padding, 9 - 2 * padding}))};
  nodes.insert(nodes.end(), chain.begin(), chain.end());
  return WithParameters(
      GraphJson({Input("x", 0, Meta({2, 3, 4, 4}))}, nodes, {output}),
      {{"w", Meta({3, 5, 3, 3})}, {"b", Meta({5})}, {"scale", Meta({5, 1, 1})}, {"map", Meta({9, 9})}});
}

TEST(FoldTest, APooledTransposedConvolutionIsTheInputsSumsTimesTheKernelSummedWeights) {
  // mean(conv(x) * scale - 2, (2, 3), keepdim): sum_c (sum_i x) (sum_k w) / 81 + b, then * scale - 2
  const Graph graph =
      ConvolutionGraph({NodeJson("mul", "aten.mul.Tensor", {Ref("conv"), Ref("p_scale")}, Meta({2, 5, 9, 9})),
                        NodeJson("sub", "aten.sub.Tensor", {Ref("mul"), 2.0}, Meta({2, 5, 9, 9})),
                        NodeJson("mean", "aten.mean.dim", {Ref("sub"), {-1, -2}, true}, Meta({2, 5, 1, 1}))},
                       "mean");
  const auto folded = FoldSummedProducts(graph);
  ASSERT_TRUE(folded);
  EXPECT_EQ(Ops(*folded),
            (std::vector<std::string>{"aten.sum.dim_IntList", "aten.sum.dim_IntList", "aten.mm.default",
                                      "aten.mul.Tensor", "aten.add.Tensor", "aten.view.default",
                                      "aten.mul.Tensor", "aten.sub.Tensor"}));
  const Node& weights = folded->nodes[0];
  EXPECT_TRUE(weights.keepable) << "the weights' sums depend on the parameter alone";
  EXPECT_FALSE(folded->nodes[1].keepable) << "the input's sums change at every call";
  EXPECT_EQ(folded->ValueOf(weights.args[0]).name, "p_w");
  EXPECT_EQ(ValueAt(*folded, weights.value).meta->shape, (std::vector<int64_t>{3, 5}));
  EXPECT_EQ(ValueAt(*folded, folded->nodes[1].value).meta->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_DOUBLE_EQ(folded->nodes[3].args[1].f, 1.0 / 81);
  EXPECT_EQ(folded->ValueOf(folded->nodes[4].args[1]).name, "p_b");
  EXPECT_EQ(folded->nodes[4].kwargs.count("alpha"), 0U) << "a mean adds the bias once";
  EXPECT_EQ(ValueAt(*folded, folded->nodes[5].value).meta->shape, (std::vector<int64_t>{2, 5, 1, 1}));
  EXPECT_EQ(folded->ValueOf(folded->nodes[6].args[1]).name, "p_scale") << "the chain, after the pooling";
  EXPECT_EQ(ValueAt(*folded, folded->nodes[7].value).meta->shape, (std::vector<int64_t>{2, 5, 1, 1}));
  EXPECT_EQ(folded->ValueOf(folded->outputs[0]).name, "sub");

  // sum(conv(x) + 3): a number added at every position adds 81 times it to the sum, so the sum is 81 times
  // the mean with the chain applied
  const Graph summed = ConvolutionGraph(
      {NodeJson("add", "aten.add.Tensor", {Ref("conv"), 3.0}, Meta({2, 5, 9, 9})),
       NodeJson("sum", "aten.sum.dim_IntList", {Ref("add"), {2, 3}, true}, Meta({2, 5, 1, 1}))},
      "sum");
  const auto second = FoldSummedProducts(summed);
  ASSERT_TRUE(second);
  EXPECT_EQ(Ops(*second),
            (std::vector<std::string>{"aten.sum.dim_IntList", "aten.sum.dim_IntList", "aten.mm.default",
                                      "aten.mul.Tensor", "aten.add.Tensor", "aten.view.default",
                                      "aten.add.Tensor", "aten.mul.Tensor"}));
  EXPECT_DOUBLE_EQ(second->nodes[3].args[1].f, 1.0 / 81);
  EXPECT_DOUBLE_EQ(second->nodes[7].args[1].f, 81.0);
  EXPECT_EQ(second->ValueOf(second->outputs[0]).name, second->nodes[7].name);
}

TEST(FoldTest, ACroppedPooledConvolutionSumsThePairsInsideItsWindows) {
  // padding 1 at stride 2 (9 -> 7 positions a dim): input position i meets tap k at 2i - 1 + k, inside [0, 7)
  // but for (0, 0) and (3, 2); X[b, c, k0, k1] sums x over each dim's window, then sum_c sum_k W * X
  const Graph graph = ConvolutionGraph(
      {NodeJson("mean", "aten.mean.dim", {Ref("conv"), {2, 3}, true}, Meta({2, 5, 1, 1}))}, "mean", 1);
  const auto folded = FoldSummedProducts(graph);
  ASSERT_TRUE(folded);
  EXPECT_EQ(Ops(*folded),
            (std::vector<std::string>{"aten.unsqueeze.default", "aten.mul.Tensor", "aten.sum.dim_IntList",
                                      "aten.unsqueeze.default", "aten.mul.Tensor", "aten.sum.dim_IntList",
                                      "aten.unsqueeze.default", "aten.mul.Tensor", "aten.sum.dim_IntList",
                                      "aten.sum.dim_IntList", "aten.mul.Tensor", "aten.add.Tensor",
                                      "aten.view.default"}));
  const Value& window = folded->ValueOf(folded->nodes[1].args[1]);
  EXPECT_EQ(window.state_kind, "constant");
  EXPECT_EQ(window.meta->shape, (std::vector<int64_t>{4, 1, 3})) << "[height, width left, taps]";
  EXPECT_EQ(*window.constant_values, (std::vector<double>{0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0}));
  EXPECT_EQ(ValueAt(*folded, folded->nodes[2].value).meta->shape, (std::vector<int64_t>{2, 3, 4, 3}))
      << "[B, C, width, height taps]";
  EXPECT_EQ(ValueAt(*folded, folded->nodes[5].value).meta->shape, (std::vector<int64_t>{2, 3, 3, 3}));
  EXPECT_EQ(folded->ValueOf(folded->nodes[7].args[1]).name, "p_w") << "the weight whole: both dims cropped";
  EXPECT_EQ(ValueAt(*folded, folded->nodes[7].value).meta->shape, (std::vector<int64_t>{2, 3, 5, 3, 3}));
  EXPECT_EQ(folded->nodes[8].args[1].AsInts(), (std::vector<int64_t>{3, 4})) << "the taps, then C";
  EXPECT_EQ(folded->nodes[9].args[1].AsInts(), (std::vector<int64_t>{1}));
  EXPECT_DOUBLE_EQ(folded->nodes[10].args[1].f, 1.0 / 49);
}

TEST(FoldTest, AConvolutionPooledOverItsDepthIsOneOfFewerDimsOverTheDepthTaps) {
  // x [2, 3, 4, 6, 6] through a 3-D transposed convolution (w [3, 5, 3, 3, 3], bias [5], padding 1: the same
  // size out), its mean over the depth: a 2-D transposed convolution of x's depth windows [2, 3 * 3, 6, 6]
  // with the weight's depth taps beside its input channels [9, 5, 3, 3], then 1/4 and the bias per channel
  const Graph graph = WithParameters(
      GraphJson(
          {Input("x", 0, Meta({2, 3, 4, 6, 6}))},
          {NodeJson("conv", "aten.convolution.default",
                    {Ref("x"), Ref("p_w"), Ref("p_b"), {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, true, {0, 0, 0}, 1},
                    Meta({2, 5, 4, 6, 6})),
           NodeJson("mean", "aten.mean.dim", {Ref("conv"), {2}, true}, Meta({2, 5, 1, 6, 6}))},
          {"mean"}),
      {{"w", Meta({3, 5, 3, 3, 3})}, {"b", Meta({5})}});
  const auto folded = FoldSummedProducts(graph);
  ASSERT_TRUE(folded);
  EXPECT_EQ(Ops(*folded),
            (std::vector<std::string>{"aten.unsqueeze.default", "aten.mul.Tensor", "aten.sum.dim_IntList",
                                      "aten.view.default", "aten.permute.default", "aten.clone.default",
                                      "aten.view.default", "aten.convolution.default", "aten.mul.Tensor",
                                      "aten.view.default", "aten.add.Tensor", "aten.view.default"}));
  const Value& window = folded->ValueOf(folded->nodes[1].args[1]);
  EXPECT_EQ(window.meta->shape, (std::vector<int64_t>{3, 4, 1, 1})) << "[depth taps, depth, 1, 1]";
  // depth position i - 1 + k inside [0, 4): tap 0 misses i = 0, tap 2 misses i = 3 (taps first)
  EXPECT_EQ(*window.constant_values, (std::vector<double>{0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0}));
  EXPECT_EQ(ValueAt(*folded, folded->nodes[3].value).meta->shape, (std::vector<int64_t>{2, 9, 6, 6}));
  const Value& permuted = ValueAt(*folded, folded->nodes[4].value);
  EXPECT_EQ(permuted.meta->shape, (std::vector<int64_t>{3, 3, 5, 3, 3}));
  EXPECT_EQ(permuted.meta->stride, (std::vector<int64_t>{135, 9, 27, 3, 1})) << "a view of w: its strides";
  EXPECT_TRUE(folded->nodes[5].keepable && folded->nodes[6].keepable) << "from the weight alone";
  EXPECT_EQ(ValueAt(*folded, folded->nodes[6].value).meta->shape, (std::vector<int64_t>{9, 5, 3, 3}));
  const Node& conv = folded->nodes[7];
  EXPECT_EQ(conv.args[2].kind, Arg::Kind::kNone) << "the bias after the mean, once";
  EXPECT_EQ(conv.args[3].AsInts(), (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(conv.args[4].AsInts(), (std::vector<int64_t>{1, 1})) << "the height and width's padding";
  EXPECT_EQ(ValueAt(*folded, conv.value).meta->shape, (std::vector<int64_t>{2, 5, 6, 6}));
  EXPECT_DOUBLE_EQ(folded->nodes[8].args[1].f, 1.0 / 4);
  EXPECT_EQ(ValueAt(*folded, folded->nodes[9].value).meta->shape, (std::vector<int64_t>{5, 1, 1}));
  EXPECT_EQ(ValueAt(*folded, folded->nodes[11].value).meta->shape, (std::vector<int64_t>{2, 5, 1, 6, 6}));
}

TEST(FoldTest, PooledConvolutionsThatCropOrMixPositionsStay) {
  const auto pooled = [](const std::vector<Json>& chain, int64_t padding = 0, int64_t groups = 1,
                         const std::string& output = "mean") {
    return FoldSummedProducts(ConvolutionGraph(chain, output, padding, groups)).has_value();
  };
  const auto mean_of = [](const std::string& input, const Json& dims, bool keepdim) {
    return NodeJson("mean", "aten.mean.dim", {Ref(input), dims, keepdim},
                    keepdim ? Meta({2, 5, 1, 1}) : Meta({2, 5}));
  };
  EXPECT_TRUE(pooled({mean_of("conv", {2, 3}, true)}));
  EXPECT_FALSE(pooled({mean_of("conv", {2, 3}, true)}, 0, /*groups=*/5)) << "grouped";
  EXPECT_FALSE(pooled({mean_of("conv", {2, 3}, false)}))
      << "without keepdim the chain would broadcast otherwise";
  EXPECT_FALSE(pooled({NodeJson("mean", "aten.mean.dim", {Ref("conv"), {3}, true}, Meta({2, 5, 9, 1}))}))
      << "the last position dim of two: only leading ones fold";
  EXPECT_FALSE(pooled({NodeJson("mul", "aten.mul.Tensor", {Ref("conv"), Ref("p_map")}, Meta({2, 5, 9, 9})),
                       mean_of("mul", {2, 3}, true)}))
      << "a tensor that varies over the positions";
  EXPECT_FALSE(pooled({NodeJson("div", "aten.div.Tensor", {2.0, Ref("conv")}, Meta({2, 5, 9, 9})),
                       mean_of("div", {2, 3}, true)}))
      << "a reciprocal is not affine";
  EXPECT_FALSE(pooled({NodeJson("tanh", "aten.tanh.default", Json::array({Ref("conv")}), Meta({2, 5, 9, 9})),
                       mean_of("tanh", {2, 3}, true)}))
      << "not affine";
}

}  // namespace
}  // namespace egg::expert
