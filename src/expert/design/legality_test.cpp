// Legality of designs: which algorithms a product or convolution admits, the tile rules of each kernel kind
// and the register and shared-memory budgets that decide what is worth measuring.
#include "expert/design/legality.h"

#include <gtest/gtest.h>

namespace egg::expert {
namespace {

ConvShape Conv2d(int64_t in_channels, int64_t out_channels, int64_t groups, int64_t kernel) {
  ConvShape conv;
  conv.in_channels = in_channels;
  conv.out_channels = out_channels;
  conv.groups = groups;
  conv.kernel = {kernel, kernel};
  conv.stride = {1, 1};
  conv.padding = {kernel / 2, kernel / 2};
  conv.dilation = {1, 1};
  conv.in_size = {32, 32};
  conv.out_size = {32, 32};
  return conv;
}

// A convolution as the planner sees it: an implicit GEMM with n = output channels per group.
MatmulSpec ConvSpec(const ConvShape& conv) {
  MatmulSpec mm;
  mm.conv = conv;
  mm.m = 32 * 32;
  mm.n = conv.out_channels / conv.groups;
  mm.k = conv.in_channels / conv.groups * conv.kernel[0] * conv.kernel[1];
  return mm;
}

MatmulSpec Gemm(int64_t m, int64_t n, int64_t k) {
  MatmulSpec mm;
  mm.m = m;
  mm.n = n;
  mm.k = k;
  return mm;
}

KernelPlan MatmulKernel(const MatmulSpec& mm) {
  KernelPlan kernel;
  kernel.kind = KernelKind::kMatmul;
  kernel.matmul = mm;
  return kernel;
}

KernelDesign Tiles(Algorithm algorithm, int64_t m, int64_t n, int64_t k, Precision precision) {
  KernelDesign design;
  design.algorithm = algorithm;
  design.xblock = m;
  design.yblock = n;
  design.rblock = k;
  design.precision = precision;
  return design;
}

TEST(LegalityTest, CodeGenerationRefusesADesignWithoutTheTileSidesItDividesBy) {
  KernelPlan forced = MatmulKernel(ConvSpec(Conv2d(64, 64, 64, 3)));  // depthwise: planned direct
  forced.name = "conv_0";
  forced.design = Tiles(Algorithm::kDirect, 256, 0, 0, Precision::kIeee);
  EXPECT_EQ(UnwritableDesign(forced, forced.design), "");
  EXPECT_NO_THROW(RequireLegalDesign(forced));
  forced.design.algorithm = Algorithm::kTiled;  // forced by hand: a direct design has no yblock or rblock
  EXPECT_FALSE(DesignFits(forced, forced.design));
  try {
    RequireLegalDesign(forced);
    ADD_FAILURE() << "a tiled design without tile sides was accepted";
  } catch (const IllegalDesign& error) {
    const std::string what = error.what();
    EXPECT_NE(what.find("kernel conv_0"), std::string::npos) << what;
    EXPECT_NE(what.find("\"algorithm\":\"tiled\""), std::string::npos) << what;
    EXPECT_NE(what.find("yblock 0 and rblock 0 are not both powers of two"), std::string::npos) << what;
    EXPECT_NE(what.find("DesignFits: " + DesignRule(forced)), std::string::npos) << what;
  }
  forced.design.xblock = 0;
  EXPECT_EQ(UnwritableDesign(forced, forced.design), "xblock 0 is not a power of two");

  const KernelPlan gemm = MatmulKernel(Gemm(1024, 1024, 4096));
  KernelDesign splitk = Tiles(Algorithm::kSplitK, 64, 64, 32, Precision::kTf32);
  EXPECT_EQ(UnwritableDesign(gemm, splitk), "algorithm splitk needs split >= 2, not 0") << "K / split";
  splitk.split = 2;
  EXPECT_EQ(UnwritableDesign(gemm, splitk), "");
  // looser than DesignFits: a form forced onto a shape the search would not give it is still written
  const KernelPlan conv = MatmulKernel(ConvSpec(Conv2d(64, 128, 1, 3)));
  const KernelDesign direct = Tiles(Algorithm::kDirect, 128, 16, 32, Precision::kIeee);
  EXPECT_FALSE(DesignFits(conv, direct));
  EXPECT_EQ(UnwritableDesign(conv, direct), "");
  KernelPlan reduction;
  reduction.kind = KernelKind::kReduction;
  EXPECT_EQ(UnwritableDesign(reduction, KernelDesign{}), "") << "only matrix products are checked";
}

TEST(LegalityTest, DirectConvolutionOnlyForFewOutputsPerGroupAndFewProducts) {
  EXPECT_TRUE(DirectConvolutionFits(ConvSpec(Conv2d(64, 64, 64, 3))))
      << "depthwise 3x3: 9 products, 1 output";
  EXPECT_FALSE(DirectConvolutionFits(ConvSpec(Conv2d(64, 64, 1, 3)))) << "64 outputs per group: a GEMM";
  EXPECT_TRUE(DirectConvolutionFits(ConvSpec(Conv2d(14, 4, 2, 3)))) << "7 x 9 = 63 products, 2 outputs";
  EXPECT_FALSE(DirectConvolutionFits(ConvSpec(Conv2d(16, 4, 2, 3)))) << "8 x 9 = 72 products";
  EXPECT_FALSE(DirectConvolutionFits(ConvSpec(Conv2d(16, 4, 1, 3)))) << "16 x 9 = 144 products";
  ConvShape transposed = Conv2d(64, 64, 64, 3);
  transposed.transposed = true;
  EXPECT_FALSE(DirectConvolutionFits(ConvSpec(transposed)));
  EXPECT_FALSE(DirectConvolutionFits(Gemm(64, 1, 9))) << "no convolution";
}

TEST(LegalityTest, MatVecAndAlignedCopiesOnlyForPlainProducts) {
  EXPECT_TRUE(MatVecFits(Gemm(2048, 1, 4096)));
  EXPECT_FALSE(MatVecFits(Gemm(2048, 2, 4096)));
  EXPECT_FALSE(MatVecFits(ConvSpec(Conv2d(64, 64, 64, 3)))) << "a depthwise convolution has n = 1 too";
  EXPECT_TRUE(AlignedCopyFits(Gemm(8205, 5921, 2949))) << "KernelBench 1_8: rows of 2949 floats";
  EXPECT_TRUE(AlignedCopyFits(Gemm(64, 30, 64))) << "B's rows of 30 floats";
  EXPECT_FALSE(AlignedCopyFits(Gemm(64, 64, 64)));
  EXPECT_FALSE(AlignedCopyFits(Gemm(64, 1, 3))) << "a mat-vec product has the gemv algorithm";
}

TEST(LegalityTest, ChannelsLastSkipsPointwiseConvolutionsAndStepsOverTheGroupsChannels) {
  EXPECT_TRUE(ChannelsLastConvolutionFits(ConvSpec(Conv2d(64, 128, 1, 3))));
  ConvShape pointwise = Conv2d(64, 128, 1, 1);
  EXPECT_FALSE(ChannelsLastConvolutionFits(ConvSpec(pointwise))) << "its input is a dense [K, M] already";
  pointwise.stride = {2, 2};
  EXPECT_TRUE(ChannelsLastConvolutionFits(ConvSpec(pointwise))) << "strided: no longer dense";
  ConvShape transposed = Conv2d(64, 128, 1, 3);
  transposed.transposed = true;
  EXPECT_TRUE(ChannelsLastConvolutionFits(ConvSpec(transposed))) << "one dense convolution per output phase";
  EXPECT_EQ(ChannelsLastMaxStep(ConvSpec(Conv2d(96, 96, 1, 3))), 128);
  EXPECT_EQ(ChannelsLastMaxStep(ConvSpec(Conv2d(64, 64, 16, 3))), kMinDotSide) << "4 channels a group";
  EXPECT_EQ(ChannelsLastMaxStep(Gemm(64, 64, 64)), kMinDotSide);
}

TEST(LegalityTest, MatmulAlgorithmsNeedTheirShape) {
  const KernelPlan gemm = MatmulKernel(Gemm(1024, 1024, 4096));
  EXPECT_TRUE(DesignFits(gemm, Tiles(Algorithm::kTiled, 128, 64, 32, Precision::kIeee)));
  EXPECT_FALSE(DesignFits(gemm, Tiles(Algorithm::kTiled, 128, 64, 32, Precision::kUnset)));
  EXPECT_FALSE(DesignFits(gemm, Tiles(Algorithm::kTiled, 512, 64, 32, Precision::kTf32))) << "over 256";
  EXPECT_FALSE(DesignFits(gemm, Tiles(Algorithm::kTiled, 96, 64, 32, Precision::kTf32))) << "no power of two";
  KernelDesign splitk = Tiles(Algorithm::kSplitK, 64, 64, 32, Precision::kTf32);
  splitk.split = 4;
  EXPECT_TRUE(DesignFits(gemm, splitk));
  splitk.split = 1;
  EXPECT_FALSE(DesignFits(gemm, splitk)) << "split-K needs two slices at least";
  splitk.split = 256;
  EXPECT_FALSE(DesignFits(gemm, splitk)) << "256 slices of 32 exceed K = 4096";
  EXPECT_FALSE(DesignFits(gemm, Tiles(Algorithm::kNhwc, 64, 64, 32, Precision::kTf32))) << "no convolution";
  EXPECT_FALSE(DesignFits(gemm, Tiles(Algorithm::kAligned, 64, 64, 32, Precision::kTf32))) << "aligned rows";

  const KernelPlan conv = MatmulKernel(ConvSpec(Conv2d(64, 128, 1, 3)));
  EXPECT_TRUE(DesignFits(conv, Tiles(Algorithm::kNhwc, 64, 64, 64, Precision::kTf32)));
  EXPECT_FALSE(DesignFits(conv, Tiles(Algorithm::kNhwc, 64, 64, 128, Precision::kTf32)))
      << "a K step wider than the 64 channels";
  splitk.split = 2;
  EXPECT_FALSE(DesignFits(conv, splitk)) << "never split-K for a convolution";

  const KernelPlan depthwise = MatmulKernel(ConvSpec(Conv2d(64, 64, 64, 3)));
  KernelDesign direct = Tiles(Algorithm::kDirect, 256, 0, 0, Precision::kIeee);
  EXPECT_TRUE(DesignFits(depthwise, direct));
  EXPECT_FALSE(DotTiles(depthwise, direct)) << "one output a lane, no tl.dot";
  direct.precision = Precision::kTf32;
  EXPECT_FALSE(DesignFits(depthwise, direct)) << "FMA products only";

  const KernelPlan gemv = MatmulKernel(Gemm(2048, 1, 1 << 20));
  KernelDesign rows = Tiles(Algorithm::kGemv, 64, 1, 1024, Precision::kIeee);
  EXPECT_TRUE(DesignFits(gemv, rows));
  rows.split = 8;
  EXPECT_TRUE(DesignFits(gemv, rows));
  rows.yblock = 16;
  EXPECT_FALSE(DesignFits(gemv, rows)) << "one column";
  EXPECT_FALSE(DesignFits(gemm, Tiles(Algorithm::kGemv, 64, 1, 1024, Precision::kIeee))) << "not a mat-vec";
}

TEST(LegalityTest, RowKernelsKeepTheirAlgorithmsAndSingleTilesCoverTheRow) {
  KernelPlan reduction;
  reduction.kind = KernelKind::kReduction;
  reduction.length = 1000;
  KernelDesign design;
  design.algorithm = Algorithm::kPersistent;
  design.xblock = 4;
  design.rblock = 1024;
  EXPECT_TRUE(DesignFits(reduction, design));
  design.rblock = 512;
  EXPECT_FALSE(DesignFits(reduction, design)) << "a persistent tile must hold the row of 1000";
  design.algorithm = Algorithm::kLooped;
  EXPECT_TRUE(DesignFits(reduction, design));
  design.algorithm = Algorithm::kSplit;
  design.split = 4;
  EXPECT_FALSE(DesignFits(reduction, design)) << "not splittable";
  reduction.splittable = true;
  EXPECT_TRUE(DesignFits(reduction, design));
  design.algorithm = Algorithm::kBlocked;
  EXPECT_FALSE(DesignFits(reduction, design)) << "a scan's algorithm";

  KernelPlan scan = reduction;
  scan.kind = KernelKind::kScan;
  EXPECT_TRUE(DesignFits(scan, design));
  design.algorithm = Algorithm::kOnline;
  EXPECT_FALSE(DesignFits(scan, design)) << "a reduction's algorithm";

  design.algorithm = Algorithm::kLooped;
  design.num_warps = 3;
  EXPECT_FALSE(DesignFits(reduction, design));
  design.num_warps = 4;
  design.num_stages = 0;
  EXPECT_FALSE(DesignFits(reduction, design));
}

TEST(LegalityTest, WorthMeasuringBoundsRegistersAndSharedMemory) {
  const KernelPlan gemm = MatmulKernel(Gemm(4096, 4096, 4096));
  KernelDesign design = Tiles(Algorithm::kTiled, 128, 128, 32, Precision::kTf32);
  design.num_warps = 8;
  design.num_stages = 3;
  EXPECT_TRUE(WorthMeasuring(gemm, design)) << "64 accumulators a thread, a 96 KB ring";
  design.num_warps = 1;
  EXPECT_FALSE(WorthMeasuring(gemm, design)) << "512 accumulators a thread";
  design.num_warps = 8;
  design.xblock = 256;
  design.yblock = 256;
  design.rblock = 64;
  design.num_warps = 16;
  EXPECT_FALSE(WorthMeasuring(gemm, design)) << "a 384 KB ring";

  KernelPlan pointwise;
  pointwise.kind = KernelKind::kPointwise;
  KernelDesign flat;
  flat.algorithm = Algorithm::kFlat;
  flat.xblock = 1024;
  flat.num_warps = 4;
  EXPECT_TRUE(WorthMeasuring(pointwise, flat));
  flat.xblock = 16384;
  EXPECT_FALSE(WorthMeasuring(pointwise, flat)) << "128 elements a thread";
  flat.xblock = 64;
  flat.num_warps = 16;
  EXPECT_FALSE(WorthMeasuring(pointwise, flat)) << "fewer elements than threads";
  flat.xblock = 96;
  flat.num_warps = 1;
  EXPECT_FALSE(WorthMeasuring(pointwise, flat)) << "illegal first";
}

}  // namespace
}  // namespace egg::expert
