// The reduction family: persistent, looped, online or split designs by seed and row shape, the algorithms it
// accepts, and its lowering.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "expert/codegen/kernel_codegen.h"
#include "expert/codegen/test_kernels.h"
#include "expert/design/legality.h"
#include "expert/families/family.h"
#include "expert/ir/test_graphs.h"
#include "expert/kir/analysis.h"

namespace egg::expert {
namespace {

const KernelFamily& Reduction() { return FamilyOf(KernelKind::kReduction); }

// `rows` rows of `length` reduced, inner (the last dim) or outer (the first).
KernelPlan Rows(int64_t rows, int64_t length, bool inner = true) {
  KernelPlan kernel;
  kernel.name = "k";
  kernel.kind = KernelKind::kReduction;
  kernel.shape = inner ? std::vector<int64_t>{rows, length} : std::vector<int64_t>{length, rows};
  kernel.reduced = {inner ? 1 : 0};
  kernel.rows = rows;
  kernel.length = length;
  return kernel;
}

KernelDesign Seed(const KernelPlan& kernel, int seed) {
  return Reduction().DefaultDesign(kernel, seed, Precision::kUnset);
}

TEST(ReductionFamilyTest, ShortRowsArePersistentThenLooped) {
  const KernelPlan kernel = Rows(8, 1024);
  EXPECT_EQ(Seed(kernel, 0).algorithm, Algorithm::kPersistent);
  EXPECT_EQ(Seed(kernel, 0).rblock, 1024);
  EXPECT_EQ(Seed(kernel, 0).xblock, 4);
  EXPECT_EQ(Seed(kernel, 1).algorithm, Algorithm::kLooped);
  EXPECT_EQ(Seed(kernel, 1).rblock, 1024);
  EXPECT_EQ(Seed(kernel, 2).algorithm, Algorithm::kLooped);
  EXPECT_EQ(Seed(kernel, 2).rblock, 256);  // seed 2 loops in quarter tiles
  for (int seed = 0; seed < 3; ++seed) {
    EXPECT_TRUE(DesignFits(kernel, Seed(kernel, seed))) << seed;
  }
}

TEST(ReductionFamilyTest, LongRowsLoopSplitOrGoOnline) {
  const KernelPlan wide = Rows(8, 8192);  // past a tile of 4096
  EXPECT_EQ(Seed(wide, 0).algorithm, Algorithm::kLooped);
  EXPECT_EQ(Seed(wide, 0).rblock, 2048);
  EXPECT_EQ(Seed(wide, 1).algorithm, Algorithm::kPersistent);  // a large tile
  EXPECT_EQ(Seed(wide, 1).rblock, 8192);
  EXPECT_EQ(Seed(wide, 1).xblock, 1);
  EXPECT_EQ(Seed(wide, 2).rblock, 512);

  KernelPlan few = Rows(4, 65536);
  few.splittable = true;  // few long rows: split across programs
  EXPECT_EQ(Seed(few, 0).algorithm, Algorithm::kSplit);
  EXPECT_GE(Seed(few, 0).split, 2);
  EXPECT_EQ(Seed(few, 1).algorithm, Algorithm::kLooped);
  EXPECT_EQ(Seed(few, 2).algorithm, Algorithm::kSplit);

  KernelPlan softmax = Rows(8, 8192);
  softmax.online_candidate = true;
  EXPECT_EQ(Seed(softmax, 0).algorithm, Algorithm::kOnline);
  EXPECT_EQ(Seed(softmax, 2).algorithm, Algorithm::kOnline);

  const KernelPlan outer = Rows(8, 512, /*inner=*/false);  // strided rows persist only up to 256
  EXPECT_EQ(Seed(outer, 0).algorithm, Algorithm::kLooped);
  EXPECT_EQ(Seed(outer, 0).xblock, 8);
  EXPECT_EQ(Seed(outer, 0).rblock, 16);
  EXPECT_EQ(Seed(Rows(8, 256, false), 0).algorithm, Algorithm::kPersistent);
}

TEST(ReductionFamilyTest, AcceptsItsFourAlgorithmsOnly) {
  KernelPlan kernel = Rows(4, 65536);
  kernel.splittable = true;
  for (Algorithm algorithm : {Algorithm::kLooped, Algorithm::kOnline, Algorithm::kSplit}) {
    KernelDesign design = Seed(kernel, 0);
    design.algorithm = algorithm;
    design.split = 4;
    EXPECT_TRUE(Reduction().Fits(kernel, design)) << NameOf(algorithm);
  }
  KernelDesign design = Seed(Rows(8, 1024), 0);
  EXPECT_TRUE(Reduction().Fits(Rows(8, 1024), design));
  for (Algorithm algorithm : {Algorithm::kSingle, Algorithm::kBlocked, Algorithm::kFlat, Algorithm::kUnset}) {
    design.algorithm = algorithm;
    EXPECT_FALSE(Reduction().Fits(Rows(8, 1024), design)) << NameOf(algorithm);
  }
}

TEST(ReductionFamilyTest, LowersThePlannedReduction) {
  const Graph graph = testing::RowReduction("aten.sum.dim_IntList", {Json::array({1})}, 4, 100);
  const Plan plan = MakePlan(graph, {});
  ASSERT_EQ(plan.kernels.size(), 1U);
  const KernelPlan& kernel = plan.kernels[0];
  ASSERT_EQ(kernel.kind, KernelKind::kReduction);
  EXPECT_EQ(kernel.design.algorithm, Algorithm::kPersistent);
  EXPECT_EQ(kernel.design.rblock, 128);
  const std::map<int, TensorMeta> layouts = testing::DenseStores(graph, kernel);
  const KernelSource source = Reduction().Lower(graph, kernel, plan.memory_before[0], layouts);
  EXPECT_EQ(source.name, kernel.name);
  EXPECT_NE(source.code.find("def " + kernel.name + "("), std::string::npos) << source.code;
  EXPECT_NE(source.code.find("tl.sum("), std::string::npos) << source.code;
}

TEST(ReductionFamilyTest, LowersASplitReductionToTheKernelIr) {
  const Graph graph = testing::RowReduction("aten.sum.dim_IntList", {Json::array({1})}, 4, 65536);
  const Plan plan = MakePlan(graph, {});
  ASSERT_EQ(plan.kernels.size(), 1U);
  KernelPlan kernel = plan.kernels[0];
  ASSERT_TRUE(kernel.splittable);
  kernel.design = Seed(kernel, 2);
  ASSERT_EQ(kernel.design.algorithm, Algorithm::kSplit);
  const std::map<int, TensorMeta> layouts = testing::DenseStores(graph, kernel);
  const std::optional<kir::Kernel> program =
      Reduction().LowerProgram(graph, kernel, plan.memory_before[0], layouts);
  ASSERT_TRUE(program.has_value()) << "split designs lower to the IR too";
  ASSERT_EQ(program->functions.size(), 2U) << "partials, then their combine";
  EXPECT_EQ(program->launches.size(), 2U);
  EXPECT_EQ(program->scratch.size(), 1U) << "one partial sum per row and split";
  EXPECT_EQ(kir::Reads(*program), std::set<int>{graph.Inputs()[0]});
  EXPECT_EQ(kir::Writes(*program), std::set<int>{graph.nodes.back().value});
  const KernelSource source = Reduction().Lower(graph, kernel, plan.memory_before[0], layouts);
  EXPECT_EQ(source.code, kir::Print(*program)) << "the text is the IR printed";
  EXPECT_EQ(source.scratch.size(), 1U);
}

}  // namespace
}  // namespace egg::expert
