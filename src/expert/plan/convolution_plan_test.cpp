// Convolutions planned and written: implicit GEMM, transposed (one dense convolution per phase), direct and
// channels-last.
#include <gtest/gtest.h>

#include <algorithm>
#include <tuple>

#include "expert/codegen/candidate_file.h"
#include "expert/design/candidate.h"
#include "expert/design/defaults.h"
#include "expert/design/design_space.h"
#include "expert/design/legality.h"
#include "expert/ir/test_graphs.h"
#include "expert/plan/plan.h"

namespace egg::expert {
namespace {

using testing::Count;
using testing::Fixture;
using testing::FixtureJson;
using testing::LoadGraph;

TEST(ConvolutionPlanTest, ConvolutionIsOneImplicitGemmKernelWithItsEpilogue) {
  const Graph graph =
      Fixture("level2_1_Conv2D_ReLU_BiasAdd");  // conv 12->16, 3x3 on 16x12x16x16, relu, + bias
  const Plan plan = MakePlan(graph, {});
  EXPECT_TRUE(plan.extern_ops.empty());
  ASSERT_EQ(plan.kernels.size(), 1U);
  const KernelPlan& kernel = plan.kernels[0];
  EXPECT_EQ(kernel.kind, KernelKind::kMatmul);
  ASSERT_TRUE(kernel.matmul && kernel.matmul->conv);
  const MatmulSpec& mm = *kernel.matmul;
  EXPECT_EQ(mm.m, 16 * 14 * 14);  // images x output positions
  EXPECT_EQ(mm.n, 16);            // output channels (one group)
  EXPECT_EQ(mm.k, 12 * 3 * 3);    // input channels x kernel positions
  EXPECT_GE(mm.bias, 0);
  const Candidate candidate = GenerateCandidate(graph, "", "conv", CandidateDesign{});
  ASSERT_TRUE(candidate.source) << candidate.problem;
  EXPECT_EQ(Count(*candidate.source, "tl.dot("), 1U);
  EXPECT_EQ(Count(*candidate.source, "tl.store("), 1U);  // the convolution's own output never reaches memory
  EXPECT_EQ(Count(*candidate.source, "valid = "), 0U);   // no padding: no bounds mask on the gathered input
}

TEST(ConvolutionPlanTest, PaddedConvolutionPrologueLoadsParametersOncePerColumn) {
  // level2_1 with a prologue (relu(x * scale), scale per input channel) and padding 1: only the gathered
  // input can fall outside its tensor; the per-channel scale is a BLOCK_K row, not a tile masked by the
  // padding test.
  Json ir = FixtureJson("level2_1_Conv2D_ReLU_BiasAdd");
  const Json meta_x = ir["inputs"][0]["meta"];
  const Json scale_meta = {{"shape", {12, 1, 1}}, {"stride", {1, 1, 1}}, {"offset", 0}, {"dtype", "float32"}};
  ir["state"].push_back({{"name", "p_scale"},
                         {"kind", "parameter"},
                         {"target", "scale"},
                         {"persistent", false},
                         {"meta", scale_meta}});
  Json mul = {{"name", "mul"},
              {"op", "aten.mul.Tensor"},
              {"args", {{{"node", "x"}}, {{"node", "p_scale"}}}},
              {"kwargs", Json::object()},
              {"meta", meta_x}};
  Json relu0 = {{"name", "relu_0"},
                {"op", "aten.relu.default"},
                {"args", {{{"node", "mul"}}}},
                {"kwargs", Json::object()},
                {"meta", meta_x}};
  const Json out_meta = {
      {"shape", {16, 16, 16, 16}}, {"stride", {4096, 256, 16, 1}}, {"offset", 0}, {"dtype", "float32"}};
  Json& conv = ir["nodes"][0];
  conv["args"][0] = {{"node", "relu_0"}};
  conv["args"][4] = {1, 1};
  for (Json& node : ir["nodes"]) {
    node["meta"] = out_meta;
  }
  ir["nodes"].insert(ir["nodes"].begin(), {mul, relu0});
  const Graph graph = LoadGraph(ir);
  const Candidate candidate = GenerateCandidate(graph, "", "conv_prologue", CandidateDesign{});
  ASSERT_TRUE(candidate.source) << candidate.problem;
  EXPECT_EQ(Count(*candidate.source, "valid = "), 1U);
  EXPECT_EQ(Count(*candidate.source, "(valid)"), 1U) << *candidate.source;  // the input gather alone
  EXPECT_NE(candidate.source->find("(kchannel), kamask, other=0.0)"), std::string::npos) << *candidate.source;
}

TEST(ConvolutionPlanTest, TransposedConvolutionIsOneDenseConvolutionPerPhase) {
  // ConvTranspose2d 16->16 on 16x16, kernel (3, 5), stride (2, 3), padding (1, 2), dilation (2, 1), groups 4:
  // output 33x46 as positions q * stride + phase, 2 x 3 phases per group.
  const Graph graph = Fixture("level1_75_conv_transposed_2D_strided_grouped");
  const Plan plan = MakePlan(graph, {});
  EXPECT_TRUE(plan.extern_ops.empty());
  ASSERT_EQ(plan.kernels.size(), 1U);
  const KernelPlan& kernel = plan.kernels[0];
  ASSERT_EQ(kernel.kind, KernelKind::kMatmul);
  const MatmulSpec& mm = *kernel.matmul;
  ASSERT_TRUE(mm.conv && mm.conv->transposed);
  EXPECT_EQ(mm.batch, 4 * 2 * 3);  // groups x phases
  EXPECT_EQ(mm.m, 16 * 17 * 16);   // images x ceil(33 / 2) x ceil(46 / 3)
  EXPECT_EQ(mm.n, 4);              // output channels per group
  // Input channels per group x the most taps of a phase: along dim 0 (dilation 2 = stride) odd phases take no
  // tap and even ones all 3; along dim 1 the phases take offsets {2}, {0, 3}, {1, 4}.
  EXPECT_EQ(mm.k, 4 * 3 * 2);
  const std::vector<TransposedPhase> dim1 = TransposedPhases(*mm.conv, 1);
  ASSERT_EQ(dim1.size(), 3U);
  EXPECT_EQ(dim1[0].first, 2);
  EXPECT_EQ(dim1[0].count, 1);
  EXPECT_EQ(dim1[1].first, 0);
  EXPECT_EQ(dim1[1].count, 2);
  EXPECT_EQ(dim1[2].first, 1);
  EXPECT_EQ(dim1[2].count, 2);
  EXPECT_EQ(TransposedPhases(*mm.conv, 0)[0].count, 0);
  const Candidate candidate = GenerateCandidate(graph, "", "convt", CandidateDesign{});
  ASSERT_TRUE(candidate.source) << candidate.problem;
  EXPECT_NE(candidate.source->find("taps0 = tl.where("), std::string::npos);  // phases with no tap
  // ...whose programs run no K step: their outputs are the bias alone
  EXPECT_NE(candidate.source->find("k_end = tl.where((taps0 > 0), 24, 0)"), std::string::npos)
      << *candidate.source;
  EXPECT_NE(candidate.source->find("for k0 in range(0, k_end, BLOCK_K):"), std::string::npos);
  EXPECT_NE(candidate.source->find("tap1 = "), std::string::npos);            // the first offset per phase
  EXPECT_NE(candidate.source->find("mmask = mmask & "), std::string::npos);   // 33 and 46: uneven extents
  const size_t valid = candidate.source->find("valid = ");
  ASSERT_NE(valid, std::string::npos);
  const std::string loop_mask = candidate.source->substr(valid, candidate.source->find('\n', valid) - valid);
  EXPECT_EQ(loop_mask.find("== 0"), std::string::npos)
      << loop_mask;  // no per-tap divisibility test in the loop
}

TEST(ConvolutionPlanTest, TransposedChannelsLastRunsNoKStepForATapItsPhaseLacks) {
  // 1_75's phases (as above) in the channels-last form: the loop runs the most taps of any phase (3 x 2) and
  // a tap its phase lacks stops the channel loop at 0; the weight is copied from [in, out / groups, 3, 5]
  // into [out, (tap, channel)] rows and read at the phase's own kernel tap.
  const Graph graph = Fixture("level1_75_conv_transposed_2D_strided_grouped");
  const Candidate tiled = GenerateCandidate(graph, "", "convt", CandidateDesign{});
  ASSERT_TRUE(tiled.source) << tiled.problem;
  const KernelPlan& kernel = tiled.plan.kernels.at(0);
  ASSERT_TRUE(ChannelsLastConvolutionFits(*kernel.matmul));
  const auto moves = StageMoves(graph, "stage1.algorithm", tiled, "", 8);
  const auto nhwc_move = std::find_if(moves.begin(), moves.end(), [&](const DesignMove& move) {
    return move.move == "algorithm " + kernel.name + " nhwc";
  });
  ASSERT_NE(nhwc_move, moves.end());
  const Candidate nhwc = GenerateCandidate(graph, "", "convt", nhwc_move->design);
  ASSERT_TRUE(nhwc.source) << nhwc.problem;
  const std::string& source = *nhwc.source;
  EXPECT_EQ(nhwc.launches, 3U);
  EXPECT_NE(source.find("for tap in range(6):"), std::string::npos) << source;
  EXPECT_NE(source.find("kend = tl.where((ktap0 < taps0) & (ktap1 < taps1), 4, 0)"), std::string::npos);
  EXPECT_NE(source.find("for k0 in range(0, kend, BLOCK_K):"), std::string::npos);
  EXPECT_NE(source.find("wtap = "), std::string::npos);           // the kernel tap: first + j * step per dim
  EXPECT_NE(source.find("mmask = mmask & "), std::string::npos);  // 33 and 46: uneven extents
  EXPECT_EQ(Count(source, "tl.dot("), 1U);
  // no mask of the phase's taps on the operands: the channel loop does not run there
  EXPECT_EQ(source.find("tapok"), std::string::npos);
  // the weight's rows are packed once per parameter version, the input copied at every call; a CUDA-graph
  // forward replays the pack with the rest (the graph keeps nothing between its replays' parameters)
  EXPECT_NE(source.find("_scratch1 = _egg_kept(self, "), std::string::npos);
  EXPECT_NE(source.find("_scratch0 = torch.empty("), std::string::npos);
  CandidateDesign graphed = nhwc_move->design;
  graphed.plan.cuda_graph = true;
  const Candidate replayed = GenerateCandidate(graph, "", "convt", graphed);
  ASSERT_TRUE(replayed.source) << replayed.problem;
  EXPECT_EQ(replayed.source->find("_egg_kept("), std::string::npos);
  EXPECT_NE(replayed.source->find("_scratch1 = torch.empty("), std::string::npos);
  // back to the phase form that gathers the NCHW input, or to one K loop over (tap, channel step)
  const auto back = StageMoves(graph, "stage1.algorithm", nhwc, "", 8);
  EXPECT_TRUE(std::any_of(back.begin(), back.end(), [&](const DesignMove& move) {
    return move.move == "algorithm " + kernel.name + " tiled";
  }));
  const auto one_loop = std::find_if(back.begin(), back.end(), [&](const DesignMove& move) {
    return move.move == "algorithm " + kernel.name + " nhwck";
  });
  ASSERT_NE(one_loop, back.end());
  const Candidate nhwck = GenerateCandidate(graph, "", "convt", one_loop->design);
  ASSERT_TRUE(nhwck.source) << nhwck.problem;
  EXPECT_EQ(nhwck.launches, 3U);
  EXPECT_NE(nhwck.source->find("for kstep in range(6):"), std::string::npos) << *nhwck.source;
  EXPECT_NE(nhwck.source->find("kamask = kaindex < kend"), std::string::npos) << *nhwck.source;
  const auto from_one_loop = StageMoves(graph, "stage1.algorithm", nhwck, "", 8);
  for (const char* algorithm : {" nhwc", " tiled"}) {
    EXPECT_TRUE(std::any_of(from_one_loop.begin(), from_one_loop.end(), [&](const DesignMove& move) {
      return move.move == "algorithm " + kernel.name + algorithm;
    })) << algorithm;
  }
}

// level2_1's convolution made a ConvTranspose2d 12->16, kernel 4x4, padding 1, stride `stride` (relu and +
// bias after it): the common decoder shape, where every phase takes the same taps.
Graph TransposedConvolutionWithEpilogue(int64_t stride) {
  Json ir = FixtureJson("level2_1_Conv2D_ReLU_BiasAdd");
  const int64_t size = 15 * stride - 2 + 3 + 1;
  ir["state"][1]["meta"]["shape"] = {12, 16, 4, 4};
  ir["state"][1]["meta"]["stride"] = {256, 16, 4, 1};
  Json& conv = ir["nodes"][0];
  conv["args"][3] = {stride, stride};
  conv["args"][4] = {1, 1};
  conv["args"][6] = true;
  for (Json& node : ir["nodes"]) {
    node["meta"]["shape"] = {16, 16, size, size};
    node["meta"]["stride"] = {16 * size * size, size * size, size, 1};
  }
  return LoadGraph(ir);
}

TEST(ConvolutionPlanTest, StridedTransposedConvolutionKeepsItsEpilogueInThePhaseKernel) {
  const Graph graph = TransposedConvolutionWithEpilogue(2);  // 16x16 -> 32x32
  const Plan plan = MakePlan(graph, {});
  EXPECT_TRUE(plan.extern_ops.empty());
  ASSERT_EQ(plan.kernels.size(), 1U);
  const MatmulSpec& mm = *plan.kernels[0].matmul;
  EXPECT_EQ(mm.batch, 4);         // 2 x 2 phases
  EXPECT_EQ(mm.m, 16 * 16 * 16);  // images x 32 / 2 x 32 / 2
  EXPECT_EQ(mm.k, 12 * 2 * 2);    // input channels x 2 x 2 taps per phase (a quarter of the 4x4 kernel)
  const Candidate candidate = GenerateCandidate(graph, "", "convt", CandidateDesign{});
  ASSERT_TRUE(candidate.source) << candidate.problem;
  EXPECT_EQ(Count(*candidate.source, "tl.dot("), 1U);
  EXPECT_EQ(Count(*candidate.source, "tl.store("), 1U);      // only the epilogue's result reaches memory
  EXPECT_EQ(Count(*candidate.source, "taps"), 0U);           // equal tap counts: no per-tap mask
  EXPECT_EQ(Count(*candidate.source, "mmask = mmask"), 0U);  // 32 = 16 x 2: every phase fills its rows
}

TEST(ConvolutionPlanTest, UnitStrideTransposedConvolutionIsAPlainConvolution) {
  const Graph graph = TransposedConvolutionWithEpilogue(1);  // 16x16 -> 17x17, the kernel's taps flipped
  const Plan plan = MakePlan(graph, {});
  ASSERT_EQ(plan.kernels.size(), 1U);
  const MatmulSpec& mm = *plan.kernels[0].matmul;
  EXPECT_EQ(mm.batch, 1);
  EXPECT_EQ(mm.m, 16 * 17 * 17);
  EXPECT_EQ(mm.k, 12 * 4 * 4);
  const Candidate candidate = GenerateCandidate(graph, "", "convt", CandidateDesign{});
  ASSERT_TRUE(candidate.source) << candidate.problem;
  EXPECT_EQ(Count(*candidate.source, "phase"), 0U);
  EXPECT_EQ(Count(*candidate.source, "tl.store("), 1U);
}

TEST(ConvolutionPlanTest, DirectConvolutionOnlyForSmallGroups) {
  MatmulSpec depthwise;
  depthwise.conv = ConvShape{};
  depthwise.conv->in_channels = 64;
  depthwise.conv->groups = 64;
  depthwise.conv->kernel = {3, 3};
  depthwise.n = 1;
  EXPECT_TRUE(DirectConvolutionFits(depthwise));
  MatmulSpec wide = depthwise;
  wide.conv->groups = 1;  // 64 input channels x 9 taps per output: a GEMM's K
  wide.n = 64;
  EXPECT_FALSE(DirectConvolutionFits(wide));
  MatmulSpec transposed = depthwise;
  transposed.conv->transposed = true;
  EXPECT_FALSE(DirectConvolutionFits(transposed));
  EXPECT_FALSE(DirectConvolutionFits(MatmulSpec{}));  // a plain product
  KernelPlan kernel;
  kernel.kind = KernelKind::kMatmul;
  kernel.matmul = depthwise;
  kernel.matmul->m = 2 * 14 * 14;
  kernel.matmul->batch = 64;
  EXPECT_EQ(DefaultDesign(kernel, 0).algorithm, Algorithm::kDirect);
  EXPECT_EQ(DefaultDesign(kernel, 0).xblock, 1024);
  EXPECT_EQ(DefaultDesign(kernel, 1).algorithm, Algorithm::kTiled);
  EXPECT_TRUE(DesignFits(kernel, DefaultDesign(kernel, 0)));
  KernelDesign tf32 = DefaultDesign(kernel, 0);
  tf32.precision = Precision::kTf32;  // direct products are float32 FMAs
  EXPECT_FALSE(DesignFits(kernel, tf32));
}

TEST(ConvolutionPlanTest, ChannelsLastConvolutionRepacksItsInputThenLoopsOverTaps) {
  // conv 12->16, 3x3 on 16x12x16x16, relu, + bias
  const Graph graph = Fixture("level2_1_Conv2D_ReLU_BiasAdd");
  const Candidate tiled = GenerateCandidate(graph, "", "conv", SeedDesign(1, 1e-4).design);
  ASSERT_TRUE(tiled.source) << tiled.problem;
  const KernelPlan& kernel = tiled.plan.kernels.at(0);
  ASSERT_EQ(kernel.design.algorithm, Algorithm::kTiled);
  const std::string name = kernel.name;
  const auto moves = StageMoves(graph, "stage1.algorithm", tiled, "", 8);
  const auto nhwc_move = std::find_if(moves.begin(), moves.end(), [&](const DesignMove& move) {
    return move.move == "algorithm " + name + " nhwc";
  });
  ASSERT_NE(nhwc_move, moves.end());
  const KernelDesign& design = nhwc_move->design.kernels.at(name);
  EXPECT_EQ(design.algorithm, Algorithm::kNhwc);
  EXPECT_EQ(design.rblock, 16);  // a K step spans the 12 channels of one tap, not (channel, tap) pairs
  EXPECT_EQ(design.xblock, kernel.design.xblock);
  EXPECT_EQ(design.precision, kernel.design.precision);
  // from FMA products, also channels-last on the tensor cores (tf32x3 keeps float32 accuracy)
  ASSERT_EQ(kernel.design.precision, Precision::kIeee);
  const auto tensor_cores = std::find_if(moves.begin(), moves.end(), [&](const DesignMove& move) {
    return move.move == "algorithm " + name + " nhwc tf32x3";
  });
  ASSERT_NE(tensor_cores, moves.end());
  EXPECT_EQ(tensor_cores->design.kernels.at(name).algorithm, Algorithm::kNhwc);
  EXPECT_EQ(tensor_cores->design.kernels.at(name).precision, Precision::kTf32x3);
  const Candidate nhwc = GenerateCandidate(graph, "", "conv", nhwc_move->design);
  ASSERT_TRUE(nhwc.source) << nhwc.problem;
  const std::string& source = *nhwc.source;
  EXPECT_EQ(nhwc.launches, 3U);  // the input's and the weight's copies, then the GEMM
  EXPECT_NE(source.find(name + "_nhwc[(triton.cdiv(4096, 128), triton.cdiv(12, 16))]("), std::string::npos)
      << source;
  EXPECT_NE(source.find(name + "_scratch0 = torch.empty((49152,)"), std::string::npos);  // 16 x 16 x 16 x 12
  // the weight: 16 x (9 taps x 12), packed once per parameter version
  EXPECT_NE(source.find(name + "_scratch1 = _egg_kept(self, \"" + name +
                        "_scratch1\", (v_p_conv_weight, ), _make_" + name + "_scratch1)"),
            std::string::npos)
      << source;
  EXPECT_NE(source.find("    out = torch.empty((1728,), "), std::string::npos);
  EXPECT_NE(source.find(name + "_weight[(triton.cdiv(16, 16), triton.cdiv(108, 32))]("), std::string::npos);
  // the weight tile contiguous along K: (output channel, tap, channel) rows
  EXPECT_NE(source.find("b = tl.load(ptr1 + (kbindex + 108*nindex + 12*tap), kbmask & nmask, other=0.0)"),
            std::string::npos);
  EXPECT_NE(source.find("channels-last implicit GEMM"), std::string::npos);
  EXPECT_NE(source.find("tl.store(ptr1 + (pindex * 12 + cindex)"), std::string::npos);
  EXPECT_NE(source.find("for tap in range(9):"), std::string::npos);  // ieee FMA products: not unrolled
  EXPECT_NE(source.find("for k0 in range(0, 12, BLOCK_K):"), std::string::npos);
  EXPECT_NE(source.find("tl.load(ptr0 + (kaindex + tbase), tvalid & kamask, other=0.0)"), std::string::npos);
  EXPECT_EQ(Count(source, "tl.dot("), 1U);
  EXPECT_EQ(Count(source, "tl.store("), 3U);  // the two copies and the output with its fused epilogue
  // and back: the NCHW gather in the same tiles
  const auto back = StageMoves(graph, "stage1.algorithm", nhwc, "", 8);
  EXPECT_TRUE(std::any_of(back.begin(), back.end(), [&](const DesignMove& move) {
    return move.move == "algorithm " + name + " tiled" &&
           move.design.kernels.at(name).algorithm == Algorithm::kTiled;
  }));
  // seed 2 is channels-last from 16 channels a group: 12 would leave a K step of 16 a quarter padding
  EXPECT_EQ(DefaultDesign(kernel, 2, Precision::kTf32x3).algorithm, Algorithm::kTiled);
  KernelPlan wider = kernel;
  wider.matmul->conv->in_channels = 32;
  wider.matmul->k = 32 * 9;
  const KernelDesign seed2 = DefaultDesign(wider, 2, Precision::kTf32x3);
  EXPECT_EQ(seed2.algorithm, Algorithm::kNhwc);
  EXPECT_EQ(seed2.rblock, 32);  // the group's channels, under the seed's 64
  EXPECT_TRUE(DesignFits(wider, seed2));
  CandidateDesign unrolled = nhwc_move->design;
  unrolled.kernels[name].precision = Precision::kTf32x3;  // tensor-core products: the 3x3 taps unrolled
  const Candidate tf32x3 = GenerateCandidate(graph, "", "conv", unrolled);
  ASSERT_TRUE(tf32x3.source) << tf32x3.problem;
  EXPECT_NE(tf32x3.source->find("for tap in tl.static_range(9):"), std::string::npos);
  MatmulSpec pointwise = *kernel.matmul;  // a 1x1 convolution is a dense GEMM over NCHW already
  pointwise.conv->kernel = {1, 1};
  pointwise.conv->padding = {0, 0};
  EXPECT_FALSE(ChannelsLastConvolutionFits(pointwise));
  pointwise.conv->stride = {2, 2};  // strided: its rows gather
  EXPECT_TRUE(ChannelsLastConvolutionFits(pointwise));
  KernelDesign wide = design;
  wide.rblock = 32;  // wider than the group's channels: masked lanes only
  EXPECT_FALSE(DesignFits(nhwc.plan.kernels.at(0), wide));
}

TEST(ConvolutionPlanTest, EverySeedGeneratesAConvolutionOfAFivePieceConcatenation) {
  // level2_1 reading the concatenation of five [16, 4, 16, 16] inputs (a dense block's input): 20 channels,
  // so seeds 0 and 2 run it channels-last, whose input copy takes any number of pieces, and seed 1 the NCHW
  // gather, whose tiles take four. The plan is both seeds': the concatenation is not read inside the
  // convolution.
  Json ir = FixtureJson("level2_1_Conv2D_ReLU_BiasAdd");
  const Json piece_meta = {
      {"shape", {16, 4, 16, 16}}, {"stride", {1024, 256, 16, 1}}, {"offset", 0}, {"dtype", "float32"}};
  Json pieces = Json::array();
  ir["inputs"] = Json::array();
  for (int i = 0; i < 5; ++i) {
    const std::string name = "x" + std::to_string(i);
    ir["inputs"].push_back({{"name", name}, {"position", i}, {"kind", "tensor"}, {"meta", piece_meta}});
    pieces.push_back({{"node", name}});
  }
  const Json cat_meta = {
      {"shape", {16, 20, 16, 16}}, {"stride", {5120, 256, 16, 1}}, {"offset", 0}, {"dtype", "float32"}};
  const Json cat = {{"name", "cat"},
                    {"op", "aten.cat.default"},
                    {"args", {pieces, 1}},
                    {"kwargs", Json::object()},
                    {"meta", cat_meta}};
  ir["state"][1]["meta"] = {
      {"shape", {16, 20, 3, 3}}, {"stride", {180, 9, 3, 1}}, {"offset", 0}, {"dtype", "float32"}};
  ir["nodes"][0]["args"][0] = {{"node", "cat"}};
  ir["nodes"].insert(ir["nodes"].begin(), cat);
  const Graph graph = LoadGraph(ir);
  const Plan plan = MakePlan(graph, {});
  const auto conv = std::find_if(plan.kernels.begin(), plan.kernels.end(),
                                 [](const KernelPlan& kernel) { return kernel.kind == KernelKind::kMatmul; });
  ASSERT_NE(conv, plan.kernels.end());
  EXPECT_EQ(DefaultDesign(*conv, 0).algorithm, Algorithm::kNhwcK);
  EXPECT_EQ(DefaultDesign(*conv, 1).algorithm, Algorithm::kTiled);
  EXPECT_EQ(DefaultDesign(*conv, 2).algorithm, Algorithm::kNhwc);
  // seed 0 at tf32 and tf32x3 in 128-row tiles of 8 warps spanning the 16 output channels; ieee products in
  // the 64x64 tile's 4 warps
  for (Precision products : {Precision::kTf32, Precision::kTf32x3}) {
    const KernelDesign wide = DefaultDesign(*conv, 0, products);
    EXPECT_EQ(std::make_tuple(wide.algorithm, wide.xblock, wide.yblock, wide.rblock, wide.num_warps),
              std::make_tuple(Algorithm::kNhwcK, int64_t{128}, int64_t{16}, int64_t{32}, 8));
  }
  const KernelDesign ieee = DefaultDesign(*conv, 0, Precision::kIeee);
  EXPECT_EQ(std::make_tuple(ieee.algorithm, ieee.num_warps), std::make_tuple(Algorithm::kNhwcK, 4));
  EXPECT_EQ(plan.kernels.size(), 2U) << "the concatenation stored by a kernel of its own";
  for (int seed : {0, 1, 2}) {
    CandidateDesign design;
    design.seed = seed;
    const Candidate candidate = GenerateCandidate(graph, "", "cat_conv", design);
    EXPECT_TRUE(candidate.source) << "seed " << seed << ": " << candidate.problem;
  }
}

TEST(ConvolutionPlanTest, AMinimumOverTheChannelsIsFinishedInTheConvolutionsTile) {
  const Graph graph = Fixture("level2_25_Conv2d_Min_Tanh_Tanh");  // conv 16->8, min over dim 1, tanh, tanh
  const Plan plan = MakePlan(graph, {});
  ASSERT_EQ(plan.kernels.size(), 1U);
  const KernelPlan& kernel = plan.kernels[0];
  ASSERT_EQ(kernel.kind, KernelKind::kMatmul);
  ASSERT_EQ(kernel.reductions.size(), 1U);
  EXPECT_TRUE(ReducesColumns(graph, kernel, kernel.reductions[0]));
  EXPECT_EQ(kernel.roots.size(),
            3U);  // the convolution, the minimum, the last tanh (the first computed inline)
  EXPECT_FALSE(plan.products_reduced_apart);
  const KernelDesign design = DefaultDesign(kernel, 0);
  EXPECT_GE(design.yblock, kernel.matmul->n) << "one tile spans the channels";
  const Candidate candidate = GenerateCandidate(graph, "", "min", CandidateDesign{});
  ASSERT_TRUE(candidate.source) << candidate.problem;
  // the input's and the weight's channels-last copies, then the row value: neither the convolution nor the
  // minimum is stored
  EXPECT_EQ(Count(*candidate.source, "tl.store("), 3U) << *candidate.source;
  EXPECT_EQ(Count(*candidate.source, "_nhwc[("), 1U) << *candidate.source;
  EXPECT_EQ(Count(*candidate.source, "_egg_min(tl.where(mask, product, float('inf')), 1)[:, None]"), 1U);
  EXPECT_EQ(Count(*candidate.source, ", mmask)"), 1U) << "one value a row, stored under the rows' mask";

  PlanOptions apart;
  apart.reduce_in_products = false;
  const Plan two = MakePlan(graph, apart);
  ASSERT_EQ(two.kernels.size(), 2U);
  EXPECT_TRUE(two.kernels[0].reductions.empty());
  EXPECT_EQ(two.kernels[1].kind, KernelKind::kReduction);
  EXPECT_TRUE(two.products_reduced_apart);

  // grouped, the channels are separate products: the reduction keeps a kernel of its own
  KernelPlan grouped = kernel;
  grouped.matmul->conv->groups = 2;
  EXPECT_FALSE(ReducesColumns(graph, grouped, kernel.reductions[0]));
  ReductionSpec over_rows = kernel.reductions[0];
  over_rows.dims = {0};
  EXPECT_FALSE(ReducesColumns(graph, kernel, over_rows));
  ReductionSpec other = kernel.reductions[0];
  for (const ReductionKind kind : {ReductionKind::kVar, ReductionKind::kStd, ReductionKind::kVarMean}) {
    other.kind = kind;
    EXPECT_TRUE(ReducesColumns(graph, kernel, other)) << NameOf(kind);  // two passes over the tile
  }
  for (const ReductionKind kind : {ReductionKind::kProd, ReductionKind::kArgmin, ReductionKind::kAny}) {
    other.kind = kind;
    EXPECT_FALSE(ReducesColumns(graph, kernel, other)) << NameOf(kind);
  }
}

}  // namespace
}  // namespace egg::expert
