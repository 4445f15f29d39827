// Default designs and legality of matrix products: tl.dot tiles, split-K, gemv, aligned copies, staged tiles.
#include "expert/design/defaults.h"

#include <gtest/gtest.h>

#include "expert/design/legality.h"
#include "expert/ir/test_graphs.h"
#include "expert/plan/plan.h"

namespace egg::expert {
namespace {

using testing::Fixture;

TEST(MatmulDesignTest, MatmulDesignsKeepTlDotTiles) {
  const Plan plan = MakePlan(Fixture("level1_3_Batched_matrix_multiplication"), {});
  const KernelPlan& kernel = plan.kernels.at(0);
  for (int seed = 0; seed < 3; ++seed) {
    EXPECT_TRUE(DesignFits(kernel, DefaultDesign(kernel, seed))) << seed;
  }
  KernelDesign design = DefaultDesign(kernel, 0);
  design.rblock = 8;  // tl.dot needs 16 or more on every side
  EXPECT_FALSE(DesignFits(kernel, design));
  design = DefaultDesign(kernel, 0);
  design.precision =
      Precision::kUnset;  // a tl.dot kernel records its precision (an unknown one never parses)
  EXPECT_FALSE(DesignFits(kernel, design));
}

TEST(FittingStagesTest, EveryStagedOperandTileCountsAgainstSharedMemory) {
  KernelDesign design;
  design.xblock = 128;
  design.yblock = 64;
  design.rblock = 32;
  design.num_stages = 3;
  EXPECT_EQ(FittingStages(design, 1, 1), 3) << "one A and one B tile: 72 KB in three stages";
  EXPECT_EQ(FittingStages(design, 4, 1), 2) << "four A tiles: 72 KB a stage";
  design.rblock = 64;
  EXPECT_EQ(FittingStages(design, 4, 1), 1) << "never below one stage";
  design.num_stages = 1;
  EXPECT_EQ(FittingStages(design, 1, 1), 1) << "never above the design's stages";
  design.xblock = 128;
  design.yblock = 256;
  design.num_stages = 3;
  EXPECT_EQ(FittingStages(design, 1, 1, 2), 3) << "bf16 tiles: 48 KB a stage";
  EXPECT_EQ(FittingStages(design, 1, 1), 1) << "the same tiles in float32: 96 KB a stage";
}

TEST(MatmulDesignTest, SplitKOnlyForFewTilesOverADeepK) {
  MatmulSpec deep;
  deep.m = 256;
  deep.n = 256;
  deep.k = 524288;  // KernelBench 1_6
  KernelDesign tile;
  tile.xblock = 64;
  tile.yblock = 64;
  tile.rblock = 32;
  EXPECT_EQ(SplitKFactor(deep, tile), 16);  // 16 tiles x 16 slices: two waves of 132 SMs at most
  MatmulSpec square = deep;
  square.k = 256;
  EXPECT_EQ(SplitKFactor(square, tile), 1);  // K too shallow: a slice must keep 8 steps of 32
  MatmulSpec many = deep;
  many.m = 4096;
  many.n = 4096;
  EXPECT_EQ(SplitKFactor(many, tile), 1);  // 4096 tiles fill the GPU already
  MatmulSpec conv = deep;
  conv.conv = ConvShape{};
  EXPECT_EQ(SplitKFactor(conv, tile), 1);
  MatmulSpec batched = deep;
  batched.batch = 8;
  EXPECT_EQ(SplitKFactor(batched, tile), 2);  // 128 tiles x 2
}

// A matrix-product kernel over [m x k] @ [k x n], no graph behind it: what DefaultDesign and DesignFits read.
KernelPlan ProductKernel(int64_t m, int64_t n, int64_t k) {
  KernelPlan kernel;
  kernel.kind = KernelKind::kMatmul;
  kernel.name = "egg_k0_mm";
  MatmulSpec product;
  product.m = m;
  product.n = n;
  product.k = k;
  product.b_n_major = true;  // two inputs multiplied as they are stored
  kernel.matmul = product;
  return kernel;
}

TEST(MatmulDesignTest, MatVecProductsTakeTheGemvSeed) {
  KernelPlan kernel = ProductKernel(2048, 1, 1048576);  // KernelBench 1_4: [2048 x 1048576] @ [1048576 x 1]
  const MatmulSpec mv = *kernel.matmul;
  ASSERT_TRUE(MatVecFits(mv));
  const KernelDesign gemv = DefaultDesign(kernel, 0);
  EXPECT_EQ(gemv.algorithm, Algorithm::kGemv);
  EXPECT_EQ(gemv.yblock, 1);
  EXPECT_EQ(gemv.xblock, 16);
  EXPECT_EQ(gemv.rblock, 512);
  EXPECT_EQ(gemv.split, 2);  // 128 row blocks x 2 K slices: two waves of 132 SMs at most
  EXPECT_TRUE(DesignFits(kernel, gemv));
  EXPECT_EQ(DefaultDesign(kernel, 1).algorithm, Algorithm::kTiled);  // the tl.dot seed to measure against
  KernelDesign tf32 = gemv;
  tf32.precision = Precision::kTf32;  // FMA products: a precision choice would only duplicate the design
  EXPECT_FALSE(DesignFits(kernel, tf32));
  KernelDesign wide = gemv;
  wide.yblock = 16;
  EXPECT_FALSE(DesignFits(kernel, wide));
  MatmulSpec matrix = mv;
  matrix.n = 2;
  EXPECT_FALSE(MatVecFits(matrix));
  kernel.matmul = matrix;
  EXPECT_FALSE(DesignFits(kernel, gemv));
  EXPECT_NE(DefaultDesign(kernel, 0).algorithm, Algorithm::kGemv);
  MatmulSpec conv = mv;
  conv.conv = ConvShape{};
  EXPECT_FALSE(MatVecFits(conv));  // a one-channel convolution is the direct kernel's
}

TEST(MatmulDesignTest, MisalignedOperandRowsTakeTheAlignedSeed) {
  KernelPlan kernel = ProductKernel(8205, 5921, 2949);  // KernelBench 1_8: [8205 x 2949] @ [2949 x 5921]
  const MatmulSpec irregular = *kernel.matmul;
  ASSERT_TRUE(AlignedCopyFits(irregular));
  const KernelDesign seed0 = DefaultDesign(kernel, 0, Precision::kIeee);
  EXPECT_EQ(seed0.algorithm, Algorithm::kAligned);
  EXPECT_TRUE(DesignFits(kernel, seed0));
  // tensor-core products copy B transposed instead (its rows aligned too)
  EXPECT_EQ(DefaultDesign(kernel, 0, Precision::kTf32x3).algorithm, Algorithm::kKMajor);
  EXPECT_EQ(DefaultDesign(kernel, 1, Precision::kIeee).algorithm,
            Algorithm::kTiled);  // operands in place, to measure against
  MatmulSpec square = irregular;
  square.n = 5920;
  square.k = 2948;
  EXPECT_FALSE(AlignedCopyFits(square));  // rows of multiples of 4 floats start 16-byte aligned already
  kernel.matmul = square;
  EXPECT_FALSE(DesignFits(kernel, seed0));
  MatmulSpec small = irregular;
  small.m = small.n = small.k = 257;  // misaligned, but two operand copies would cost as much as the product
  kernel.matmul = small;
  EXPECT_EQ(DefaultDesign(kernel, 0, Precision::kTf32x3).algorithm, Algorithm::kTiled);
  MatmulSpec mv = irregular;
  mv.n = 1;
  EXPECT_FALSE(AlignedCopyFits(mv));
  MatmulSpec conv = irregular;
  conv.conv = ConvShape{};
  EXPECT_FALSE(AlignedCopyFits(conv));
}

TEST(MatmulDesignTest, LargeFloat32TensorCoreProductsTakeTheKMajorSeed) {
  KernelPlan kernel = ProductKernel(4096, 4096, 4096);  // rows aligned: no aligned copy
  const MatmulSpec square = *kernel.matmul;
  ASSERT_FALSE(AlignedCopyFits(square));
  for (const Precision precision : {Precision::kTf32, Precision::kTf32x3}) {
    EXPECT_TRUE(KMajorCopyFits(square, precision));
    const KernelDesign seed0 = DefaultDesign(kernel, 0, precision);
    EXPECT_EQ(seed0.algorithm, Algorithm::kKMajor) << NameOf(precision);
    EXPECT_TRUE(DesignFits(kernel, seed0));
    EXPECT_EQ(DefaultDesign(kernel, 1, precision).algorithm, Algorithm::kTiled) << "B read in place";
  }
  // tf32 over the K-major copy takes the tile measured fastest that way: 128x256x32 of 8 warps, 3 stages
  const KernelDesign tf32 = DefaultDesign(kernel, 0, Precision::kTf32);
  EXPECT_EQ(std::vector<int64_t>({tf32.xblock, tf32.yblock, tf32.rblock, tf32.num_warps, tf32.num_stages}),
            std::vector<int64_t>({128, 256, 32, 8, 3}));
  const KernelDesign exact = DefaultDesign(kernel, 0, Precision::kTf32x3);
  EXPECT_EQ(std::vector<int64_t>({exact.xblock, exact.yblock, exact.num_warps}),
            std::vector<int64_t>({128, 64, 4}))
      << "tf32x3 keeps its own seed tile";
  EXPECT_FALSE(KMajorCopyFits(square, Precision::kIeee)) << "FMA products read B N-contiguous faster";
  EXPECT_EQ(DefaultDesign(kernel, 0, Precision::kIeee).algorithm, Algorithm::kTiled);
  KernelDesign ieee = DefaultDesign(kernel, 0, Precision::kTf32);
  ieee.precision = Precision::kIeee;
  EXPECT_FALSE(DesignFits(kernel, ieee));
  MatmulSpec half = square;
  half.dtype = DType::kBFloat16;  // half MMA reads a transposed B as it is
  EXPECT_FALSE(KMajorCopyFits(half, Precision::kTf32));
  MatmulSpec conv = square;
  conv.conv = ConvShape{};  // an implicit GEMM's weight is K-major already
  EXPECT_FALSE(KMajorCopyFits(conv, Precision::kTf32));
  MatmulSpec mv = square;
  mv.n = 1;
  EXPECT_FALSE(KMajorCopyFits(mv, Precision::kTf32));
  MatmulSpec linear = square;
  linear.b_n_major = false;  // an nn.Linear weight (K-major already), or a view the lowering resolves
  kernel.matmul = linear;
  EXPECT_EQ(DefaultDesign(kernel, 0, Precision::kTf32).algorithm, Algorithm::kTiled);
  KernelPlan small = ProductKernel(256, 256, 256);  // the copies would cost as much as the product
  EXPECT_EQ(DefaultDesign(small, 0, Precision::kTf32).algorithm, Algorithm::kTiled);
}

}  // namespace
}  // namespace egg::expert
