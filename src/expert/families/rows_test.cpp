// What the row families share: inner or outer rows, the row tile of each algorithm, the legality of row
// designs, and the moves of each search stage (through the reduction and scan families).
#include "expert/families/rows.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "expert/design/legality.h"
#include "expert/families/test_moves.h"

namespace egg::expert {
namespace {

using testing::RecordingSink;

// Rows of `shape` reduced over `reduced`.
KernelPlan Rows(const std::vector<int64_t>& shape, const std::vector<int64_t>& reduced,
                KernelKind kind = KernelKind::kReduction) {
  KernelPlan kernel;
  kernel.name = "k";
  kernel.kind = kind;
  kernel.shape = shape;
  kernel.reduced = reduced;
  kernel.length = 1;
  for (int64_t dim : reduced) {
    kernel.length *= shape[static_cast<size_t>(dim)];
  }
  kernel.rows = Product(shape) / kernel.length;
  return kernel;
}

TEST(RowsFamilyTest, InnerReductionSkipsUnitDimensions) {
  EXPECT_TRUE(InnerReduction(Rows({8, 1024}, {1})));
  EXPECT_TRUE(InnerReduction(Rows({8, 1024, 1}, {1})));
  EXPECT_FALSE(InnerReduction(Rows({1024, 8}, {0})));
  EXPECT_TRUE(InnerReduction(Rows({1, 1}, {0})));  // nothing but unit dimensions
}

TEST(RowsFamilyTest, RowDesignTilesEachAlgorithm) {
  const KernelDesign single = RowDesign(Rows({8, 1024}, {1}), Algorithm::kPersistent);
  EXPECT_EQ(single.rblock, 1024);
  EXPECT_EQ(single.xblock, 4);  // 4096 elements a tile
  EXPECT_EQ(single.num_warps, 8);

  const KernelDesign split = RowDesign(Rows({8, 100000}, {1}), Algorithm::kSplit);
  EXPECT_EQ(split.rblock, 1024);
  EXPECT_EQ(split.xblock, 1);
  EXPECT_EQ(split.split, 98);  // 1024 / 8 programs a row, at most the 98 chunks
  EXPECT_EQ(split.num_warps, 4);
  // a row of one chunk: one program (the split's floor of two would exceed the chunks)
  EXPECT_EQ(RowDesign(Rows({8, 1000}, {1}), Algorithm::kSplit).split, 1);
  EXPECT_EQ(RowDesign(Rows({4096, 1000}, {1}), Algorithm::kSplit).split, 1);
  EXPECT_EQ(RowDesign(Rows({4096, 3000}, {1}), Algorithm::kSplit).split, 2);  // 3 chunks, at least 2 programs

  const KernelDesign inner = RowDesign(Rows({8, 100000}, {1}), Algorithm::kLooped);
  EXPECT_EQ(inner.rblock, 2048);
  EXPECT_EQ(inner.xblock, 1);
  EXPECT_EQ(inner.num_warps, 8);

  const KernelDesign outer = RowDesign(Rows({100000, 8}, {0}), Algorithm::kLooped);  // rows side by side
  EXPECT_EQ(outer.rblock, 16);
  EXPECT_EQ(outer.xblock, 8);
  EXPECT_EQ(outer.num_warps, 4);
}

TEST(RowsFamilyTest, FitsRules) {
  const KernelFamily& reduction = FamilyOf(KernelKind::kReduction);
  KernelPlan kernel = Rows({8, 1000}, {1});
  KernelDesign design = RowDesign(kernel, Algorithm::kPersistent);
  EXPECT_TRUE(reduction.Fits(kernel, design));
  design.rblock = 512;  // a single tile must cover the row
  EXPECT_FALSE(reduction.Fits(kernel, design));
  design.algorithm = Algorithm::kLooped;
  EXPECT_TRUE(reduction.Fits(kernel, design));
  design.rblock = 500;
  EXPECT_FALSE(reduction.Fits(kernel, design));
  design.rblock = 1024;
  design.xblock = kMaxTile;  // past the tile limit
  EXPECT_FALSE(reduction.Fits(kernel, design));

  KernelPlan long_rows = Rows({8, 100000}, {1});
  KernelDesign split = RowDesign(long_rows, Algorithm::kSplit);
  EXPECT_FALSE(reduction.Fits(long_rows, split));  // not splittable
  long_rows.splittable = true;
  EXPECT_TRUE(reduction.Fits(long_rows, split));
  split.split = 0;
  EXPECT_FALSE(reduction.Fits(long_rows, split));

  KernelPlan sort = Rows({8, 1000}, {1}, KernelKind::kScan);
  sort.scan = ScanSpec{};
  sort.scan->kind = ScanKind::kSort;
  const KernelFamily& scan = FamilyOf(KernelKind::kScan);
  EXPECT_TRUE(scan.Fits(sort, RowDesign(sort, Algorithm::kSingle)));
  EXPECT_FALSE(scan.Fits(sort, RowDesign(sort, Algorithm::kBlocked)));  // a sort holds the row in one tile
  EXPECT_EQ(reduction.Rule(), "reduction" + scan.Rule().substr(4));
}

TEST(RowsFamilyTest, MovesPerStage) {
  const KernelFamily& reduction = FamilyOf(KernelKind::kReduction);
  KernelPlan kernel = Rows({8, 1024}, {1});
  kernel.design = RowDesign(kernel, Algorithm::kPersistent);  // xblock 4, rblock 1024, 8 warps

  RecordingSink algorithm;
  reduction.Moves(SearchStage::kAlgorithm, kernel, algorithm);
  EXPECT_EQ(algorithm.all_moves, (std::vector<std::string>{"algorithm k looped", "algorithm k looped"}));

  RecordingSink mapping;
  reduction.Moves(SearchStage::kMapping, kernel, mapping);
  EXPECT_EQ(mapping.all_moves, (std::vector<std::string>{"rows per program k 2", "rows per program k 8",
                                                         "rows per program k 1"}));

  RecordingSink tiling;  // a single tile covers the row: only longer tiles
  reduction.Moves(SearchStage::kTiling, kernel, tiling);
  EXPECT_EQ(tiling.all_moves, (std::vector<std::string>{"tile k rblock 2048", "tile k rblock 4096",
                                                        "tile k rblock 8192", "tile k rblock 16384"}));

  RecordingSink memory;  // nothing to pipeline in one tile
  reduction.Moves(SearchStage::kMemory, kernel, memory);
  ASSERT_EQ(memory.Designs().size(), 4U);
  EXPECT_EQ(memory.all_moves[0], "memory k warps 4 stages 1");
  kernel.design = RowDesign(kernel, Algorithm::kLooped);
  RecordingSink looped;
  reduction.Moves(SearchStage::kMemory, kernel, looped);
  EXPECT_EQ(looped.Designs().size(), 5U * 4U - 1U);  // warps 1..16 x stages 1..4
  RecordingSink looped_tiling;
  reduction.Moves(SearchStage::kTiling, kernel, looped_tiling);
  EXPECT_EQ(looped_tiling.Designs().back().rblock, 16);
  EXPECT_EQ(looped_tiling.Designs().size(), 6U);  // 16 .. 1024 but 1024
}

TEST(RowsFamilyTest, FitsResourcesAsksThreadsForTheWholeTile) {
  const KernelFamily& reduction = FamilyOf(KernelKind::kReduction);
  const KernelPlan kernel = Rows({8, 1024}, {1});
  KernelDesign design = RowDesign(kernel, Algorithm::kPersistent);  // 4096 elements, 256 threads
  EXPECT_TRUE(reduction.FitsResources(kernel, design));
  design.num_warps = 1;  // 128 elements a thread
  EXPECT_FALSE(reduction.FitsResources(kernel, design));
}

}  // namespace
}  // namespace egg::expert
