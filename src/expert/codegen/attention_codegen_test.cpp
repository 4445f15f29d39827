// Flash attention kernels: a program per (query block, batch), the Q tile loaded once, a loop over key blocks
// with the scores by tl.dot, the graph's own scaling and masking of them, the online softmax and acc += p v;
// key blocks masked everywhere skipped, head dims padded to tl.dot's tiles, never ieee products.
#include <gtest/gtest.h>

#include <algorithm>

#include "expert/codegen/kernel_codegen.h"
#include "expert/codegen/test_kernels.h"
#include "expert/ir/test_graphs.h"
#include "expert/kir/analysis.h"

namespace egg::expert {
namespace {

using testing::Count;
using testing::FixtureJson;
using testing::LoadGraph;
using testing::Scaled;
using testing::ValueNamed;

using testing::Has;

// The plan's attention kernel, written with its planned design, precision `precision` where set.
KernelSource WriteAttention(const Graph& graph, Precision precision = Precision::kUnset,
                            KernelPlan* planned = nullptr) {
  const Plan plan = MakePlan(graph, {});
  for (size_t k = 0; k < plan.kernels.size(); ++k) {
    if (plan.kernels[k].kind != KernelKind::kAttention) {
      continue;
    }
    KernelPlan kernel = plan.kernels[k];
    if (precision != Precision::kUnset) {
      kernel.design.precision = precision;
    }
    if (planned != nullptr) {
      *planned = kernel;
    }
    return testing::GenerateWithDenseStores(graph, kernel, plan.memory_before[k]);
  }
  ADD_FAILURE() << "no attention kernel planned";
  return {};
}

// The plan's attention kernel lowered to the kernel IR with its planned design (`planned`: that kernel).
kir::Kernel LowerAttention(const Graph& graph, KernelPlan* planned) {
  const Plan plan = MakePlan(graph, {});
  for (size_t k = 0; k < plan.kernels.size(); ++k) {
    if (plan.kernels[k].kind == KernelKind::kAttention) {
      *planned = plan.kernels[k];
      return AttentionProgram(graph, *planned, plan.memory_before[k], testing::DenseStores(graph, *planned));
    }
  }
  ADD_FAILURE() << "no attention kernel planned";
  return {};
}

// The code before the loop over key blocks.
std::string Prologue(const std::string& code) { return code.substr(0, code.find("for n0 in range(")); }

TEST(AttentionCodegenTest, OneProgramPerQueryBlockAndBatchLoopsOverKeyBlocks) {
  // q, k, v [2, 2, 64, 32], each of q and k scaled by 32^-1/4: 4 heads of 64 queries over 64 keys
  const Graph graph = testing::Fixture("level1_97_ScaledDotProductAttention");
  KernelPlan kernel;
  const KernelSource source = WriteAttention(graph, Precision::kUnset, &kernel);
  ASSERT_EQ(source.launches.size(), 1U);
  const KernelLaunch& launch = source.launches[0];
  const int64_t block_m = kernel.design.xblock;
  const int64_t block_n = kernel.design.yblock;
  EXPECT_EQ(launch.grid, "(" + std::to_string((64 + block_m - 1) / block_m) + ", 4)");
  EXPECT_EQ(launch.constexprs, (std::map<std::string, int64_t>{{"BLOCK_M", block_m}, {"BLOCK_N", block_n}}));
  EXPECT_TRUE(Has(source.code, "for n0 in range(0, 64, BLOCK_N):")) << source.code;
  EXPECT_TRUE(Has(source.code, "mmask = mindex < 64")) << source.code;
  EXPECT_TRUE(Has(source.code, "nmask = nindex < 64")) << source.code;
  // Q read once, before the loop; K and V once per key block
  EXPECT_EQ(Count(Prologue(source.code), "tl.load("), 1U) << source.code;
  EXPECT_EQ(Count(source.code, "tl.load("), 3U) << source.code;
  EXPECT_EQ(Count(source.code, "0.42044820762685725"), 2U)
      << "q and k scaled where they are read: " << source.code;
  EXPECT_TRUE(Has(source.code, "s = tl.dot(q, kt, input_precision=")) << source.code;
  EXPECT_TRUE(Has(source.code, "acc = acc * alpha[:, None] + tl.dot(p, v, input_precision=")) << source.code;
  EXPECT_TRUE(Has(source.code, "m_safe = tl.where(m_new == float(\"-inf\"), 0.0, m_new)")) << source.code;
  // the output: a fully masked row gives 0 (the graph's where(any(...)) of a safe softmax)
  EXPECT_TRUE(Has(source.code, "out = tl.where(l_i[:, None] == 0.0, 0.0, acc / l_i[:, None])"))
      << source.code;
  EXPECT_EQ(Count(source.code, "tl.store("), 1U);
  EXPECT_TRUE(Has(source.code, "out, omask)")) << source.code;
  EXPECT_EQ(source.loaded, (std::set<int>{0, 1, 2}));
  EXPECT_EQ(launch.pointers.size(), 4U) << "q, k, v and the output";
  // the scores, the softmax and both products belong to the kernel (none is stored)
  ASSERT_TRUE(kernel.attention.has_value());
  EXPECT_EQ(source.computed.count(kernel.attention->node), 1U);
  EXPECT_EQ(source.computed.count(kernel.attention->scores), 1U);
  EXPECT_GE(source.computed.size(), 20U);
}

TEST(AttentionCodegenTest, TheFlashKernelIsOneFunctionOverQueryBlocksInTheIr) {
  const Graph graph = testing::Fixture("level1_97_ScaledDotProductAttention");
  KernelPlan kernel;
  const kir::Kernel program = LowerAttention(graph, &kernel);
  ASSERT_EQ(program.functions.size(), 1U);
  const kir::Function& function = program.functions[0];
  EXPECT_EQ(function.name, kernel.name);
  EXPECT_EQ(function.constexprs, (std::vector<std::string>{"BLOCK_M", "BLOCK_N"}));
  EXPECT_EQ(function.domain.kind, kir::Domain::Kind::kQueryBlocks);
  EXPECT_EQ(function.domain.size, 64) << "query rows";
  EXPECT_FALSE(function.domain.int64);
  EXPECT_EQ(function.domain.heads.d, 32);
  EXPECT_EQ(function.domain.heads.block_d, 32);
  EXPECT_EQ(function.domain.heads.block_dv, 32);
  EXPECT_TRUE(function.signature.empty()) << "ptr0, ptr1, ... and the block sizes";
  EXPECT_TRUE(function.text_loads.empty());
  ASSERT_EQ(program.launches.size(), 1U);
  EXPECT_EQ(program.launches[0].function, kernel.name);
  EXPECT_EQ(program.launches[0].pointers.size(), function.pointers);
  EXPECT_TRUE(program.scratch.empty());
  // Q loaded once before the loop over key blocks, K and V in it: typed loads, the reads the emitter made
  std::vector<size_t> loads;
  size_t loop = 0;
  for (size_t i = 0; i < function.body.size(); ++i) {
    const kir::Statement& statement = function.body[i];
    if (statement.kind == kir::Statement::Kind::kLoad) {
      loads.push_back(i);
    } else if (statement.kind == kir::Statement::Kind::kLoop && statement.name == "n0") {
      loop = i;
    }
  }
  const std::vector<kir::LoopNest> loops = kir::Loops(function);
  ASSERT_EQ(loops.size(), 1U) << "one loop, over key blocks";
  EXPECT_EQ(loops[0].range.start, "0");
  EXPECT_EQ(loops[0].range.step, "BLOCK_N");
  ASSERT_EQ(loads.size(), 3U);
  EXPECT_LT(loads[0], loop);
  EXPECT_GT(loads[1], loop);
  EXPECT_EQ(function.body[loads[1]].depth, 2) << "in the loop's body";
  const int out = graph.nodes.at(static_cast<size_t>(kernel.attention->node)).value;
  EXPECT_EQ(kir::Reads(program), (std::set<int>{0, 1, 2})) << "q, k and v, as the emitter's Loaded() said";
  EXPECT_EQ(kir::Writes(program), std::set<int>{out});
  EXPECT_EQ(program.computed.count(kernel.attention->node), 1U);
}

TEST(AttentionCodegenTest, AMaskedAttentionReadsItsProjectionAndItsMaskBuffer) {
  // minGPT: q, k and v slices of the c_attn projection (in memory before), the causal mask the buffer `bias`
  const Graph graph = testing::Fixture("level3_43_MinGPTCausalAttention");
  KernelPlan kernel;
  const kir::Kernel program = LowerAttention(graph, &kernel);
  int addmm = -1;
  for (const Node& node : graph.nodes) {
    if (node.op == "aten.addmm.default" && addmm < 0) {
      addmm = node.value;
    }
  }
  EXPECT_EQ(kir::Reads(program), (std::set<int>{addmm, ValueNamed(graph, "b_bias")}));
  ASSERT_EQ(program.functions.size(), 1U);
  // the mask's load is typed inside the loop, before the live test that skips a key block
  const std::vector<kir::Statement>& body = program.functions[0].body;
  const auto live = std::find_if(body.begin(), body.end(), [](const kir::Statement& statement) {
    return statement.text == "if live > 0:";
  });
  ASSERT_NE(live, body.end());
  EXPECT_EQ(live->depth, 2);
  const auto mask = std::find_if(body.begin(), live, [&](const kir::Statement& statement) {
    return statement.kind == kir::Statement::Kind::kLoad && statement.buffer == ValueNamed(graph, "b_bias");
  });
  EXPECT_NE(mask, live);
}

TEST(AttentionCodegenTest, FlashProductsAreNeverIeee) {
  const Graph graph = testing::Fixture("level1_97_ScaledDotProductAttention");
  const KernelSource ieee = WriteAttention(graph, Precision::kIeee);
  EXPECT_EQ(Count(ieee.code, "input_precision=\"tf32x3\""), 2U) << ieee.code;
  EXPECT_FALSE(Has(ieee.code, "ieee")) << ieee.code;
  const KernelSource tf32 = WriteAttention(graph, Precision::kTf32);
  EXPECT_EQ(Count(tf32.code, "input_precision=\"tf32\""), 2U) << tf32.code;
}

TEST(AttentionCodegenTest, HalfAttentionFeedsTheTensorCoresInItsType) {
  const Graph graph =
      LoadGraph(testing::Retyped(FixtureJson("level3_43_MinGPTCausalAttention"), "float32", "bfloat16"));
  KernelPlan planned;
  const KernelSource half = WriteAttention(graph, Precision::kTf32x3, &planned);
  ASSERT_EQ(planned.attention->dtype, DType::kBFloat16);
  // both products on bf16 operands (the probabilities cast from their float32 registers), no tf32
  // decomposition
  EXPECT_TRUE(Has(half.code, "tl.dot(q.to(EGG_BF16_DOT), kt.to(EGG_BF16_DOT), input_precision=\"ieee\")"))
      << half.code;
  EXPECT_TRUE(Has(half.code, "tl.dot(p.to(EGG_BF16_DOT), v.to(EGG_BF16_DOT), input_precision=\"ieee\")"));
  EXPECT_FALSE(Has(half.code, "tf32"));
}

TEST(AttentionCodegenTest, HeadDimsArePaddedToPowersOfTwoAndMasked) {
  // head dim 32 -> 40 and sequence 64 -> 100: neither fills its tile
  const Graph graph =
      LoadGraph(Scaled(Scaled(FixtureJson("level1_97_ScaledDotProductAttention"), 32, 40), 64, 100));
  KernelPlan kernel;
  const KernelSource source = WriteAttention(graph, Precision::kUnset, &kernel);
  ASSERT_TRUE(kernel.attention.has_value());
  EXPECT_EQ(kernel.attention->d, 40);
  EXPECT_EQ(kernel.attention->lk, 100);
  EXPECT_TRUE(Has(source.code, "dqindex = tl.arange(0, 64)[None, :]")) << source.code;
  EXPECT_TRUE(Has(source.code, "dqmask = dqindex < 40")) << source.code;
  EXPECT_TRUE(Has(source.code, "dvmask = dvindex < 40")) << source.code;
  EXPECT_TRUE(Has(source.code, "acc = tl.zeros([BLOCK_M, 64], dtype=tl.float32)")) << source.code;
  EXPECT_TRUE(Has(source.code, "for n0 in range(0, 100, BLOCK_N):")) << source.code;
  EXPECT_TRUE(Has(source.code, "x = tl.where(nmask, ")) << "keys past 100 score -inf: " << source.code;
  EXPECT_TRUE(Has(source.code, "q = tl.where(mmask & dqmask, ")) << source.code;
  ASSERT_EQ(source.launches.size(), 1U);
  EXPECT_EQ(source.launches[0].grid,
            "(" + std::to_string((100 + kernel.design.xblock - 1) / kernel.design.xblock) + ", 4)");
}

TEST(AttentionCodegenTest, KeyBlocksMaskedForEveryQueryAreSkipped) {
  // minGPT: where(bias == 0, -inf, q k^T * 0.25), a causal mask read from a buffer
  const Graph graph = testing::Fixture("level3_43_MinGPTCausalAttention");
  KernelPlan kernel;
  const KernelSource source = WriteAttention(graph, Precision::kUnset, &kernel);
  ASSERT_TRUE(kernel.attention.has_value());
  EXPECT_GE(kernel.attention->mask, 0);
  EXPECT_TRUE(Has(source.code, "live = tl.max(tl.where(smask & (")) << source.code;
  EXPECT_TRUE(Has(source.code, "if live > 0:")) << source.code;
  const size_t live = source.code.find("if live > 0:");
  EXPECT_GT(source.code.find("s = tl.dot(q, kt"), live)
      << "the products only in live blocks: " << source.code;
  EXPECT_TRUE(Has(source.code, "float('-inf')")) << "the graph's own where on the scores: " << source.code;
  EXPECT_TRUE(Has(source.code, "* 0.25")) << source.code;
  EXPECT_TRUE(Has(source.code, "dqindex = tl.arange(0, 16)[None, :]")) << "head dim 16: " << source.code;
  // Q, K and V are slices of the projection's output (in memory before this kernel), the mask a buffer
  int addmm = -1;
  for (const Node& node : graph.nodes) {
    if (node.op == "aten.addmm.default" && addmm < 0) {
      addmm = node.value;
    }
  }
  EXPECT_EQ(source.loaded.count(addmm), 1U) << "q, k and v from the first projection";
  ASSERT_EQ(source.launches.size(), 1U);
  EXPECT_EQ(source.launches[0].grid.substr(source.launches[0].grid.rfind(", ")), ", 8)")
      << "2 images x 4 heads";
  EXPECT_FALSE(Has(source.code, "l_i[:, None] == 0.0")) << "a plain softmax: no safe zero rows";
}

}  // namespace
}  // namespace egg::expert
