#include "expert/patterns/matmul.h"

#include <gtest/gtest.h>

#include "expert/ir/test_graphs.h"
#include "expert/ir/test_nodes.h"

namespace egg::expert {
namespace {

TEST(MatmulPatternTest, BmmIsABatchedProduct) {
  const Graph graph =
      testing::Fixture("level1_3_Batched_matrix_multiplication");  // [8, 32, 48] @ [8, 48, 64]
  const auto mm = ParseMatmul(graph, testing::NodeWithOp(graph, "aten.bmm.default"));
  ASSERT_TRUE(mm);
  EXPECT_TRUE(mm->batched);
  EXPECT_EQ(mm->batch, 8);
  EXPECT_EQ(mm->m, 32);
  EXPECT_EQ(mm->n, 64);
  EXPECT_EQ(mm->k, 48);
  EXPECT_EQ(mm->bias, -1);
  EXPECT_FALSE(mm->conv);
}

TEST(MatmulPatternTest, BIsKnownNMajorWhenItIsAnInputReadAsItIs) {
  // nn.Linear: addmm(bias, x, permute(weight, [1, 0])): the weight [N, K] read as B[k, n] along K
  const Graph linear = testing::Fixture("level2_12_Gemm_Multiply_LeakyReLU");
  const auto addmm = ParseMatmul(linear, testing::NodeWithOp(linear, "aten.addmm.default"));
  ASSERT_TRUE(addmm);
  EXPECT_FALSE(addmm->b_n_major);
  // bmm of two inputs, and mm(a.T, b): B as stored, row-major [K, N]
  const Graph batched = testing::Fixture("level1_3_Batched_matrix_multiplication");
  EXPECT_TRUE(ParseMatmul(batched, testing::NodeWithOp(batched, "aten.bmm.default"))->b_n_major);
  const Graph transposed_a = testing::Fixture("level1_16_Matmul_with_transposed_A");
  const auto mm_at = ParseMatmul(transposed_a, testing::NodeWithOp(transposed_a, "aten.mm.default"));
  EXPECT_TRUE(mm_at->b_n_major);
  // A: K-major where it is an input read as it is (bmm's), not through a transpose (a.T) or nn.Linear's x
  EXPECT_TRUE(ParseMatmul(batched, testing::NodeWithOp(batched, "aten.bmm.default"))->a_k_major);
  EXPECT_FALSE(mm_at->a_k_major);
  EXPECT_TRUE(addmm->a_k_major) << "nn.Linear's input x [batch, K]";
  // B K-contiguous by its traced strides: nn.Linear's weight.T ([N, K] read as [K, N]), not B as stored
  EXPECT_TRUE(addmm->b_k_major);
  EXPECT_FALSE(mm_at->b_k_major);
  EXPECT_FALSE(ParseMatmul(batched, testing::NodeWithOp(batched, "aten.bmm.default"))->b_k_major);
}

TEST(MatmulPatternTest, HalfProductsOfOneTypeAreLoweredMixedOnesAreNot) {
  const Json fp32 = testing::FixtureJson("level1_3_Batched_matrix_multiplication");
  for (const char* type : {"bfloat16", "float16"}) {
    const Graph graph = testing::LoadGraph(testing::Retyped(fp32, "float32", type));
    EXPECT_TRUE(ParseMatmul(graph, testing::NodeWithOp(graph, "aten.bmm.default"))) << type;
  }
  const Graph float64 = testing::LoadGraph(testing::Retyped(fp32, "float32", "float64"));
  EXPECT_FALSE(ParseMatmul(float64, testing::NodeWithOp(float64, "aten.bmm.default")));
  Json mixed = fp32;
  mixed["inputs"][0]["meta"]["dtype"] = "bfloat16";  // a bf16 A times a float32 B
  const Graph graph = testing::LoadGraph(mixed);
  EXPECT_FALSE(ParseMatmul(graph, testing::NodeWithOp(graph, "aten.bmm.default")));
}

TEST(MatmulPatternTest, ConvolutionIsAnImplicitGemmPerGroup) {
  const Graph graph = testing::Fixture("level2_1_Conv2D_ReLU_BiasAdd");  // x [16, 12, 16, 16]
  const auto mm = ParseMatmul(graph, testing::NodeWithOp(graph, "aten.convolution.default"));
  ASSERT_TRUE(mm);
  ASSERT_TRUE(mm->conv);
  EXPECT_EQ(mm->conv->spatial, 2);
  EXPECT_EQ(mm->conv->images, 16);
  EXPECT_EQ(mm->conv->in_channels, 12);
  EXPECT_FALSE(mm->conv->transposed);
  const int64_t positions = mm->conv->out_size[0] * mm->conv->out_size[1];
  EXPECT_EQ(mm->m, 16 * positions) << "rows: (image, output position)";
  EXPECT_EQ(mm->n, mm->conv->out_channels / mm->conv->groups);
  EXPECT_EQ(mm->k, 12 / mm->conv->groups * mm->conv->kernel[0] * mm->conv->kernel[1]);
}

TEST(MatmulPatternTest, TransposedPhasesCoverEveryTapOnce) {
  ConvShape conv;
  conv.spatial = 1;
  conv.transposed = true;
  conv.kernel = {5};
  conv.stride = {2};
  conv.padding = {0};
  conv.dilation = {1};
  const auto phases = TransposedPhases(conv, 0);
  ASSERT_EQ(phases.size(), 2U);
  int64_t taps = 0;
  for (const TransposedPhase& phase : phases) {
    taps += phase.count;
  }
  EXPECT_EQ(taps, 5);
  EXPECT_EQ(TransposedMaxTaps(conv, 0), 3);
  EXPECT_EQ(TransposedTapStep(conv, 0), 2);
}

}  // namespace
}  // namespace egg::expert
