// The attention family: a flash design (64 query rows x 64 keys, seed 2 128 rows of 8 warps), never ieee
// products (its fallback maps ieee to tf32x3), its registers and shared memory, its moves (the unfused
// candidate first), and its lowering.
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
#include "expert/kir/analysis.h"

namespace egg::expert {
namespace {

using testing::RecordingSink;

const KernelFamily& Attention() { return FamilyOf(KernelKind::kAttention); }

KernelPlan Flash(int64_t lq, int64_t lk, int64_t d) {
  KernelPlan kernel;
  kernel.name = "k";
  kernel.kind = KernelKind::kAttention;
  kernel.attention = AttentionSpec{};
  kernel.attention->batch = 4;
  kernel.attention->lq = lq;
  kernel.attention->lk = lk;
  kernel.attention->d = kernel.attention->dv = d;
  kernel.design = Attention().DefaultDesign(kernel, 0, Precision::kUnset);
  return kernel;
}

TEST(AttentionFamilyTest, DefaultAndFallbackDesigns) {
  const KernelDesign design = Flash(64, 64, 32).design;
  EXPECT_EQ(design.algorithm, Algorithm::kFlash);
  EXPECT_EQ(design.xblock, 64);
  EXPECT_EQ(design.yblock, 64);
  EXPECT_EQ(design.num_stages, 2);
  EXPECT_EQ(design.precision, Precision::kTf32x3);
  const KernelDesign seed2 = Attention().DefaultDesign(Flash(256, 64, 32), 2, Precision::kUnset);
  EXPECT_EQ(seed2.xblock, 128);
  EXPECT_EQ(seed2.num_warps, 8);
  EXPECT_EQ(Flash(8, 8, 32).design.xblock, 16);      // tl.dot's smallest side
  EXPECT_EQ(Flash(64, 256, 256).design.yblock, 32);  // wide heads: half the keys, one stage
  EXPECT_EQ(Flash(64, 256, 256).design.num_stages, 1);

  const KernelPlan kernel = Flash(64, 64, 32);
  EXPECT_EQ(Attention().DefaultDesign(kernel, 0, Precision::kTf32).precision, Precision::kTf32x3);
  EXPECT_EQ(Attention().FallbackDesign(kernel, 0, Precision::kIeee).precision, Precision::kTf32x3);
  EXPECT_EQ(Attention().FallbackDesign(kernel, 0, Precision::kUnset).precision, Precision::kTf32x3);
  EXPECT_EQ(Attention().FallbackDesign(kernel, 0, Precision::kTf32).precision, Precision::kTf32);
}

TEST(AttentionFamilyTest, FitsFlashTilesWithTensorCoreProducts) {
  const KernelPlan kernel = Flash(64, 64, 32);
  KernelDesign design = kernel.design;
  EXPECT_TRUE(DesignFits(kernel, design));
  design.precision = Precision::kTf32;
  EXPECT_TRUE(Attention().Fits(kernel, design));
  design.precision = Precision::kIeee;  // never FMA products
  EXPECT_FALSE(Attention().Fits(kernel, design));
  design = kernel.design;
  design.yblock = 256;
  EXPECT_FALSE(Attention().Fits(kernel, design));
  design.yblock = 8;
  EXPECT_FALSE(Attention().Fits(kernel, design));
  design = kernel.design;
  design.algorithm = Algorithm::kTiled;
  EXPECT_FALSE(Attention().Fits(kernel, design));
  EXPECT_FALSE(Attention().Fits(KernelPlan{}, kernel.design));  // no attention spec
  EXPECT_EQ(
      Attention().Rule(),
      "attention: algorithm flash, xblock and yblock powers of two in [16, 128], precision tf32 or tf32x3");
}

TEST(AttentionFamilyTest, FitsResourcesCountsRegistersAndStagedTiles) {
  const KernelPlan wide = Flash(64, 256, 256);
  KernelDesign design = wide.design;
  design.xblock = 16;
  design.yblock = 32;
  design.num_warps = 16;
  design.num_stages = 1;  // (16 x 256 + 32 x 512) floats: 80 KiB
  EXPECT_TRUE(Attention().FitsResources(wide, design));
  design.yblock = 128;  // (16 x 256 + 128 x 512) floats: 272 KiB
  EXPECT_FALSE(Attention().FitsResources(wide, design));
  design = Flash(64, 64, 32).design;
  EXPECT_TRUE(Attention().FitsResources(Flash(64, 64, 32), design));
  design.xblock = design.yblock = 128;  // 128 x (128 + 32) scores and outputs over 128 threads
  EXPECT_FALSE(Attention().FitsResources(Flash(64, 64, 32), design));
}

TEST(AttentionFamilyTest, MovesPerStage) {
  const KernelPlan kernel = Flash(256, 256, 32);
  RecordingSink algorithm;
  algorithm.incumbent.kernels = {{"k", kernel.design}, {"other", KernelDesign{}}};
  Attention().Moves(SearchStage::kAlgorithm, kernel, algorithm);
  EXPECT_TRUE(algorithm.moves.empty());
  ASSERT_EQ(algorithm.candidates.size(), 1U);
  EXPECT_EQ(algorithm.candidates[0], "algorithm k unfused");
  EXPECT_FALSE(algorithm.candidate_designs[0].plan.fuse_attention);
  EXPECT_EQ(algorithm.candidate_designs[0].kernels.count("k"), 0U);
  EXPECT_EQ(algorithm.candidate_designs[0].kernels.count("other"), 1U);

  RecordingSink mapping;
  Attention().Moves(SearchStage::kMapping, kernel, mapping);
  EXPECT_EQ(mapping.MoveNames(),
            (std::vector<std::string>{"rows per program k 32", "rows per program k 128"}));
  RecordingSink tiling;
  Attention().Moves(SearchStage::kTiling, Flash(64, 64, 32), tiling);
  EXPECT_EQ(tiling.MoveNames(), std::vector<std::string>{"keys per step k 32"});
  EXPECT_EQ(tiling.moves.at(0).design.xblock, 64);
  RecordingSink memory;  // 4 or 8 warps x 1..3 stages but its own; no precision move
  Attention().Moves(SearchStage::kMemory, kernel, memory);
  EXPECT_EQ(memory.moves.size(), 5U);
  EXPECT_TRUE(memory.candidates.empty());
}

TEST(AttentionFamilyTest, LowersThePlannedFlashKernel) {
  const Graph graph = testing::Fixture("level1_97_ScaledDotProductAttention");
  const Plan plan = MakePlan(graph, {});
  for (size_t i = 0; i < plan.kernels.size(); ++i) {
    const KernelPlan& kernel = plan.kernels[i];
    if (kernel.kind != KernelKind::kAttention) {
      continue;
    }
    const std::map<int, TensorMeta> layouts = testing::DenseStores(graph, kernel);
    // in the kernel IR: the lowering probe asks it its reads, nothing printed
    const std::optional<kir::Kernel> program =
        Attention().LowerProgram(graph, kernel, plan.memory_before[i], layouts);
    ASSERT_TRUE(program.has_value());
    EXPECT_EQ(program->functions.size(), 1U);
    EXPECT_EQ(kir::Reads(*program), (std::set<int>{0, 1, 2})) << "q, k and v";
    const KernelSource source = Attention().Lower(graph, kernel, plan.memory_before[i], layouts);
    EXPECT_EQ(source.name, kernel.name);
    EXPECT_EQ(source.loaded, kir::Reads(*program));
    // two products a key block, both tf32x3 (float32 accuracy on the tensor cores): the scores, fresh each
    // block, and p v folded into the rescaled output rows
    const std::vector<kir::UpdateSite> products = kir::Products(program->functions[0]);
    ASSERT_EQ(products.size(), 2U) << source.code;
    EXPECT_EQ(products[0].statement.kind, kir::Statement::Kind::kProduct);
    EXPECT_EQ(products[1].statement.name, "acc");
    EXPECT_EQ(products[1].statement.update, kir::UpdateForm::kRescaled);
    for (const kir::UpdateSite& product : products) {
      EXPECT_EQ(product.statement.product->precision, Precision::kTf32x3);
      EXPECT_EQ(product.loops, std::vector<std::string>{"n0"}) << "inside the key-block loop";
    }
    EXPECT_NE(source.code.find("input_precision=\"tf32x3\""), std::string::npos) << source.code;
    return;
  }
  ADD_FAILURE() << "no attention kernel planned";
}

}  // namespace
}  // namespace egg::expert
