// Convolution kernels: the implicit GEMM (rows of (image, output position), K over (input channel, kernel
// tap), the input gathered and masked in the padding), the direct form (one output per lane, the window
// unrolled), the channels-last form (two repack launches into scratch buffers before the GEMM), groups as the
// batch axis, half operands kept in their type for tl.dot, the bias and fused consumers before one store.
#include <gtest/gtest.h>

#include "expert/codegen/kernel_codegen.h"
#include "expert/codegen/test_kernels.h"
#include "expert/design/legality.h"
#include "expert/ir/test_graphs.h"

namespace egg::expert {
namespace {

using testing::Count;
using testing::GraphJson;
using testing::Input;
using testing::LoadGraph;
using testing::Meta;
using testing::NodeJson;
using testing::Ref;

using testing::Has;

// The plan's only kernel (a convolution), written with its planned design changed by `edit`.
KernelSource WriteConv(const Graph& graph, void (*edit)(KernelDesign&) = nullptr) {
  return testing::WriteOnlyKernel(graph, KernelKind::kMatmul, [&](KernelPlan& kernel) {
    EXPECT_TRUE(kernel.matmul && kernel.matmul->conv);
    if (edit != nullptr) {
      edit(kernel.design);
    }
  });
}

// conv2d(x [2, `in_channels`, 8, 8], w [6, in_channels / groups, 3, 3], bias [6]) at `stride` and `padding`.
Graph Conv(int64_t padding, int64_t stride = 1, int64_t in_channels = 4, int64_t groups = 1,
           const std::string& dtype = "float32") {
  const int64_t out = (8 + 2 * padding - 3) / stride + 1;
  return LoadGraph(GraphJson(
      {Input("x", 0, Meta({2, in_channels, 8, 8}, dtype)),
       Input("w", 1, Meta({6, in_channels / groups, 3, 3}, dtype)), Input("b", 2, Meta({6}, dtype))},
      {NodeJson("conv", "aten.convolution.default",
                {Ref("x"), Ref("w"), Ref("b"), Json::array({stride, stride}), Json::array({padding, padding}),
                 Json::array({1, 1}), false, Json::array({0, 0}), groups},
                Meta({2, 6, out, out}, dtype))},
      {"conv"}));
}

void Direct(KernelDesign& design) {
  design.algorithm = Algorithm::kDirect;
  design.xblock = 128;
}

// (a design planned direct has no tile sizes: BLOCK_M 32, BLOCK_N 16, BLOCK_K 16)
void Tiled(KernelDesign& design) {
  design.algorithm = Algorithm::kTiled;
  design.xblock = 32;
  design.yblock = 16;
  design.rblock = 16;
}

void ChannelsLast(KernelDesign& design) { design.algorithm = Algorithm::kNhwc; }

void ChannelsLastTf32(KernelDesign& design) {
  design.algorithm = Algorithm::kNhwc;
  design.precision = Precision::kTf32;
}

TEST(ConvWriterTest, AnImplicitGemmLoopsOverChannelsAndTapsAndFusesItsEpilogue) {
  // conv 12 -> 16 channels, 3x3, over 16 images of 16x16 (14x14 out), then relu and + bias[16, 1, 1]
  const Graph graph = testing::Fixture("level2_1_Conv2D_ReLU_BiasAdd");
  const KernelSource source = WriteConv(graph);
  ASSERT_EQ(source.launches.size(), 1U);
  const KernelLaunch& launch = source.launches[0];
  const int64_t block_m = launch.constexprs.at("BLOCK_M");
  const int64_t block_n = launch.constexprs.at("BLOCK_N");
  // M = 16 images x 196 positions, N = 16 channels, K = 12 channels x 9 taps
  EXPECT_EQ(launch.grid,
            "(" + std::to_string(((3136 + block_m - 1) / block_m) * ((16 + block_n - 1) / block_n)) + ", 1)");
  EXPECT_TRUE(Has(source.code, "# 1 x [3136 x 108] @ [108 x 16]")) << source.code;
  EXPECT_TRUE(Has(source.code, "for k0 in range(0, 108, BLOCK_K):")) << source.code;
  EXPECT_TRUE(Has(source.code, "kchannel = (kaindex // 9)")) << source.code;
  EXPECT_TRUE(Has(source.code, "image = (mindex // 196)")) << source.code;
  EXPECT_FALSE(Has(source.code, "valid")) << "no padding, no stride: every position lies inside";
  EXPECT_EQ(source.a_tile_loads, 1);
  EXPECT_EQ(source.b_tile_loads, 1);
  EXPECT_TRUE(source.scratch.empty());
  // x, p_bias, the weight and the conv bias read; the conv, relu and add computed; add alone stored
  EXPECT_EQ(source.loaded, (std::set<int>{0, 1, 2, 3}));
  EXPECT_EQ(source.computed, (std::set<int>{0, 1, 2}));
  EXPECT_EQ(Count(source.code, "tl.store("), 1U);
  EXPECT_TRUE(Has(source.code, "product = acc + (")) << "the conv bias on the accumulator: " << source.code;
  EXPECT_TRUE(Has(source.code, "tl.where(product < 0, 0.0, product)")) << source.code;
  EXPECT_TRUE(Has(source.code, ", omask)")) << source.code;
  EXPECT_EQ(launch.pointers.size(), 5U);
}

TEST(ConvWriterTest, PaddedPositionsAreMaskedOutOfTheInputTile) {
  const KernelSource source = WriteConv(Conv(1));
  // padding 1 over 8: positions row - 1 + tap run from -1 to 8
  EXPECT_TRUE(Has(source.code, "valid = ")) << source.code;
  EXPECT_TRUE(Has(source.code, "(pos0 >= 0)")) << source.code;
  EXPECT_TRUE(Has(source.code, "(pos0 < 8)")) << source.code;
  EXPECT_TRUE(Has(source.code, "(pos1 >= 0)")) << source.code;
  EXPECT_TRUE(Has(source.code, "(pos1 < 8)")) << source.code;
  EXPECT_TRUE(Has(source.code, "(mmask & kamask) & (valid)"))
      << "the load takes the padding mask: " << source.code;
  EXPECT_FALSE(Has(source.code, "wvalid")) << "the weight has no padding";
  EXPECT_TRUE(Has(source.code, "for k0 in range(0, 36, BLOCK_K):")) << "4 channels x 9 taps: " << source.code;
}

TEST(ConvWriterTest, AStridedConvolutionReadsEveryStrideThPosition) {
  const KernelSource source = WriteConv(Conv(0, 2));  // 8 -> 3 positions per dim
  EXPECT_TRUE(Has(source.code, "pos0 = ktap0 + 2*row0")) << source.code;
  EXPECT_TRUE(Has(source.code, "# 1 x [18 x 36] @ [36 x 6]")) << "2 images x 3x3 positions: " << source.code;
  EXPECT_FALSE(Has(source.code, "valid")) << "positions 0..6 stay inside: " << source.code;
}

TEST(ConvWriterTest, GroupsAreTheBatchAxis) {
  const KernelSource source =
      WriteConv(Conv(1, 1, 4, 2), Tiled);  // 2 groups of 2 input and 3 output channels
  ASSERT_EQ(source.launches.size(), 1U);
  const std::string& grid = source.launches[0].grid;
  EXPECT_EQ(grid.substr(grid.rfind(", ")), ", 2)") << "one program column per group: " << grid;
  EXPECT_TRUE(Has(source.code, "bindex = tl.program_id(1)")) << source.code;
  EXPECT_TRUE(Has(source.code, "# 2 x [128 x 18] @ [18 x 3]")) << source.code;
}

TEST(ConvWriterTest, TheDirectFormUnrollsTheWindowPerOutput) {
  const Graph graph = testing::Fixture("level2_1_Conv2D_ReLU_BiasAdd");
  const KernelSource source = WriteConv(graph, Direct);
  ASSERT_EQ(source.launches.size(), 1U);
  EXPECT_EQ(source.launches[0].grid, "(triton.cdiv(50176, 128),)") << "16 x 16 x 14 x 14 outputs";
  EXPECT_EQ(source.launches[0].constexprs, (std::map<std::string, int64_t>{{"XBLOCK", 128}}));
  EXPECT_TRUE(Has(source.code, "for ci in tl.static_range(12):")) << source.code;
  EXPECT_TRUE(Has(source.code, "for t0 in tl.static_range(3):")) << source.code;
  EXPECT_TRUE(Has(source.code, "for t1 in tl.static_range(3):")) << source.code;
  EXPECT_TRUE(Has(source.code, "acc += (")) << source.code;
  EXPECT_FALSE(Has(source.code, "tl.dot(")) << source.code;
  EXPECT_EQ(source.a_tile_loads, 0);
  EXPECT_TRUE(Has(source.code, "convolution (direct) over a 12 input channel(s) x 3x3 window"))
      << source.code;
  EXPECT_EQ(Count(source.code, "tl.store("), 1U);
  EXPECT_EQ(source.computed, (std::set<int>{0, 1, 2}));
}

TEST(ConvWriterTest, TiledForcedOnADirectPlanIsRefusedNotDividedByZero) {
  // A design planned direct has no yblock or rblock: the tiled writer's grid would divide by them.
  const Graph graph = Conv(1, 1, 6, 6);  // depthwise: planned direct
  const auto forced = [](KernelDesign& design) {
    ASSERT_EQ(design.algorithm, Algorithm::kDirect);
    ASSERT_EQ(design.yblock, 0);
    design.algorithm = Algorithm::kTiled;
  };
  try {
    WriteConv(graph, forced);
    ADD_FAILURE() << "a tiled design without tile sides was generated";
  } catch (const IllegalDesign& error) {
    EXPECT_TRUE(Has(error.what(),
                    "cannot be written: algorithm tiled takes tl.dot tiles, but yblock 0 and "
                    "rblock 0 are not both powers of two"))
        << error.what();
    EXPECT_TRUE(Has(error.what(), "xblock/yblock/rblock powers of two in [16, 256]")) << error.what();
  }
  EXPECT_FALSE(WriteConv(graph, Tiled).code.empty()) << "with tile sides it is written";
}

TEST(ConvWriterTest, TheDirectFormZeroesPaddedProducts) {
  const KernelSource source = WriteConv(Conv(1, 1, 6, 6), Direct);  // depthwise: 1 channel per group
  EXPECT_TRUE(Has(source.code, "for ci in tl.static_range(1):")) << source.code;
  EXPECT_TRUE(Has(source.code, "acc += tl.where(valid, ")) << source.code;
  EXPECT_TRUE(Has(source.code, ">= 0)")) << source.code;
  EXPECT_TRUE(Has(source.code, "< 8)")) << source.code;
}

TEST(ConvWriterTest, ChannelsLastRepacksInputAndWeightIntoScratch) {
  const Graph graph = testing::Fixture("level2_1_Conv2D_ReLU_BiasAdd");
  const KernelSource source = WriteConv(graph, ChannelsLast);
  ASSERT_EQ(source.launches.size(), 3U);
  EXPECT_EQ(source.launches[0].function, source.name + "_weight");
  EXPECT_EQ(source.launches[1].function, source.name + "_nhwc");
  EXPECT_EQ(source.launches[2].function, source.name);
  ASSERT_EQ(source.scratch.size(), 2U);
  EXPECT_EQ(source.scratch[0].numel, 16 * 16 * 16 * 12) << "every input position's channels";
  EXPECT_EQ(source.scratch[1].numel, 16 * 108) << "16 output channels x (9 taps x 12 channels)";
  EXPECT_EQ(source.scratch[0].dtype, DType::kFloat32);
  // the weight repack reads the weight, writes scratch 1; the input repack reads x, writes scratch 0
  EXPECT_EQ(source.launches[0].pointers, (std::vector<int>{2, ScratchId(1)}));
  EXPECT_EQ(source.launches[1].pointers, (std::vector<int>{0, ScratchId(0)}));
  const std::vector<int>& gemm = source.launches[2].pointers;
  EXPECT_EQ(std::count(gemm.begin(), gemm.end(), 0), 0) << "the GEMM reads the copy, not x";
  EXPECT_EQ(std::count(gemm.begin(), gemm.end(), ScratchId(0)), 1);
  EXPECT_EQ(std::count(gemm.begin(), gemm.end(), ScratchId(1)), 1);
  EXPECT_TRUE(Has(source.code, "pmask = pindex < 4096")) << "16 images x 256 positions: " << source.code;
  EXPECT_TRUE(Has(source.code, "cmask = cindex < 108")) << source.code;
  EXPECT_TRUE(Has(source.code, "for tap in range(9):"))
      << "ieee products are never unrolled: " << source.code;
  EXPECT_TRUE(Has(source.code, "for k0 in range(0, 12, BLOCK_K):")) << "K per tap: the group's channels";
  EXPECT_TRUE(Has(source.code, "tvalid = mmask\n")) << "no padding: " << source.code;
  EXPECT_EQ(source.a_tile_loads, 1) << "the NHWC tile: its rows' mask is the tap's validity, from mmask";
  EXPECT_EQ(source.b_tile_loads, 1);
}

TEST(ConvWriterTest, ChannelsLastUnrollsASmallWindowAndMasksPaddedTaps) {
  const KernelSource source = WriteConv(Conv(1), ChannelsLastTf32);
  EXPECT_TRUE(Has(source.code, "for tap in tl.static_range(9):")) << source.code;
  EXPECT_TRUE(Has(source.code, "tvalid = mmask & (")) << source.code;
  EXPECT_TRUE(Has(source.code, "(pos0 >= 0)")) << source.code;
  EXPECT_TRUE(Has(source.code, "(pos1 < 8)")) << source.code;
  EXPECT_TRUE(Has(source.code, "tvalid & kamask, other=0.0)")) << source.code;
  ASSERT_EQ(source.scratch.size(), 2U);
  EXPECT_EQ(source.scratch[0].numel, 2 * 64 * 4);
  EXPECT_EQ(source.scratch[1].numel, 6 * 9 * 4);
}

void ChannelsLastOneLoop(KernelDesign& design) {
  design.algorithm = Algorithm::kNhwcK;
  design.precision = Precision::kTf32;
  design.rblock = 16;
}

TEST(ConvWriterTest, ChannelsLastInOneKLoopRunsTheTapsAndChannelStepsAsPairs) {
  // 32 input channels in K steps of 16: 9 taps x 2 steps, the tap and the step from the loop's index
  const KernelSource source = WriteConv(Conv(1, 1, 32), ChannelsLastOneLoop);
  EXPECT_TRUE(Has(source.code, "for kstep in range(18):")) << source.code;
  EXPECT_FALSE(Has(source.code, "for tap in")) << source.code;
  EXPECT_FALSE(Has(source.code, "for k0 in")) << source.code;
  EXPECT_TRUE(Has(source.code, "        tap = kstep // 2\n")) << source.code;
  EXPECT_TRUE(Has(source.code, "        k0 = (kstep % 2) * BLOCK_K\n")) << source.code;
  // the tap's positions and validity inside the loop, before the tiles that read them
  const size_t valid = source.code.find("        tvalid = mmask & (");
  const size_t load = source.code.find("tvalid & kamask, other=0.0)");
  ASSERT_NE(valid, std::string::npos) << source.code;
  EXPECT_LT(valid, load) << source.code;
  EXPECT_TRUE(Has(source.code, "        kamask = kaindex < 32\n")) << source.code;
  EXPECT_TRUE(Has(source.code, "        acc += tl.dot(a, b, input_precision=\"tf32\")")) << source.code;
  ASSERT_EQ(source.launches.size(), 3U) << "the same copies as nhwc";
  EXPECT_EQ(source.launches[2].constexprs.at("BLOCK_K"), 16);
}

TEST(ConvWriterTest, ChannelsLastInOneKLoopTakesATapAStepWhereTheChannelsFitOne) {
  const KernelSource source = WriteConv(Conv(1, 1, 16), ChannelsLastOneLoop);
  EXPECT_TRUE(Has(source.code, "for kstep in range(9):")) << source.code;
  EXPECT_TRUE(Has(source.code, "        tap = kstep\n")) << source.code;
  EXPECT_TRUE(Has(source.code, "        k0 = 0\n")) << source.code;
}

TEST(ConvWriterTest, HalfOperandsReachTheDotInTheirType) {
  const Graph graph = LoadGraph(
      testing::Retyped(testing::FixtureJson("level2_1_Conv2D_ReLU_BiasAdd"), "float32", "bfloat16"));
  const KernelSource source = WriteConv(graph);
  EXPECT_TRUE(Has(source.code, "tl.dot(a.to(EGG_BF16_DOT), b.to(EGG_BF16_DOT)")) << source.code;
  EXPECT_TRUE(Has(source.code, "a = tmp0\n"))
      << "the input tile as loaded, not cast to fp32: " << source.code;
  EXPECT_FALSE(Has(source.code, "tl.where(mmask & kamask")) << source.code;
  EXPECT_TRUE(Has(source.code, ".to(tl.bfloat16)")) << "the result stored in its type: " << source.code;
}

}  // namespace
}  // namespace egg::expert
