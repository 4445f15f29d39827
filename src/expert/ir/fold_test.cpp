#include "expert/ir/fold.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "expert/ir/test_graphs.h"

namespace egg::expert {
namespace {

using testing::GraphJson;
using testing::Input;
using testing::Meta;
using testing::NodeJson;
using testing::Ref;

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
  Json json = GraphJson({Input("x", 0, Meta({4, 6}, dtype))}, nodes, outputs);
  json["state"] = Json::array(
      {{{"name", "p_w"}, {"kind", "parameter"}, {"target", "w"}, {"meta", Meta({5, 6}, dtype)}},
       {{"name", "p_b"}, {"kind", "parameter"}, {"target", "b"}, {"meta", Meta({5}, dtype)}},
       {{"name", "p_shift"}, {"kind", "parameter"}, {"target", "shift"}, {"meta", Meta({1, 5}, dtype)}}});
  ParsedGraph parsed = ParseGraph(json);
  EXPECT_TRUE(parsed.graph) << parsed.problem;
  return parsed.graph ? *parsed.graph : Graph{};
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
  EXPECT_TRUE(refused({NodeJson("add", "aten.add.Tensor", {Ref("mm"), Ref("x")}, Meta({4, 5})),
                       NodeJson("sum", "aten.sum.dim_IntList", {Ref("add"), {1}}, Meta({4}))},
                      {"sum"}))
      << "a tensor with rows added (x is [4, 6]: a malformed graph refused all the same)";
  EXPECT_TRUE(refused({NodeJson("sum", "aten.sum.dim_IntList", {Ref("mm"), {1}}, Meta({4}, "float16"))},
                      {"sum"}, "float16"))
      << "half products round their sums otherwise";
}

}  // namespace
}  // namespace egg::expert
