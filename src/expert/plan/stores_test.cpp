// What each kernel writes: only the results an output, a mutation, an op in PyTorch or a later kernel reads
// (a view's base in its place), and the memory each kernel may read once the stores are final.
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
using testing::ValueNamed;

std::vector<std::string> Names(const Graph& graph, const std::vector<int>& values) {
  std::vector<std::string> names;
  for (int value : values) {
    names.push_back(ValueAt(graph, value).name);
  }
  return names;
}

std::vector<std::string> Names(const Graph& graph, const std::set<int>& values) {
  return Names(graph, std::vector<int>(values.begin(), values.end()));
}

std::vector<std::string> Names(const Graph& graph, const std::map<int, TensorMeta>& memory) {
  std::vector<int> values;
  for (const auto& [value, layout] : memory) {
    values.push_back(value);
  }
  return Names(graph, values);
}

// x [8] + the buffer `running` [8] -> add, then add * 2 -> the output; with `mutate`, add is also written
// back to the buffer.
Graph Accumulate(bool mutate) {
  Json ir = GraphJson({Input("x", 0, Meta({8}))},
                      {NodeJson("add", "aten.add.Tensor", {Ref("x"), Ref("b_running")}, Meta({8})),
                       NodeJson("mul", "aten.mul.Tensor", {Ref("add"), 2.0}, Meta({8}))},
                      {"mul"});
  ir["state"] =
      Json::array({{{"name", "b_running"}, {"kind", "buffer"}, {"target", "running"}, {"meta", Meta({8})}}});
  if (mutate) {
    ir["mutations"] = Json::array({{{"target", "running"}, {"value", Ref("add")}}});
  }
  return LoadGraph(ir);
}

TEST(StoresTest, AValueReadOnlyInRegistersIsNotStored) {
  const Graph graph = Accumulate(false);
  const Plan plan = MakePlan(graph, {});
  ASSERT_EQ(plan.kernels.size(), 1U);
  EXPECT_EQ(Names(graph, plan.kernels[0].roots), std::vector<std::string>{"mul"});
  EXPECT_EQ(Names(graph, plan.kernels[0].stores), std::vector<std::string>{"mul"});
  EXPECT_EQ(Names(graph, plan.memory), (std::vector<std::string>{"x", "b_running", "mul"}));
}

TEST(StoresTest, AMutatedBufferIsStored) {
  const Graph graph = Accumulate(true);
  const Plan plan = MakePlan(graph, {});
  ASSERT_EQ(plan.kernels.size(), 1U) << "the write-back and the output share a kernel";
  EXPECT_EQ(Names(graph, plan.kernels[0].stores), (std::vector<std::string>{"add", "mul"}));
  EXPECT_TRUE(plan.memory.count(ValueNamed(graph, "add")) != 0);
}

TEST(StoresTest, AFusedReductionStoresOnlyTheOutput) {
  const Graph graph = testing::Fixture("level1_23_Softmax");
  const Plan plan = MakePlan(graph, {});
  ASSERT_EQ(plan.kernels.size(), 1U);
  EXPECT_EQ(Names(graph, plan.kernels[0].stores), std::vector<std::string>{"div"});
  for (const char* name : {"amax", "sub", "exp", "sum_1"}) {
    EXPECT_EQ(plan.memory.count(ValueNamed(graph, name)), 0U) << name;
  }
}

TEST(StoresTest, AReductionALaterKernelReadsIsStored) {
  const Graph graph = testing::Fixture("level1_23_Softmax");
  PlanOptions options;
  options.fuse_reductions = false;
  const Plan plan = MakePlan(graph, options);
  ASSERT_GE(plan.kernels.size(), 2U);
  EXPECT_EQ(Names(graph, plan.kernels[0].stores), std::vector<std::string>{"amax"});
  ASSERT_EQ(plan.memory_before.size(), plan.kernels.size());
  EXPECT_EQ(Names(graph, plan.memory_before[0]), std::vector<std::string>{"x"});
  EXPECT_EQ(Names(graph, plan.memory_before[1]), (std::vector<std::string>{"x", "amax"}));
  // Every store is read: by the output or by a later kernel.
  const int output = graph.outputs[0].value;
  for (size_t k = 0; k < plan.kernels.size(); ++k) {
    for (int value : plan.kernels[k].stores) {
      bool read = value == output;
      for (size_t later = k + 1; later < plan.kernels.size(); ++later) {
        read = read || plan.memory_before[later].count(value) != 0;
      }
      EXPECT_TRUE(read) << plan.kernels[k].name << " stores " << ValueAt(graph, value).name;
    }
  }
  EXPECT_EQ(plan.memory.count(ValueNamed(graph, "exp")), 0U) << "recomputed where it is read";
}

TEST(StoresTest, AnOutputViewStoresItsBase) {
  // relu(x) [4, 8] returned as a [32] view, and exp(relu) returned too.
  const Graph graph = LoadGraph(
      GraphJson({Input("x", 0, Meta({4, 8}))},
                {NodeJson("relu", "aten.relu.default", Json::array({Ref("x")}), Meta({4, 8})),
                 NodeJson("view", "aten.view.default", {Ref("relu"), Json::array({32})}, Meta({32})),
                 NodeJson("exp", "aten.exp.default", Json::array({Ref("relu")}), Meta({4, 8}))},
                {"view", "exp"}));
  const Plan plan = MakePlan(graph, {});
  ASSERT_EQ(plan.kernels.size(), 1U);
  EXPECT_EQ(Names(graph, plan.kernels[0].stores), (std::vector<std::string>{"relu", "exp"}));
  EXPECT_EQ(plan.memory.count(ValueNamed(graph, "view")), 0U) << "the view is made by PyTorch";
}

TEST(StoresTest, ALaterKernelReadsWhatItMayWithLayouts) {
  // sum over rows of x [4, 8], then x / sum: two kernels when reductions take no epilogue.
  const Graph graph = LoadGraph(
      GraphJson({Input("x", 0, Meta({4, 8}))},
                {NodeJson("sum", "aten.sum.dim_IntList", {Ref("x"), Json::array({1}), true}, Meta({4, 1})),
                 NodeJson("div", "aten.div.Tensor", {Ref("x"), Ref("sum")}, Meta({4, 8}))},
                {"div"}));
  PlanOptions options;
  options.fuse_epilogues = false;
  const Plan plan = MakePlan(graph, options);
  ASSERT_EQ(plan.kernels.size(), 2U);
  EXPECT_EQ(plan.kernels[0].kind, KernelKind::kReduction);
  EXPECT_EQ(Names(graph, plan.kernels[0].stores), std::vector<std::string>{"sum"});
  EXPECT_EQ(Names(graph, plan.kernels[1].stores), std::vector<std::string>{"div"});
  const int sum = ValueNamed(graph, "sum");
  ASSERT_EQ(plan.memory_before[1].count(sum), 1U);
  EXPECT_EQ(plan.memory_before[1].at(sum).shape, (std::vector<int64_t>{4, 1}));
  EXPECT_EQ(plan.memory_before[1].at(sum).stride, (std::vector<int64_t>{1, 1})) << "stored dense";
  EXPECT_EQ(plan.memory_before[0].count(sum), 0U) << "not before it is computed";
  EXPECT_EQ(Names(graph, plan.memory), (std::vector<std::string>{"x", "sum", "div"}));
}

}  // namespace
}  // namespace egg::expert
