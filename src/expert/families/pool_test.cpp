// The pool family: a direct design (xblock the next power of two of the outputs, at most 256), any xblock up
// to kMaxTile, xblock and warp moves only, and its lowering.
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

const KernelFamily& Pool() { return FamilyOf(KernelKind::kPool); }

KernelPlan Kernel(const std::vector<int64_t>& outputs) {
  KernelPlan kernel;
  kernel.name = "egg_k0_pool";
  kernel.kind = KernelKind::kPool;
  kernel.shape = outputs;
  kernel.rows = Product(outputs);
  kernel.design = Pool().DefaultDesign(kernel, 0, Precision::kUnset);
  return kernel;
}

TEST(PoolFamilyTest, DefaultDesignIsDirectUpTo256) {
  EXPECT_EQ(Pool().Name(), "pool");
  EXPECT_EQ(Kernel({2, 3, 3, 3}).design.xblock, 64);  // 54 outputs
  EXPECT_EQ(Kernel({2, 3, 32, 32}).design.xblock, 256);
  for (int seed = 0; seed < 3; ++seed) {
    const KernelDesign design = Pool().DefaultDesign(Kernel({5}), seed, Precision::kIeee);
    EXPECT_EQ(design.algorithm, Algorithm::kDirect);
    EXPECT_EQ(design.xblock, 8);
    EXPECT_EQ(design.precision, Precision::kUnset);
  }
}

TEST(PoolFamilyTest, FitsAnyXBlockUpToTheTileLimit) {
  const KernelPlan kernel = Kernel({2, 3, 32, 32});
  KernelDesign design = kernel.design;
  EXPECT_TRUE(DesignFits(kernel, design));
  design.xblock = kMaxTile;
  EXPECT_TRUE(Pool().Fits(kernel, design));
  design.xblock = kMaxTile * 2;
  EXPECT_FALSE(Pool().Fits(kernel, design));
  EXPECT_EQ(Pool().Rule().rfind("pool: ", 0), 0U);
}

TEST(PoolFamilyTest, TilingMovesTheXBlockOverTheOutputs) {
  const KernelPlan kernel = Kernel({2, 3, 32, 32});  // 6144 outputs, xblock 256
  RecordingSink tiling;
  Pool().Moves(SearchStage::kTiling, kernel, tiling);
  ASSERT_EQ(tiling.all_moves.size(), 7U);  // 64 .. 8192 but 256
  EXPECT_EQ(tiling.all_moves[0], "tile egg_k0_pool xblock 128");
  EXPECT_EQ(tiling.all_moves[1], "tile egg_k0_pool xblock 512");
  EXPECT_EQ(tiling.Designs().back().xblock, 8192);
  for (const KernelDesign& design : tiling.Designs()) {
    EXPECT_EQ(design.algorithm, Algorithm::kDirect);
  }
  for (SearchStage stage : {SearchStage::kAlgorithm, SearchStage::kMapping}) {
    RecordingSink none;
    Pool().Moves(stage, kernel, none);
    EXPECT_TRUE(none.all_moves.empty());
  }
  RecordingSink memory;
  Pool().Moves(SearchStage::kMemory, kernel, memory);
  EXPECT_EQ(memory.all_moves.size(), 4U);
}

TEST(PoolFamilyTest, LowersThePlannedPool) {
  const Graph graph = testing::Fixture("level1_42_Max_Pooling_2D");
  const Plan plan = MakePlan(graph, {});
  ASSERT_EQ(plan.kernels.size(), 1U);
  const KernelPlan& kernel = plan.kernels[0];
  ASSERT_EQ(kernel.kind, KernelKind::kPool);
  EXPECT_EQ(kernel.design.algorithm, Algorithm::kDirect);
  EXPECT_LE(kernel.design.xblock, 256);
  const std::map<int, TensorMeta> layouts = testing::DenseStores(graph, kernel);
  const KernelSource source = Pool().Lower(graph, kernel, plan.memory_before[0], layouts);
  EXPECT_EQ(source.name, kernel.name);
  EXPECT_NE(source.code.find("def " + kernel.name + "("), std::string::npos) << source.code;
  EXPECT_NE(source.code.find("float('-inf')"), std::string::npos) << source.code;
}

}  // namespace
}  // namespace egg::expert
