// Which values the planner realizes in memory: outputs and the operands of ops left to PyTorch (through a
// zero-copy view, its base; a copy, itself), the results of ops that run in PyTorch, and nothing for a view
// of what is already in memory; a concatenation whose pieces kernels compute is written in place by them.
#include <gtest/gtest.h>

#include <algorithm>

#include "expert/ir/test_graphs.h"
#include "expert/plan/plan.h"

namespace egg::expert {
namespace {

using testing::GraphJson;
using testing::Input;
using testing::LoadGraph;
using testing::Meta;
using testing::NodeJson;
using testing::Ref;

// An op the op table does not know: it runs in PyTorch.
constexpr const char* kForeign = "aten.foreign_op.default";

std::string Name(const Graph& graph, int value) { return ValueAt(graph, value).name; }

// The names of the roots of every kernel of `plan`, in order.
std::vector<std::string> Roots(const Graph& graph, const Plan& plan) {
  std::vector<std::string> names;
  for (const KernelPlan& kernel : plan.kernels) {
    for (int root : kernel.roots) {
      names.push_back(Name(graph, root));
    }
  }
  return names;
}

bool InMemory(const Graph& graph, const Plan& plan, const std::string& name) {
  return std::any_of(plan.memory.begin(), plan.memory.end(),
                     [&](int value) { return Name(graph, value) == name; });
}

Json Relu(const std::string& name, const std::string& input, const std::vector<int64_t>& shape) {
  return NodeJson(name, "aten.relu.default", Json::array({Ref(input)}), Meta(shape));
}

// x [4, 8] -> relu -> `between` (none: relu itself) -> foreign -> neg (the output).
Graph ThroughForeign(const std::string& between) {
  std::vector<Json> nodes = {Relu("relu", "x", {4, 8})};
  std::string operand = "relu";
  if (between == "aten.view.default") {
    nodes.push_back(NodeJson("view", between, {Ref("relu"), Json::array({32})}, Meta({32})));
    operand = "view";
  } else if (!between.empty()) {
    nodes.push_back(NodeJson("copy", between, Json::array({Ref("relu")}), Meta({4, 8})));
    operand = "copy";
  }
  const std::vector<int64_t> shape =
      between == "aten.view.default" ? std::vector<int64_t>{32} : std::vector<int64_t>{4, 8};
  nodes.push_back(NodeJson("foreign", kForeign, Json::array({Ref(operand)}), Meta(shape)));
  nodes.push_back(NodeJson("neg", "aten.neg.default", Json::array({Ref("foreign")}), Meta(shape)));
  return LoadGraph(GraphJson({Input("x", 0, Meta({4, 8}))}, nodes, {"neg"}));
}

TEST(RealizeTest, AnOperandOfAnOpInPyTorchIsRealized) {
  const Graph graph = ThroughForeign("");
  const Plan plan = MakePlan(graph, {});
  EXPECT_EQ(plan.extern_ops, std::vector<std::string>{kForeign});
  EXPECT_EQ(Roots(graph, plan), (std::vector<std::string>{"relu", "neg"}));
  ASSERT_EQ(plan.kernels.size(), 2U) << "the op in PyTorch runs between them";
  ASSERT_EQ(plan.steps.size(), 3U);
  EXPECT_EQ(plan.steps[0].kind, Step::Kind::kKernel);
  EXPECT_EQ(plan.steps[1].kind, Step::Kind::kExtern);
  EXPECT_EQ(plan.steps[1].index, 1) << "the node index of foreign";
  EXPECT_EQ(plan.steps[2].kind, Step::Kind::kKernel);
  EXPECT_TRUE(
      std::any_of(plan.kernels[0].reasons.begin(), plan.kernels[0].reasons.end(),
                  [](const std::string& reason) { return reason.find("PyTorch") != std::string::npos; }))
      << "its reason names why it is realized";
}

TEST(RealizeTest, AZeroCopyViewRealizesItsBaseAndACopyItself) {
  Graph graph = ThroughForeign("aten.view.default");
  Plan plan = MakePlan(graph, {});
  EXPECT_EQ(Roots(graph, plan), (std::vector<std::string>{"relu", "neg"})) << "the view is PyTorch's";
  EXPECT_FALSE(InMemory(graph, plan, "view"));
  EXPECT_TRUE(InMemory(graph, plan, "relu"));

  for (const char* copy : {"aten.clone.default", "aten.contiguous.default"}) {
    graph = ThroughForeign(copy);
    plan = MakePlan(graph, {});
    EXPECT_EQ(Roots(graph, plan), (std::vector<std::string>{"copy", "neg"})) << copy;
    EXPECT_TRUE(InMemory(graph, plan, "copy")) << copy;
    EXPECT_FALSE(InMemory(graph, plan, "relu")) << copy << ": computed inside the copy's kernel";
  }
}

TEST(RealizeTest, AViewOfAnInputNeedsNoKernel) {
  const Graph view = LoadGraph(
      GraphJson({Input("x", 0, Meta({4, 8}))},
                {NodeJson("permute", "aten.permute.default", {Ref("x"), Json::array({1, 0})},
                          {{"shape", {8, 4}}, {"stride", {1, 8}}, {"offset", 0}, {"dtype", "float32"}})},
                {"permute"}));
  Plan plan = MakePlan(view, {});
  EXPECT_TRUE(plan.kernels.empty());
  EXPECT_TRUE(plan.steps.empty());
  EXPECT_TRUE(plan.extern_ops.empty()) << "a view is no op in PyTorch for the plan";

  const Graph flip = LoadGraph(GraphJson(
      {Input("x", 0, Meta({4, 8}))},
      {NodeJson("flip", "aten.flip.default", {Ref("x"), Json::array({0})}, Meta({4, 8}))}, {"flip"}));
  plan = MakePlan(flip, {});
  ASSERT_EQ(plan.kernels.size(), 1U) << "a flip copies";
  EXPECT_EQ(Roots(flip, plan), std::vector<std::string>{"flip"});
}

TEST(RealizeTest, OperandsInKeywordsAndListsAreRealized) {
  Json foreign =
      NodeJson("foreign", kForeign, Json::array({Json::array({Ref("a"), Ref("b")})}), Meta({4, 8}));
  foreign["kwargs"] = {{"other", Ref("c")}};
  const Graph graph = LoadGraph(GraphJson(
      {Input("x", 0, Meta({4, 8}))},
      {Relu("a", "x", {4, 8}), NodeJson("b", "aten.neg.default", Json::array({Ref("x")}), Meta({4, 8})),
       NodeJson("c", "aten.exp.default", Json::array({Ref("x")}), Meta({4, 8})),
       NodeJson("unused", "aten.sin.default", Json::array({Ref("x")}), Meta({4, 8})), foreign},
      {"foreign"}));
  const Plan plan = MakePlan(graph, {});
  std::vector<std::string> roots = Roots(graph, plan);
  std::sort(roots.begin(), roots.end());
  EXPECT_EQ(roots, (std::vector<std::string>{"a", "b", "c"})) << "a dead value is no root";
  for (const char* name : {"a", "b", "c", "foreign"}) {
    EXPECT_TRUE(InMemory(graph, plan, name)) << name;
  }
}

TEST(RealizeTest, TheResultsOfAnOpInPyTorchAreInMemoryForLaterKernels) {
  // foreign returns a pair; a kernel adds its two elements.
  const Graph graph = LoadGraph(GraphJson(
      {Input("x", 0, Meta({4, 8}))},
      {NodeJson("pair", kForeign, Json::array({Ref("x")}), Json::array({Meta({4, 8}), Meta({4, 8})})),
       NodeJson("first", "getitem", {Ref("pair"), 0}, Meta({4, 8})),
       NodeJson("second", "getitem", {Ref("pair"), 1}, Meta({4, 8})),
       NodeJson("add", "aten.add.Tensor", {Ref("first"), Ref("second")}, Meta({4, 8}))},
      {"add"}));
  const Plan plan = MakePlan(graph, {});
  EXPECT_EQ(plan.extern_ops, std::vector<std::string>{kForeign});
  EXPECT_EQ(Roots(graph, plan), std::vector<std::string>{"add"})
      << "getitems of an op in PyTorch are no roots";
  ASSERT_EQ(plan.memory_before.size(), 1U);
  std::vector<std::string> readable;
  for (const auto& [value, layout] : plan.memory_before[0]) {
    readable.push_back(Name(graph, value));
  }
  std::sort(readable.begin(), readable.end());
  EXPECT_EQ(readable, (std::vector<std::string>{"first", "second", "x"}));
  EXPECT_TRUE(InMemory(graph, plan, "first"));
  EXPECT_FALSE(InMemory(graph, plan, "pair")) << "the tuple itself is no tensor";
}

TEST(RealizeTest, ARecurrentLayerReadsAViewOfItsInputFromADenseCopy) {
  const Graph plain = testing::Fixture("level3_38_LSTMBidirectional");
  const Plan direct = MakePlan(plain, {});
  ASSERT_FALSE(direct.kernels.empty());
  EXPECT_EQ(direct.kernels[0].kind, KernelKind::kRecurrent) << "the input is read where it is";

  // The same layer over x [64, 10, 32] permuted to [10, 64, 32] (strides 32, 320, 1).
  Json ir = testing::FixtureJson("level3_38_LSTMBidirectional");
  ir["inputs"][0]["meta"] = Meta({64, 10, 32});
  Json permute =
      NodeJson("xp", "aten.permute.default", {Ref("x"), Json::array({1, 0, 2})}, Meta({10, 64, 32}));
  permute["meta"]["stride"] = Json::array({32, 320, 1});
  ir["nodes"][0]["args"][0] = Ref("xp");
  ir["nodes"].insert(ir["nodes"].begin(), permute);
  const Graph graph = LoadGraph(ir);
  const Plan plan = MakePlan(graph, {});
  ASSERT_EQ(plan.kernels.size(), direct.kernels.size() + 1);
  EXPECT_EQ(plan.kernels[0].kind, KernelKind::kPointwise);
  EXPECT_EQ(Roots(graph, plan).front(), "xp") << "the view is realized, not left to PyTorch";
  EXPECT_EQ(plan.kernels[1].kind, KernelKind::kRecurrent);
  const int xp = graph.nodes[0].value;
  ASSERT_EQ(plan.memory_before[1].count(xp), 1U);
  EXPECT_EQ(plan.memory_before[1].at(xp).stride, (std::vector<int64_t>{2048, 32, 1}))
      << "in its own dense layout";
}

// x [4, 8]: a = exp(x), b = tanh(x), cat([a, b], 1) the output, and with `a_read_by` an op that also reads a
// (its result an output too): "output" returns a itself, "view" a view of a, "add" y + a for y [2, 4, 8] (a
// kernel of its own, over another domain, reading a from memory).
Graph Concatenation(const std::string& a_read_by) {
  std::vector<Json> nodes = {
      NodeJson("a", "aten.exp.default", Json::array({Ref("x")}), Meta({4, 8})),
      NodeJson("b", "aten.tanh.default", Json::array({Ref("x")}), Meta({4, 8})),
      NodeJson("cat", "aten.cat.default", {Json::array({Ref("a"), Ref("b")}), 1}, Meta({4, 16}))};
  std::vector<std::string> outputs = {"cat"};
  if (a_read_by == "output") {
    outputs.push_back("a");
  } else if (a_read_by == "view") {
    nodes.push_back(NodeJson("view", "aten.view.default", {Ref("a"), Json::array({32})}, Meta({32})));
    outputs.push_back("view");
  } else if (a_read_by == "add") {
    nodes.push_back(NodeJson("add", "aten.add.Tensor", {Ref("y"), Ref("a")}, Meta({2, 4, 8})));
    outputs.push_back("add");
  }
  return LoadGraph(GraphJson({Input("x", 0, Meta({4, 8})), Input("y", 1, Meta({2, 4, 8}))}, nodes, outputs));
}

TEST(RealizeTest, AConcatenationIsWrittenInPlaceByItsPieces) {
  const Graph graph = Concatenation("add");
  const Plan plan = MakePlan(graph, {});
  const int a = testing::ValueNamed(graph, "a");
  const int b = testing::ValueNamed(graph, "b");
  const int cat = testing::ValueNamed(graph, "cat");
  ASSERT_EQ(plan.slots.size(), 2U);
  EXPECT_EQ(plan.slots.at(a).cat, cat);
  EXPECT_EQ(plan.slots.at(a).dim, 1);
  EXPECT_EQ(plan.slots.at(a).offset, 0);
  EXPECT_EQ(plan.slots.at(b).offset, 8);
  const std::vector<std::string> roots = Roots(graph, plan);
  EXPECT_EQ(std::count(roots.begin(), roots.end(), "cat"), 0) << "no kernel copies the concatenation";
  EXPECT_TRUE(InMemory(graph, plan, "cat"));
  // a is stored in the cat's strides, and the kernel reading it reads it so
  EXPECT_EQ(StoreLayout(graph, plan, a).stride, (std::vector<int64_t>{16, 1}));
  EXPECT_EQ(StoreLayout(graph, plan, testing::ValueNamed(graph, "add")).stride,
            (std::vector<int64_t>{32, 8, 1}));
  const auto reader = std::find_if(plan.memory_before.begin(), plan.memory_before.end(),
                                   [&](const auto& memory) { return memory.count(a) != 0; });
  ASSERT_NE(reader, plan.memory_before.end());
  EXPECT_EQ(reader->at(a).stride, (std::vector<int64_t>{16, 1}));

  PlanOptions apart;
  apart.concat_in_place = false;
  const Plan copied = MakePlan(graph, apart);
  EXPECT_TRUE(copied.slots.empty());
  const std::vector<std::string> copied_roots = Roots(graph, copied);
  EXPECT_EQ(std::count(copied_roots.begin(), copied_roots.end(), "cat"), 1);
}

TEST(RealizeTest, AConcatenationWithAPieceReadOutsideKernelsIsCopied) {
  // An output would be a view of the cat's buffer; a view of a non-contiguous piece may not exist.
  for (const char* reader : {"output", "view"}) {
    const Graph graph = Concatenation(reader);
    const Plan plan = MakePlan(graph, {});
    EXPECT_TRUE(plan.slots.empty()) << reader;
    const std::vector<std::string> roots = Roots(graph, plan);
    EXPECT_EQ(std::count(roots.begin(), roots.end(), "cat"), 1) << reader;
  }
}

TEST(RealizeTest, APoolsOutputIsComputedByThePoolKernel) {
  const Graph graph = testing::Fixture("level1_42_Max_Pooling_2D");
  const Plan plan = MakePlan(graph, {});
  ASSERT_EQ(plan.kernels.size(), 1U);
  EXPECT_EQ(plan.kernels[0].kind, KernelKind::kPool);
  EXPECT_TRUE(plan.extern_ops.empty());
  EXPECT_EQ(plan.kernels[0].stores, std::vector<int>{graph.outputs[0].value}) << "the getitem is the result";
}

}  // namespace
}  // namespace egg::expert
