// The pointwise family: a flat design (xblock the next power of two of the elements, at most 1024), any
// xblock up to kMaxTile, xblock moves at the tiling stage only, and its lowering.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "expert/codegen/kernel_codegen.h"
#include "expert/codegen/test_kernels.h"
#include "expert/design/legality.h"
#include "expert/families/family.h"
#include "expert/families/test_moves.h"
#include "expert/ir/test_graphs.h"

namespace egg::expert {
namespace {

using testing::RecordingSink;

using testing::GraphJson;
using testing::Input;
using testing::LoadGraph;
using testing::Meta;
using testing::NodeJson;
using testing::Ref;

const KernelFamily& Pointwise() { return FamilyOf(KernelKind::kPointwise); }

KernelPlan Kernel(const std::vector<int64_t>& shape) {
  KernelPlan kernel;
  kernel.name = "egg_k0_relu";
  kernel.shape = shape;
  kernel.rows = Product(shape);
  kernel.design = Pointwise().DefaultDesign(kernel, 0, Precision::kUnset);
  return kernel;
}

TEST(PointwiseFamilyTest, DefaultDesignIsFlatUpTo1024) {
  EXPECT_EQ(Pointwise().Name(), "pointwise");
  EXPECT_EQ(Kernel({3, 5}).design.xblock, 16);
  EXPECT_EQ(Kernel({1000}).design.xblock, 1024);
  EXPECT_EQ(Kernel({64, 4096}).design.xblock, 1024);
  EXPECT_EQ(Kernel({}).design.xblock, 1);  // a scalar
  for (int seed = 0; seed < 3; ++seed) {
    const KernelDesign design = Pointwise().DefaultDesign(Kernel({1000}), seed, Precision::kTf32);
    EXPECT_EQ(design.algorithm, Algorithm::kFlat);
    EXPECT_EQ(design.precision, Precision::kUnset);  // no products
    EXPECT_TRUE(DesignFits(Kernel({1000}), design));
  }
}

TEST(PointwiseFamilyTest, FitsAnyXBlockUpToTheTileLimit) {
  const KernelPlan kernel = Kernel({1000});
  KernelDesign design = kernel.design;
  design.xblock = kMaxTile;
  EXPECT_TRUE(Pointwise().Fits(kernel, design));
  design.xblock = kMaxTile * 2;
  EXPECT_FALSE(Pointwise().Fits(kernel, design));
}

TEST(PointwiseFamilyTest, OnlyTilingAndMemoryStagesMove) {
  const KernelPlan kernel = Kernel({1000});  // xblock 1024
  RecordingSink tiling;
  Pointwise().Moves(SearchStage::kTiling, kernel, tiling);
  EXPECT_EQ(tiling.all_moves,
            (std::vector<std::string>{"tile egg_k0_relu xblock 512", "tile egg_k0_relu xblock 256",
                                      "tile egg_k0_relu xblock 128", "tile egg_k0_relu xblock 64"}));
  RecordingSink memory;
  Pointwise().Moves(SearchStage::kMemory, kernel, memory);
  EXPECT_EQ(memory.all_moves.size(), 4U);  // 1, 2, 8 and 16 warps
  for (SearchStage stage : {SearchStage::kAlgorithm, SearchStage::kMapping}) {
    RecordingSink none;
    Pointwise().Moves(stage, kernel, none);
    EXPECT_TRUE(none.all_moves.empty());
  }
}

TEST(PointwiseFamilyTest, LowersThePlannedKernel) {
  const Graph graph = LoadGraph(
      GraphJson({Input("x", 0, Meta({4, 8}))},
                {NodeJson("relu", "aten.relu.default", Json::array({Ref("x")}), Meta({4, 8}))}, {"relu"}));
  const Plan plan = MakePlan(graph, {});
  ASSERT_EQ(plan.kernels.size(), 1U);
  const KernelPlan& kernel = plan.kernels[0];
  ASSERT_EQ(kernel.kind, KernelKind::kPointwise);
  EXPECT_EQ(kernel.design.xblock, 32);
  const std::map<int, TensorMeta> layouts = testing::DenseStores(graph, kernel);
  const KernelSource source = Pointwise().Lower(graph, kernel, plan.memory_before[0], layouts);
  EXPECT_EQ(source.name, kernel.name);
  EXPECT_NE(source.code.find("def " + kernel.name + "("), std::string::npos) << source.code;
  EXPECT_NE(source.code.find("tl.store("), std::string::npos) << source.code;
  ASSERT_EQ(source.launches.size(), 1U);
}

}  // namespace
}  // namespace egg::expert
