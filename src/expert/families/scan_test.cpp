// The scan family: one tile or a loop of tiles alternating by seed, sorts in one tile, the algorithms it
// accepts, its moves, and its lowering.
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

using testing::GraphJson;
using testing::Input;
using testing::LoadGraph;
using testing::Meta;
using testing::NodeJson;
using testing::Ref;

const KernelFamily& Scan() { return FamilyOf(KernelKind::kScan); }

KernelPlan Rows(int64_t rows, int64_t length, ScanKind kind = ScanKind::kSum) {
  KernelPlan kernel;
  kernel.name = "k";
  kernel.kind = KernelKind::kScan;
  kernel.shape = {rows, length};
  kernel.reduced = {1};
  kernel.rows = rows;
  kernel.length = length;
  kernel.scan = ScanSpec{};
  kernel.scan->kind = kind;
  kernel.scan->dim = 1;
  return kernel;
}

Algorithm SeedAlgorithm(const KernelPlan& kernel, int seed) {
  return Scan().DefaultDesign(kernel, seed, Precision::kUnset).algorithm;
}

TEST(ScanFamilyTest, SeedsAlternateBetweenOneTileAndALoop) {
  const KernelPlan short_rows = Rows(4, 100);
  EXPECT_EQ(SeedAlgorithm(short_rows, 0), Algorithm::kSingle);
  EXPECT_EQ(SeedAlgorithm(short_rows, 1), Algorithm::kBlocked);
  EXPECT_EQ(SeedAlgorithm(short_rows, 2), Algorithm::kSingle);
  EXPECT_EQ(Scan().DefaultDesign(short_rows, 0, Precision::kUnset).rblock, 128);

  const KernelPlan long_rows = Rows(4, 8192);  // past a tile of 4096: the loop first
  EXPECT_EQ(SeedAlgorithm(long_rows, 0), Algorithm::kBlocked);
  EXPECT_EQ(SeedAlgorithm(long_rows, 1), Algorithm::kSingle);
  EXPECT_EQ(SeedAlgorithm(long_rows, 2), Algorithm::kBlocked);
  EXPECT_EQ(SeedAlgorithm(Rows(4, 32768), 1), Algorithm::kBlocked);  // past even a large tile

  const KernelPlan sort = Rows(4, 8192, ScanKind::kSort);
  for (int seed = 0; seed < 3; ++seed) {
    EXPECT_EQ(SeedAlgorithm(sort, seed), Algorithm::kSingle) << seed;
    EXPECT_TRUE(DesignFits(sort, Scan().DefaultDesign(sort, seed, Precision::kUnset))) << seed;
    EXPECT_TRUE(DesignFits(long_rows, Scan().DefaultDesign(long_rows, seed, Precision::kUnset))) << seed;
  }
}

TEST(ScanFamilyTest, AcceptsSingleAndBlockedOnly) {
  const KernelPlan kernel = Rows(4, 100);
  KernelDesign design = Scan().DefaultDesign(kernel, 0, Precision::kUnset);
  for (Algorithm algorithm : {Algorithm::kSingle, Algorithm::kBlocked}) {
    design.algorithm = algorithm;
    EXPECT_TRUE(Scan().Fits(kernel, design)) << NameOf(algorithm);
  }
  for (Algorithm algorithm : {Algorithm::kPersistent, Algorithm::kLooped, Algorithm::kSplit}) {
    design.algorithm = algorithm;
    EXPECT_FALSE(Scan().Fits(kernel, design)) << NameOf(algorithm);
  }
}

TEST(ScanFamilyTest, AlgorithmMovesGoToTheOtherSeedsAlgorithm) {
  KernelPlan kernel = Rows(4, 100);
  kernel.design = Scan().DefaultDesign(kernel, 0, Precision::kUnset);
  testing::RecordingSink sink;
  Scan().Moves(SearchStage::kAlgorithm, kernel, sink);
  EXPECT_EQ(sink.MoveNames(), std::vector<std::string>{"algorithm k blocked"});
}

TEST(ScanFamilyTest, LowersThePlannedScan) {
  const Graph graph = LoadGraph(GraphJson(
      {Input("x", 0, Meta({4, 100}))},
      {NodeJson("scan", "aten.cumsum.default", Json::array({Ref("x"), 1}), Meta({4, 100}))}, {"scan"}));
  const Plan plan = MakePlan(graph, {});
  ASSERT_EQ(plan.kernels.size(), 1U);
  const KernelPlan& kernel = plan.kernels[0];
  ASSERT_EQ(kernel.kind, KernelKind::kScan);
  EXPECT_EQ(kernel.design.algorithm, Algorithm::kSingle);
  const std::map<int, TensorMeta> layouts = testing::DenseStores(graph, kernel);
  const KernelSource source = Scan().Lower(graph, kernel, plan.memory_before[0], layouts);
  EXPECT_EQ(source.name, kernel.name);
  EXPECT_NE(source.code.find("tl.cumsum("), std::string::npos) << source.code;
}

}  // namespace
}  // namespace egg::expert
