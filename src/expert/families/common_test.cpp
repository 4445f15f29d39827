// What several families share: power-of-two ranges nearest first, the flat tile's register rule, the warps-
// and-stages, xblock and precision moves (recorded by a fake MoveSink), and the flat family's rules.
#include "expert/families/common.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "expert/design/legality.h"
#include "expert/families/test_moves.h"

namespace egg::expert {
namespace {

using testing::RecordingSink;

KernelPlan Flat(int64_t rows, int64_t xblock, int warps = 4, int stages = 1) {
  KernelPlan kernel;
  kernel.name = "k";
  kernel.kind = KernelKind::kPointwise;
  kernel.shape = {rows};
  kernel.rows = rows;
  kernel.design.algorithm = Algorithm::kFlat;
  kernel.design.xblock = xblock;
  kernel.design.num_warps = warps;
  kernel.design.num_stages = stages;
  return kernel;
}

TEST(FamilyCommonTest, Log2DistanceRoundsDownAndClampsToOne) {
  EXPECT_EQ(Log2Distance(1, 8), 3);
  EXPECT_EQ(Log2Distance(8, 1), 3);
  EXPECT_EQ(Log2Distance(64, 64), 0);
  EXPECT_EQ(Log2Distance(3, 8), 1);  // log2 8 - log2 3 = 1.42
  EXPECT_EQ(Log2Distance(0, 4), 2);  // sizes below one count as one
  EXPECT_EQ(Log2Distance(-5, 2), 1);
}

TEST(FamilyCommonTest, AroundListsPowersOfTwoNearestFirstWithoutTheCurrent) {
  EXPECT_EQ(Around(64, 16, 256), (std::vector<int64_t>{32, 128, 16, 256}));
  EXPECT_EQ(Around(5, 1, 8), (std::vector<int64_t>{4, 8, 2, 1}));
  EXPECT_TRUE(Around(16, 16, 16).empty());
  EXPECT_TRUE(Around(256, 64, 16).empty());  // an empty range
}

TEST(FamilyCommonTest, TileFitsThreadsBetweenAQuarterAndSixtyFourElementsPerThread) {
  KernelDesign design;
  design.num_warps = 4;  // 128 threads
  EXPECT_TRUE(TileFitsThreads(128 * kMaxElementsPerThread, design));
  EXPECT_FALSE(TileFitsThreads(128 * kMaxElementsPerThread + 1, design));
  EXPECT_TRUE(TileFitsThreads(32, design));
  EXPECT_FALSE(TileFitsThreads(31, design));
  EXPECT_EQ(AllWarps(), (std::vector<int>{1, 2, 4, 8, 16}));
}

TEST(FamilyCommonTest, WarpStageMovesAreEveryOtherPairNearestFirst) {
  KernelPlan kernel = Flat(4096, 512, 4, 2);
  RecordingSink sink;
  WarpStageMoves(kernel, {2, 4, 8}, 1, 3, sink);
  std::vector<std::string> names;
  for (const auto& [move, design] : sink.moves) {
    names.push_back(move);
    EXPECT_EQ(design.xblock, 512) << move;  // only warps and stages change
    EXPECT_EQ(move, "memory k warps " + std::to_string(design.num_warps) + " stages " +
                        std::to_string(design.num_stages));
  }
  EXPECT_EQ(names, (std::vector<std::string>{"memory k warps 2 stages 2", "memory k warps 4 stages 1",
                                             "memory k warps 4 stages 3", "memory k warps 8 stages 2",
                                             "memory k warps 2 stages 1", "memory k warps 2 stages 3",
                                             "memory k warps 8 stages 1", "memory k warps 8 stages 3"}));
  EXPECT_TRUE(sink.candidates.empty());
}

TEST(FamilyCommonTest, FlatTileMovesSweepXBlockUpToTheElements) {
  RecordingSink sink;
  FlatTileMoves(Flat(1000, 256), 1000, sink);  // up to 1024, from kMinPointwiseBlock
  ASSERT_EQ(sink.moves.size(), 4U);
  const std::vector<int64_t> expected{128, 512, 64, 1024};
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(sink.moves[i].move, "tile k xblock " + std::to_string(expected[i]));
    EXPECT_EQ(sink.moves[i].design.xblock, expected[i]);
    EXPECT_EQ(sink.moves[i].design.algorithm, Algorithm::kFlat);
  }
  RecordingSink huge;
  FlatTileMoves(Flat(int64_t{1} << 30, 1024), int64_t{1} << 30, huge);
  int64_t largest = 0;
  for (const auto& [move, design] : huge.moves) {
    largest = std::max(largest, design.xblock);
  }
  EXPECT_EQ(largest, kMaxPointwiseBlock);  // capped however many elements
  EXPECT_EQ(huge.moves.size(), 7U);        // 64 .. 8192 but 1024
}

TEST(FamilyCommonTest, ExactPrecisionMoveTogglesIeeeAndTf32x3Only) {
  KernelPlan kernel = Flat(64, 64);
  const std::vector<std::pair<Precision, std::string>> cases{{Precision::kIeee, "precision k tf32x3"},
                                                             {Precision::kTf32x3, "precision k ieee"}};
  for (const auto& [from, move] : cases) {
    kernel.design.precision = from;
    RecordingSink sink;
    ExactPrecisionMove(kernel, sink);
    ASSERT_EQ(sink.moves.size(), 1U);
    EXPECT_EQ(sink.moves[0].move, move);
    EXPECT_NE(sink.moves[0].design.precision, from);
  }
  for (Precision none : {Precision::kTf32, Precision::kUnset}) {
    kernel.design.precision = none;
    RecordingSink sink;
    ExactPrecisionMove(kernel, sink);
    EXPECT_TRUE(sink.moves.empty());
  }
}

TEST(FamilyCommonTest, FlatFamilyRulesAndMovesThroughThePointwiseFamily) {
  EXPECT_EQ(GenericRule("foo").rfind("foo: an algorithm of its kind", 0), 0U);
  const KernelFamily& family = FamilyOf(KernelKind::kPointwise);
  EXPECT_EQ(family.Rule(), GenericRule("pointwise"));
  KernelPlan kernel = Flat(1000, 256);
  KernelDesign design = kernel.design;
  design.xblock = kMaxTile;
  EXPECT_TRUE(family.Fits(kernel, design));
  design.xblock = 2 * kMaxTile;
  EXPECT_FALSE(family.Fits(kernel, design));

  RecordingSink tiling;
  family.Moves(SearchStage::kTiling, kernel, tiling);  // FlatTileMoves over kernel.rows
  RecordingSink direct;
  FlatTileMoves(kernel, kernel.rows, direct);
  ASSERT_EQ(tiling.moves.size(), direct.moves.size());
  EXPECT_EQ(tiling.moves[0].move, direct.moves[0].move);

  RecordingSink memory;
  family.Moves(SearchStage::kMemory, kernel, memory);  // warps alone, one stage
  std::vector<int> warps;
  for (const auto& [move, moved] : memory.moves) {
    warps.push_back(moved.num_warps);
    EXPECT_EQ(moved.num_stages, 1);
  }
  EXPECT_EQ(warps, (std::vector<int>{2, 8, 1, 16}));

  for (SearchStage none : {SearchStage::kAlgorithm, SearchStage::kMapping}) {
    RecordingSink sink;
    family.Moves(none, kernel, sink);
    EXPECT_TRUE(sink.moves.empty() && sink.candidates.empty());
  }
}

}  // namespace
}  // namespace egg::expert
