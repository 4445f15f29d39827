// Transposed convolutions in sub-pixel form: one dense convolution per output phase on the batch axis (with
// the group), per-phase first taps, tap counts and input bases computed in the prologue, taps past a phase's
// count masked in both tiles, rows past a phase's output extent masked, and the output stored at
// q * stride + phase.
#include <gtest/gtest.h>

#include "expert/codegen/kernel_codegen.h"
#include "expert/codegen/test_kernels.h"
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

// The plan's only kernel, a transposed convolution, written as planned.
KernelSource WriteTransposed(const Graph& graph) {
  return testing::WriteOnlyKernel(graph, KernelKind::kMatmul, [](KernelPlan& kernel) {
    EXPECT_TRUE(kernel.matmul && kernel.matmul->conv && kernel.matmul->conv->transposed);
  });
}

// conv_transpose2d(x [2, 4, 8, 8], w [4, 6, k, k]) at `stride` and `padding`, no bias.
Graph Transposed(int64_t kernel, int64_t stride, int64_t padding) {
  const int64_t out = (8 - 1) * stride - 2 * padding + (kernel - 1) + 1;
  return LoadGraph(GraphJson(
      {Input("x", 0, Meta({2, 4, 8, 8})), Input("w", 1, Meta({4, 6, kernel, kernel}))},
      {NodeJson("deconv", "aten.convolution.default",
                {Ref("x"), Ref("w"), nullptr, Json::array({stride, stride}), Json::array({padding, padding}),
                 Json::array({1, 1}), true, Json::array({0, 0}), 1},
                Meta({2, 6, out, out}))},
      {"deconv"}));
}

TEST(TransposedConvWriterTest, PhasesAndGroupsShareTheBatchAxis) {
  // x [16, 16, 16, 16], weight [16, 4, 3, 5], stride (2, 3), padding (1, 2), dilation (2, 1), 4 groups:
  // out [16, 16, 33, 46]; 2 x 3 phases per group, rows (image, ceil(33 / 2) = 17, ceil(46 / 3) = 16)
  const KernelSource source =
      WriteTransposed(testing::Fixture("level1_75_conv_transposed_2D_strided_grouped"));
  ASSERT_EQ(source.launches.size(), 1U);
  const KernelLaunch& launch = source.launches[0];
  const int64_t block_m = launch.constexprs.at("BLOCK_M");
  const int64_t block_n = launch.constexprs.at("BLOCK_N");
  // one grid axis, the batch (group, phase) fastest: a tile's phases run side by side
  EXPECT_EQ(
      launch.grid,
      "(" + std::to_string(((4352 + block_m - 1) / block_m) * ((4 + block_n - 1) / block_n)) + " * 24,)");
  EXPECT_TRUE(Has(source.code, "bindex = tl.program_id(0) % 24\n    tile = tl.program_id(0) // 24\n"))
      << source.code;
  EXPECT_FALSE(Has(source.code, "tl.program_id(1)")) << source.code;
  EXPECT_TRUE(Has(source.code, "# 24 x [4352 x 24] @ [24 x 4]")) << source.code;
  EXPECT_TRUE(Has(source.code, "gindex = (bindex // 6)")) << source.code;
  EXPECT_TRUE(Has(source.code, "phase0 = ((bindex // 3) % 2)")) << source.code;
  EXPECT_TRUE(Has(source.code, "phase1 = (bindex % 3)")) << source.code;
  EXPECT_EQ(source.loaded, (std::set<int>{0, 1}));
  EXPECT_EQ(Count(source.code, "tl.store("), 1U);
}

TEST(TransposedConvWriterTest, TapsPastAPhasesCountAreMaskedInBothTiles) {
  const KernelSource source =
      WriteTransposed(testing::Fixture("level1_75_conv_transposed_2D_strided_grouped"));
  // dim 0: stride 2, dilation 2, padding 1: only odd output positions take taps, all 3 of them
  EXPECT_TRUE(Has(source.code, "taps0 = tl.where(((phase0 + 1) % 2) == 0, 3, 0)")) << source.code;
  // dim 1: stride 3, kernel 5, padding 2: phase p starts at tap (p + 2) % 3 and takes 1, 2 or 2 taps
  EXPECT_TRUE(Has(source.code, "tap1 = ((phase1 + 2) % 3)")) << source.code;
  EXPECT_TRUE(Has(source.code, "taps1 = ((-tap1 + 7) // 3)")) << source.code;
  EXPECT_TRUE(Has(source.code, "(ktap0 < taps0)")) << source.code;
  EXPECT_TRUE(Has(source.code, "(ktap1 < taps1)")) << source.code;
  EXPECT_TRUE(Has(source.code, "wvalid = (((kbindex // 2) % 3) < taps0) & ((kbindex % 2) < taps1)"))
      << source.code;
  EXPECT_TRUE(Has(source.code, "(nmask & kbmask) & (wvalid)")) << source.code;
  EXPECT_TRUE(Has(source.code, "(pos0 >= 0) & (pos0 < 16)"))
      << "input positions kept inside: " << source.code;
}

TEST(TransposedConvWriterTest, OneKLoopMasksTheStepsOfATapAPhaseLacks) {
  // channels-last in one K loop (nhwck): a tap past the phase's count cannot end the loop early, as the
  // nested form's channel loop does (`range(0, kend, BLOCK_K)`); its steps load nothing instead
  const KernelSource source =
      testing::WriteOnlyKernel(testing::Fixture("level1_75_conv_transposed_2D_strided_grouped"),
                               KernelKind::kMatmul, [](KernelPlan& kernel) {
                                 kernel.design.algorithm = Algorithm::kNhwcK;
                                 kernel.design.precision = Precision::kTf32;
                                 kernel.design.rblock = 16;
                               });
  EXPECT_TRUE(Has(source.code, "for kstep in range(")) << source.code;
  EXPECT_TRUE(Has(source.code, "kend = tl.where(")) << source.code;
  EXPECT_TRUE(Has(source.code, "kamask = kaindex < kend\n")) << source.code;
  EXPECT_TRUE(Has(source.code, "kbmask = kbindex < kend\n")) << source.code;
  EXPECT_FALSE(Has(source.code, "range(0, kend")) << source.code;
}

TEST(TransposedConvWriterTest, RowsPastAPhasesOutputExtentAreMasked) {
  const KernelSource source =
      WriteTransposed(testing::Fixture("level1_75_conv_transposed_2D_strided_grouped"));
  // 33 and 46 are not multiples of the strides 2 and 3: the last q of some phases lies past the output
  EXPECT_TRUE(Has(source.code, "opos0 = 2*((mindex // 16) % 17) + phase0")) << source.code;
  EXPECT_TRUE(Has(source.code, "opos1 = 3*(mindex % 16) + phase1")) << source.code;
  EXPECT_TRUE(Has(source.code, "mmask = mmask & (opos0 < 33) & (opos1 < 46)")) << source.code;
  EXPECT_TRUE(Has(source.code, "46*opos0 + opos1), product, omask)")) << "stored at the phase's position";
}

TEST(TransposedConvWriterTest, StrideOneIsOneDenseConvolution) {
  const KernelSource source = WriteTransposed(Transposed(3, 1, 1));  // 8 -> 8
  ASSERT_EQ(source.launches.size(), 1U);
  EXPECT_EQ(source.launches[0].grid.substr(source.launches[0].grid.rfind(", ")), ", 1)") << "one phase";
  EXPECT_FALSE(Has(source.code, "phase")) << source.code;
  EXPECT_FALSE(Has(source.code, "taps")) << source.code;
  EXPECT_TRUE(Has(source.code, "# 1 x [128 x 36] @ [36 x 6]")) << source.code;
  // input position row + 1 - tap: -1 at row 0, 8 at row 7
  EXPECT_TRUE(Has(source.code, "(pos0 >= 0) & (pos0 < 8)")) << source.code;
  EXPECT_FALSE(Has(source.code, "mmask = mmask &")) << source.code;
}

TEST(TransposedConvWriterTest, EvenPhasesNeedNoRowOrTapCountMasks) {
  // kernel 4, stride 2, padding 1: 8 -> 16, every phase takes 2 taps from its own first one
  const KernelSource source = WriteTransposed(Transposed(4, 2, 1));
  ASSERT_EQ(source.launches.size(), 1U);
  EXPECT_EQ(source.launches[0].grid.substr(source.launches[0].grid.rfind(" * ")), " * 4,)") << "2 x 2 phases";
  EXPECT_TRUE(Has(source.code, "# 4 x [128 x 16] @ [16 x 6]")) << "(image, 8 x 8 q), 4 channels x 2 x 2 taps";
  EXPECT_TRUE(Has(source.code, "tap0 = ")) << "the first tap differs by phase: " << source.code;
  EXPECT_FALSE(Has(source.code, "taps0")) << "but not the count: " << source.code;
  EXPECT_FALSE(Has(source.code, "wvalid")) << source.code;
  EXPECT_FALSE(Has(source.code, "mmask = mmask &")) << "16 is a multiple of 2: " << source.code;
}

}  // namespace
}  // namespace egg::expert
