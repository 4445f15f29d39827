// The analyses read the typed loads and stores of a lowered kernel: a planned pointwise kernel reads its
// inputs and writes its outputs, scratch buffers are no graph values, bytes count each value once, and a
// function's hand-written accesses count through its launches' pointers, loops nest by depth, and updates
// and products are found in the loops they run in.
#include "expert/kir/analysis.h"

#include <gtest/gtest.h>

#include "expert/codegen/kernel_codegen.h"
#include "expert/codegen/test_kernels.h"
#include "expert/ir/test_graphs.h"

namespace egg::expert::kir {
namespace {

using egg::expert::testing::GraphJson;
using egg::expert::testing::Input;
using egg::expert::testing::LoadGraph;
using egg::expert::testing::Meta;
using egg::expert::testing::NodeJson;
using egg::expert::testing::Ref;

// relu(x) + y over [4, 8] float32, and its sum as a second output of bf16 y.
Graph TwoInputs() {
  return LoadGraph(
      GraphJson({Input("x", 0, Meta({4, 8})), Input("y", 1, Meta({8}, "bfloat16"))},
                {NodeJson("relu", "aten.relu.default", Json::array({Ref("x")}), Meta({4, 8})),
                 NodeJson("add", "aten.add.Tensor", Json::array({Ref("relu"), Ref("y")}), Meta({4, 8}))},
                {"add"}));
}

Kernel Lowered(const Graph& graph) {
  const Plan plan = MakePlan(graph, {});
  EXPECT_EQ(plan.kernels.size(), 1U);
  return PointwiseProgram(graph, plan.kernels.at(0), plan.memory_before.at(0),
                          egg::expert::testing::DenseStores(graph, plan.kernels.at(0)));
}

TEST(AnalysisTest, APointwiseKernelReadsItsInputsAndWritesItsOutput) {
  const Graph graph = TwoInputs();
  const Kernel kernel = Lowered(graph);
  const int add = graph.nodes.back().value;
  EXPECT_EQ(Reads(kernel), (std::set<int>{graph.Inputs()[0], graph.Inputs()[1]}));
  EXPECT_EQ(Writes(kernel), std::set<int>{add});
  // x and the output 32 floats each, y 8 bf16 values
  EXPECT_EQ(BytesMoved(kernel, graph), 32 * 4 + 8 * 2 + 32 * 4);
}

TEST(AnalysisTest, ScratchBuffersAreNotGraphValues) {
  Kernel kernel;
  kernel.functions.resize(1);
  Statement load;
  load.kind = Statement::Kind::kLoad;
  load.buffer = ScratchId(0);
  Statement store = load;
  store.kind = Statement::Kind::kStore;
  store.buffer = 7;
  kernel.functions[0].body = {load, store, Statement::Text(1, "tl.load(ptr9 + (0))")};
  EXPECT_TRUE(Reads(kernel).empty()) << "a scratch load, and text the analyses do not read";
  EXPECT_EQ(Writes(kernel), std::set<int>{7});
}

TEST(AnalysisTest, HandWrittenAccessesReadAndWriteWhatEachLaunchPasses) {
  // one function launched twice (a recurrent layer's step): parameter 0 read, 1 written, 2 neither
  Kernel kernel;
  kernel.functions.resize(1);
  kernel.functions[0].name = "step";
  kernel.functions[0].text_loads = {0};
  kernel.functions[0].text_stores = {1};
  kernel.launches = {{"step", {3, ScratchId(0), 5}, "(1,)", {}, {}},
                     {"step", {4, 6, 7}, "(1,)", {}, {}},
                     {"other", {8, 9, 10}, "(1,)", {}, {}}};
  EXPECT_EQ(Reads(kernel), (std::set<int>{3, 4})) << "the other function's launch passes nothing to these";
  EXPECT_EQ(Writes(kernel), std::set<int>{6}) << "scratch left out";
}

TEST(AnalysisTest, StagedTilesCountTheKStepLoadsOfEachSide) {
  Kernel kernel;
  kernel.functions.resize(2);
  Statement load;
  load.kind = Statement::Kind::kLoad;
  load.buffer = 0;
  Statement a = load;
  a.side = TileSide::kA;
  Statement b = load;
  b.side = TileSide::kB;
  Statement both = load;
  both.side = TileSide::kBoth;
  Statement side_text = Statement::Text(2, "a = tl.load(ptr0 + (kaindex), mmask & kamask, other=0.0)");
  side_text.side = TileSide::kA;  // a side on text is no load: not counted
  kernel.functions[0].body = {load, a, a, side_text};
  kernel.functions[1].body = {b, both};
  const StagedTiles tiles = StagedTileLoads(kernel);
  EXPECT_EQ(tiles.a, 3) << "two A loads and one spanning both";
  EXPECT_EQ(tiles.b, 2);
  EXPECT_EQ(StagedTileLoads(Kernel{}).a, 0);
}

TEST(AnalysisTest, LoopsNestByDepthWhateverTheTextBetweenThem) {
  Function function;
  function.body = {Statement::Loop(1, "tap", LoopRange::Upto("9")),
                   Statement::Text(0, "        pos0 = tap // 3"),  // appended as already indented: depth 2
                   Statement::Loop(2, "k0", LoopRange::Stepped("0", "64", "BLOCK_K")),
                   Statement::Text(3, "acc += tl.dot(a, b)"),
                   Statement::Text(0, ""),  // a blank line closes nothing
                   Statement::Loop(3, "t0", LoopRange::Unrolled("3")),
                   Statement::Text(1, "acc = acc * 2"),
                   Statement::Loop(1, "s", LoopRange::Upto("SEQ"))};
  const std::vector<LoopNest> loops = Loops(function);
  ASSERT_EQ(loops.size(), 4U);
  EXPECT_EQ(loops[0].variable, "tap");
  EXPECT_TRUE(loops[0].enclosing.empty());
  EXPECT_EQ(loops[1].variable, "k0");
  EXPECT_EQ(loops[1].enclosing, std::vector<std::string>{"tap"}) << "the indented text line stays inside tap";
  EXPECT_EQ(loops[1].range.step, "BLOCK_K");
  EXPECT_EQ(loops[2].enclosing, (std::vector<std::string>{"tap", "k0"}));
  EXPECT_TRUE(loops[2].range.unrolled);
  EXPECT_TRUE(loops[3].enclosing.empty()) << "a depth-1 line ended the tap loop";
  EXPECT_TRUE(Loops(Function{}).empty());
}

TEST(AnalysisTest, UpdatesAndProductsAreFoundInTheLoopsTheyRunIn) {
  Function function;
  function.body = {Statement::Tile(1, "acc", {"BLOCK_M", "BLOCK_N"}, "tl.float32"),
                   Statement::Loop(1, "k0", LoopRange::Stepped("0", "64", "BLOCK_K")),
                   Statement::Dot(2, "s", {"q", "kt", "", Precision::kTf32x3}),
                   Statement::Accumulate(2, "acc", {"a", "b", "", Precision::kIeee}),
                   Statement::Text(1, "acc = tl.sum(acc, axis=1)[:, None]"),
                   Statement::Reduce(1, Reduction{{"acc"}, {"acc"}, Combine::kAdd, "", 1, true}),
                   Statement::Sum(1, "acc", "bias")};
  const std::vector<UpdateSite> updates = Updates(function);
  ASSERT_EQ(updates.size(), 2U) << "the fresh product s is no update; text is not read";
  EXPECT_EQ(updates[0].loops, std::vector<std::string>{"k0"});
  EXPECT_TRUE(updates[0].statement.product.has_value());
  EXPECT_TRUE(updates[1].loops.empty());
  EXPECT_EQ(updates[1].statement.data, "bias");
  const std::vector<UpdateSite> products = Products(function);
  ASSERT_EQ(products.size(), 2U);
  EXPECT_EQ(products[0].statement.name, "s");
  EXPECT_EQ(products[0].statement.product->precision, Precision::kTf32x3);
  EXPECT_EQ(products[1].statement.product->precision, Precision::kIeee);
  EXPECT_EQ(products[1].loops, std::vector<std::string>{"k0"});
  const std::vector<UpdateSite> reductions = Reductions(function);
  ASSERT_EQ(reductions.size(), 1U) << "the text line is not read";
  EXPECT_TRUE(reductions[0].loops.empty()) << "after the K loop";
  EXPECT_EQ(reductions[0].statement.reduction->results, std::vector<std::string>{"acc"});
}

}  // namespace
}  // namespace egg::expert::kir
