// The recurrent family: one sequential design (16 batch rows and 16 hidden units a program, a K step up to
// 64), its tile rule, one accumulator per gate in registers, its moves, and its lowering.
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

const KernelFamily& Recurrent() { return FamilyOf(KernelKind::kRecurrent); }

KernelPlan Lstm(int64_t batch, int64_t hidden, RecurrentCell cell = RecurrentCell::kLstm) {
  KernelPlan kernel;
  kernel.name = "k";
  kernel.kind = KernelKind::kRecurrent;
  kernel.recurrent = RecurrentSpec{};
  kernel.recurrent->cell = cell;
  kernel.recurrent->batch = batch;
  kernel.recurrent->hidden = hidden;
  kernel.rows = batch;
  kernel.design = Recurrent().DefaultDesign(kernel, 0, Precision::kUnset);
  return kernel;
}

std::vector<std::string> Moves(SearchStage stage, const KernelPlan& kernel) {
  RecordingSink sink;
  Recurrent().Moves(stage, kernel, sink);
  return sink.all_moves;
}

TEST(RecurrentFamilyTest, DefaultDesignIsSequential) {
  const KernelDesign design = Lstm(10, 48).design;
  EXPECT_EQ(design.algorithm, Algorithm::kSequential);
  EXPECT_EQ(design.xblock, 16);
  EXPECT_EQ(design.yblock, 16);
  EXPECT_EQ(design.rblock, 64);
  EXPECT_EQ(design.precision, Precision::kIeee);
  EXPECT_EQ(Lstm(100, 8).design.xblock, 64);
  EXPECT_EQ(Lstm(100, 8).design.rblock, 16);
  EXPECT_EQ(Recurrent().DefaultDesign(Lstm(10, 48), 1, Precision::kTf32).precision, Precision::kTf32);
  EXPECT_EQ(Recurrent().DefaultDesign(Lstm(10, 48), 2, Precision::kTf32x3).precision, Precision::kIeee);
}

TEST(RecurrentFamilyTest, FitsTilesOf16To128) {
  const KernelPlan kernel = Lstm(10, 48);
  KernelDesign design = kernel.design;
  EXPECT_TRUE(Recurrent().Fits(kernel, design));
  EXPECT_TRUE(DesignFits(kernel, design));
  design.yblock = 8;
  EXPECT_FALSE(Recurrent().Fits(kernel, design));
  design.yblock = 256;
  EXPECT_FALSE(Recurrent().Fits(kernel, design));
  design = kernel.design;
  design.precision = Precision::kUnset;
  EXPECT_FALSE(Recurrent().Fits(kernel, design));
  design = kernel.design;
  design.algorithm = Algorithm::kTiled;
  EXPECT_FALSE(Recurrent().Fits(kernel, design));
  EXPECT_EQ(Recurrent().Rule(),
            "recurrent: algorithm sequential, xblock/yblock/rblock powers of two in [16, 128]");
}

TEST(RecurrentFamilyTest, FitsResourcesHoldsOneAccumulatorPerGate) {
  const KernelPlan lstm = Lstm(128, 128);
  KernelDesign design = lstm.design;
  design.xblock = design.yblock = 64;  // 4 gates x 64 x 64 over 128 threads: 128 each
  EXPECT_TRUE(Recurrent().FitsResources(lstm, design));
  design.yblock = 128;
  EXPECT_FALSE(Recurrent().FitsResources(lstm, design));
  design.num_warps = 8;
  EXPECT_TRUE(Recurrent().FitsResources(lstm, design));
  design.num_warps = 4;
  design.yblock = 64;
  design.xblock = 128;  // a plain RNN: one gate
  EXPECT_FALSE(Recurrent().FitsResources(lstm, design));
  EXPECT_TRUE(Recurrent().FitsResources(Lstm(128, 128, RecurrentCell::kRnnTanh), design));
}

TEST(RecurrentFamilyTest, MovesPerStage) {
  const KernelPlan kernel = Lstm(10, 48);
  EXPECT_TRUE(Moves(SearchStage::kAlgorithm, kernel).empty());
  EXPECT_TRUE(Moves(SearchStage::kMapping, kernel).empty());  // 10 rows fit the one 16-row block
  EXPECT_EQ(Moves(SearchStage::kMapping, Lstm(100, 48)),      // 64 rows a program: 128 rows a block at most
            (std::vector<std::string>{"batch rows per program k 32", "batch rows per program k 128",
                                      "batch rows per program k 16"}));
  EXPECT_EQ(Moves(SearchStage::kTiling, kernel),
            (std::vector<std::string>{"tile k hidden block 32", "tile k hidden block 64", "tile k block_k 32",
                                      "tile k block_k 128", "tile k block_k 16"}));
  EXPECT_EQ(Moves(SearchStage::kMemory, kernel),
            (std::vector<std::string>{"memory k warps 2 stages 1", "memory k warps 8 stages 1",
                                      "precision k tf32x3"}));
  KernelPlan tf32 = kernel;
  tf32.design.precision = Precision::kTf32;
  EXPECT_EQ(Moves(SearchStage::kMemory, tf32).size(), 2U);
}

TEST(RecurrentFamilyTest, LowersThePlannedLayerStack) {
  const Graph graph = testing::Fixture("level3_42_GRUBidirectionalHidden");
  const Plan plan = MakePlan(graph, {});
  ASSERT_FALSE(plan.kernels.empty());
  const KernelPlan& kernel = plan.kernels[0];
  ASSERT_EQ(kernel.kind, KernelKind::kRecurrent);
  EXPECT_TRUE(Recurrent().Fits(kernel, kernel.design));
  const std::map<int, TensorMeta> layouts = testing::DenseStores(graph, kernel);
  // in the kernel IR: a projection and a time loop, launched per layer and direction
  const std::optional<kir::Kernel> program =
      Recurrent().LowerProgram(graph, kernel, plan.memory_before[0], layouts);
  ASSERT_TRUE(program.has_value());
  EXPECT_EQ(program->functions.size(), 2U);
  EXPECT_EQ(program->launches.size(), 6U * 2U * 2U);
  EXPECT_EQ(kir::Reads(*program).count(kernel.recurrent->input), 1U);
  const KernelSource source = Recurrent().Lower(graph, kernel, plan.memory_before[0], layouts);
  EXPECT_EQ(source.name, kernel.name);
  EXPECT_EQ(source.loaded, kir::Reads(*program));
  EXPECT_NE(source.code.find("def " + kernel.name + "_step("), std::string::npos) << source.code;
  EXPECT_EQ(testing::Count(source.code, "tl.dot(h, "), 3U);  // r, z, n
}

}  // namespace
}  // namespace egg::expert
