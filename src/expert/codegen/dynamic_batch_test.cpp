// Dynamic batch: the candidate file written at the sample batches merges into one file in which every literal
// linear in the batch is an expression of egg_B (a parameter and launch argument of the kernels that hold
// one, a hint value in egg_precompile), and any other difference between the samples is refused with a
// reason.
#include "expert/codegen/dynamic_batch.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

namespace egg::expert {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr int64_t kMax = 8;

// The source `write` gives at each of SamplePoints({kMax}).
std::vector<BatchSample> Samples(const std::function<std::string(int64_t)>& write) {
  std::vector<BatchSample> samples;
  for (const std::vector<int64_t>& point : SamplePoints({kMax})) {
    samples.push_back({point, write(point[0])});
  }
  return samples;
}

std::string Merged(const std::function<std::string(int64_t)>& write) {
  const MergedSource merged = MergeBatchSamples(Samples(write), {kMax});
  EXPECT_TRUE(merged.source.has_value()) << merged.problem;
  EXPECT_EQ(merged.problem, "");
  return merged.source.value_or("");
}

std::string Problem(const std::function<std::string(int64_t)>& write) {
  const MergedSource merged = MergeBatchSamples(Samples(write), {kMax});
  EXPECT_FALSE(merged.source.has_value()) << *merged.source;
  return merged.problem;
}

std::string N(int64_t value) { return std::to_string(value); }

// A candidate-like file: one pointwise kernel over 6*B elements, launched in forward and warmed up in
// egg_precompile, with a guard and a comment that name sizes of the batch.
std::string Candidate(int64_t b) {
  return "# egg-design: x [" + N(b) +
         ", 6]\n"
         "import torch\n"
         "import triton\n"
         "import triton.language as tl\n"
         "\n"
         "\n"
         "@triton.jit\n"
         "def egg_k0(in_ptr0, out_ptr0, XBLOCK: tl.constexpr):\n"
         "    xindex = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)\n"
         "    xmask = xindex < " +
         N(6 * b) +
         "\n"
         "    tmp0 = tl.load(in_ptr0 + xindex, xmask)\n"
         "    tl.store(out_ptr0 + xindex, tmp0 * 0.125, xmask)\n"
         "\n"
         "\n"
         "def egg_precompile():\n"
         "    egg_k0.warmup(torch.float32, torch.float32, XBLOCK=64, grid=(" +
         N(6 * b) +
         ",))\n"
         "\n"
         "\n"
         "def _egg_specialized(egg_B, x):\n"
         "    return x.shape == (" +
         N(b) +
         ", 6) and x.stride() == (6, 1)\n"
         "\n"
         "\n"
         "class ModelNew(torch.nn.Module):\n"
         "    def forward(self, x):\n"
         "        out = torch.empty((" +
         N(b) +
         ", 6), device=x.device)\n"
         "        egg_k0[(triton.cdiv(" +
         N(6 * b) +
         ", 64),)](x, out, XBLOCK=64)\n"
         "        return out\n";
}

TEST(DynamicBatchTest, SamplePointsAreTheTopItsNeighboursAndOneFarAbove) {
  using Points = std::vector<std::vector<int64_t>>;
  EXPECT_EQ(SamplePoints({8}), (Points{{8}, {9}, {10}, {11}, {1032}}));
  EXPECT_EQ(SamplePoints({1}), (Points{{1}, {2}, {3}, {4}, {1025}}));
}

TEST(DynamicBatchTest, KernelLiteralsBecomeExpressionsOfAnEggBParameter) {
  const std::string merged = Merged(Candidate);
  EXPECT_EQ(merged,
            "# egg-design: x [egg_B, 6]\n"
            "import torch\n"
            "import triton\n"
            "import triton.language as tl\n"
            "\n"
            "\n"
            "@triton.jit\n"
            "def egg_k0(egg_B, in_ptr0, out_ptr0, XBLOCK: tl.constexpr):\n"
            "    xindex = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)\n"
            "    xmask = xindex < (egg_B * 6)\n"
            "    tmp0 = tl.load(in_ptr0 + xindex, xmask)\n"
            "    tl.store(out_ptr0 + xindex, tmp0 * 0.125, xmask)\n"
            "\n"
            "\n"
            "def egg_precompile():\n"
            "    egg_k0.warmup(8, torch.float32, torch.float32, XBLOCK=64, grid=(48,))\n"
            "\n"
            "\n"
            "def _egg_specialized(egg_B, x):\n"
            "    return x.shape == (egg_B, 6) and x.stride() == (6, 1)\n"
            "\n"
            "\n"
            "class ModelNew(torch.nn.Module):\n"
            "    def forward(self, x):\n"
            "        out = torch.empty((egg_B, 6), device=x.device)\n"
            "        egg_k0[(triton.cdiv((egg_B * 6), 64),)](egg_B, x, out, XBLOCK=64)\n"
            "        return out\n");
}

TEST(DynamicBatchTest, PythonLiteralsBecomeExpressionsWithNoInsertion) {
  auto write = [](int64_t b) {
    return "def _egg_specialized(egg_B, x):\n"
           "    return x.shape == (" +
           N(b) + ", " + N(b + 2) + ") and x.numel() == " + N(3 * b - 1) +
           "\n"
           "\n"
           "\n"
           "class ModelNew(torch.nn.Module):\n"
           "    def forward(self, x):\n"
           "        return x.view(" +
           N(b) + ", -1)[:" + N(2 * b + 5) +
           "]\n"
           "\n"
           "    def _egg_forward(self, egg_B, x):\n"
           "        return torch.empty(" +
           N(4 * b) + ")\n";
  };
  EXPECT_EQ(Merged(write),
            "def _egg_specialized(egg_B, x):\n"
            "    return x.shape == (egg_B, (egg_B + 2)) and x.numel() == (egg_B * 3 - 1)\n"
            "\n"
            "\n"
            "class ModelNew(torch.nn.Module):\n"
            "    def forward(self, x):\n"
            "        return x.view(egg_B, -1)[:(egg_B * 2 + 5)]\n"
            "\n"
            "    def _egg_forward(self, egg_B, x):\n"
            "        return torch.empty((egg_B * 4))\n");
}

TEST(DynamicBatchTest, ASizeOfTheSquareBecomesAQuadraticExpression) {
  // An attention's scores over a dynamic sequence S: [2, S, S] elements, S*S a head, 5*S*S - 3*S + 7 a mix.
  auto write = [](int64_t s) {
    return "def _egg_specialized(egg_B, x):\n"
           "    return x.shape == (2, " +
           N(s) + ", " + N(s) + ") and x.stride() == (" + N(s * s) + ", " + N(s) +
           ", 1) and x.numel() == " + N(2 * s * s) + " and " + N(5 * s * s - 3 * s + 7) + " > 0\n";
  };
  EXPECT_EQ(Merged(write),
            "def _egg_specialized(egg_B, x):\n"
            "    return x.shape == (2, egg_B, egg_B) and x.stride() == ((egg_B * egg_B), egg_B, 1) and "
            "x.numel() == (egg_B * egg_B * 2) and (egg_B * egg_B * 5 - egg_B * 3 + 7) > 0\n");
}

TEST(DynamicBatchTest, CommentLiteralsBecomeExpressionsAnywhere) {
  // A comment at module level or in a helper names the batch too; only code there is refused.
  auto write = [](int64_t b) {
    return "# x [" + N(b) + ", 40]: " + N(b * 40) +
           " elements\n"
           "def helper():\n"
           "    return 1  # rows " +
           N(b) + "\n";
  };
  EXPECT_EQ(Merged(write),
            "# x [egg_B, 40]: (egg_B * 40) elements\n"
            "def helper():\n"
            "    return 1  # rows egg_B\n");
}

TEST(DynamicBatchTest, IdenticalSamplesMergeToTheSameText) {
  const std::string source = Candidate(4);
  EXPECT_EQ(Merged([&](int64_t) { return source; }), source);
}

TEST(DynamicBatchTest, ASizeThatIsNotLinearIsRefused) {
  // cdiv(6*B, 64): 1, 1, 1, 2, 97.
  auto grid = [](int64_t b) {
    return "class ModelNew(torch.nn.Module):\n"
           "    def forward(self, x):\n"
           "        egg_k0[(" +
           N((6 * b + 63) / 64) + ",)](x)\n";
  };
  const std::string problem = Problem(grid);
  EXPECT_THAT(problem, HasSubstr("neither linear nor quadratic"));
  EXPECT_EQ(problem,
            "a size is neither linear nor quadratic in the batch (1 at batch 8, 2 at batch 11) (line 3: "
            "egg_k0[(1,)](x))");
  // 130*B // 128 is B at 8..11 and tells itself apart only at the far sample.
  auto floor = [](int64_t b) { return "def forward(self, x):\n    return x[:" + N(130 * b / 128) + "]\n"; };
  EXPECT_EQ(Problem(floor),
            "a size is neither linear nor quadratic in the batch (8 at batch 8, 1048 at batch 1032) (line 2: "
            "return x[:8])");
  // B*B // 8 (8, 10, 12, 15, 133128) is not a quadratic with integer coefficients at 8..10 and 11
  auto squared_floor = [](int64_t b) {
    return "def forward(self, x):\n    return x[:" + N(b * b / 8) + "]\n";
  };
  EXPECT_THAT(Problem(squared_floor), HasSubstr("neither linear nor quadratic"));
}

TEST(DynamicBatchTest, AChangeOfFormIsRefused) {
  auto extra = [](int64_t b) {
    return "def forward(self, x):\n    return x" + std::string(b == 10 ? ".relu()" : "") + "\n";
  };
  EXPECT_EQ(
      Problem(extra),
      "the generated code changes form between batch 8 and 10 (`return x` at 8, `return x.relu()` at 10)");
  auto other = [](int64_t b) {
    return "def forward(self, x):\n    return x." + std::string(b == 1032 ? "relu" : "sigmoid") + "()\n";
  };
  EXPECT_EQ(
      Problem(other),
      "the generated code changes form with the batch: `sigmoid` at batch 8 (line 2: return x.sigmoid())");
  auto number_to_name = [](int64_t b) {
    return "def forward(self, x):\n    return x[:" + (b == 11 ? std::string("n") : N(b)) + "]\n";
  };
  EXPECT_THAT(Problem(number_to_name), StartsWith("the generated code changes form with the batch (line 2"));
}

TEST(DynamicBatchTest, ABatchDependentLiteralOutsideTheBatchScopesIsRefused) {
  auto helper = [](int64_t b) {
    return "def helper(x):\n"
           "    return x.view(" +
           N(b) +
           ", -1)\n"
           "\n"
           "\n"
           "class ModelNew(torch.nn.Module):\n"
           "    def forward(self, x):\n"
           "        return helper(x)\n";
  };
  EXPECT_EQ(Problem(helper),
            "a size depends on the batch in helper, which has no batch (line 2: return x.view(8, -1))");
  auto module_level = [](int64_t b) { return "import torch\nROWS = " + N(b) + "\n"; };
  EXPECT_EQ(Problem(module_level),
            "a size depends on the batch in module-level code, which has no batch (line 2: ROWS = 8)");
  // A method of ModelNew other than forward has no egg_B either.
  auto method = [](int64_t b) {
    return "class ModelNew(torch.nn.Module):\n"
           "    def extra_repr(self):\n"
           "        return '" +
           std::string("rows") + "' + str(" + N(b) + ")\n";
  };
  EXPECT_THAT(Problem(method), HasSubstr("a size depends on the batch in extra_repr, which has no batch"));
  auto unlaunched = [](int64_t b) {
    return "@triton.jit\n"
           "def egg_k1(in_ptr0, XBLOCK: tl.constexpr):\n"
           "    xmask = tl.arange(0, XBLOCK) < " +
           N(2 * b) +
           "\n"
           "\n"
           "\n"
           "def forward(self, x):\n"
           "    return egg_k1(x)\n";
  };
  EXPECT_THAT(Problem(unlaunched), StartsWith("egg_k1 depends on the batch but is not a launched kernel"));
}

TEST(DynamicBatchTest, TokensAreNumbersIdentifiersAndStringsWhole) {
  // A float literal that differs is a change of form, whole: 1e-05 and 0.125 are one token each.
  auto eps = [](int64_t b) {
    return "def forward(self, x):\n    return x + " + std::string(b == 9 ? "1e-06" : "1e-05") + "\n";
  };
  EXPECT_THAT(Problem(eps), StartsWith("the generated code changes form with the batch: `1e-05` at batch 8"));
  auto fraction = [](int64_t b) { return "def forward(self, x):\n    return x * 0." + N(b * 125) + "\n"; };
  EXPECT_THAT(Problem(fraction),
              StartsWith("the generated code changes form with the batch: `0.1000` at batch 8"));
  // Equal floats merge untouched, as do their neighbours.
  auto constants = [](int64_t b) {
    return "def forward(self, x):\n    return x * 0.125 + 1e-05 - 2.5e+3 + 0x1f + " + N(b) + "\n";
  };
  EXPECT_EQ(Merged(constants),
            "def forward(self, x):\n    return x * 0.125 + 1e-05 - 2.5e+3 + 0x1f + egg_B\n");
  // In a comment's "48x40" both sizes are numbers, whichever of them changes; in code x40 stays a name.
  auto shape = [](int64_t b) { return "# a " + N(6 * b) + "x40 tile, [40x" + N(b) + "]\nx40 = 1\n"; };
  EXPECT_EQ(Merged(shape), "# a (egg_B * 6)x40 tile, [40xegg_B]\nx40 = 1\n");
  // A string is compared whole: digits in it never become an expression.
  auto string = [](int64_t b) { return "def forward(self, x):\n    return 'rows " + N(b) + "'\n"; };
  EXPECT_EQ(
      Problem(string),
      "the generated code changes form with the batch: `'rows 8'` at batch 8 (line 2: return 'rows 8')");
  auto same_string = [](int64_t b) {
    return "def forward(self, x):\n    return \"48 # 'x'\", x[:" + N(b) + "]\n";
  };
  EXPECT_EQ(Merged(same_string), "def forward(self, x):\n    return \"48 # 'x'\", x[:egg_B]\n");
}

TEST(DynamicBatchTest, TooFewSamplesOrASizeReachingTwoToThe31AreRefused) {
  std::vector<BatchSample> two = {{{8}, "x = 8\n"}, {{9}, "x = 9\n"}};
  EXPECT_EQ(MergeBatchSamples(two, {8}).problem, "a dynamic batch needs three samples or more");
  auto huge = [](int64_t b) { return "def forward(self, x):\n    return x[:" + N(300000000 * b) + "]\n"; };
  EXPECT_THAT(Problem(huge), StartsWith("a size reaches 2^31 at batch 8"));
}

// Two dynamic sizes B (dim 0) and S (dim 1): a [B, S, 32] input's numel, its strides, the rows of a
// [B*S, 32] product, an attention's B*S*S scores and a size of S alone.
TEST(DynamicBatchTest, SeveralSizesMergeIntoPolynomialsOfEach) {
  const std::vector<int64_t> tops = {4, 12};
  const auto write = [](int64_t b, int64_t s) {
    return "@triton.jit\n"
           "def egg_k0(x, XBLOCK: tl.constexpr):\n"
           "    xmask = xindex < " +
           N(b * s * 32) + "\n    tmp = tl.load(x + " + N(s * 32) + " * (xindex // " + N(s * 32) +
           "))\n"
           "\n"
           "\n"
           "def egg_precompile():\n"
           "    egg_k0.warmup(torch.float32, XBLOCK=64, grid=(1,))\n"
           "\n"
           "\n"
           "class ModelNew(torch.nn.Module):\n"
           "    def _egg_forward(self, egg_B, egg_C, x):\n"
           "        scores = torch.empty(" +
           N(b * s * s) + ")\n        rows = " + N(b * s - 1) + " + " + N(s) +
           "\n"
           "        egg_k0[(" +
           N(b * s * 32) + ",)](x, XBLOCK=64)\n";
  };
  std::vector<BatchSample> samples;
  for (const std::vector<int64_t>& point : SamplePoints(tops)) {
    samples.push_back({point, write(point[0], point[1])});
  }
  EXPECT_EQ(samples.size(), 15U) << "a 3x3 grid at the tops, 3 and 1024 steps along each size, 2 of the pair";
  const MergedSource merged = MergeBatchSamples(samples, tops);
  ASSERT_TRUE(merged.source.has_value()) << merged.problem;
  EXPECT_EQ(*merged.source,
            "@triton.jit\n"
            "def egg_k0(egg_B, egg_C, x, XBLOCK: tl.constexpr):\n"
            "    xmask = xindex < (egg_B * egg_C * 32)\n"
            "    tmp = tl.load(x + (egg_C * 32) * (xindex // (egg_C * 32)))\n"
            "\n"
            "\n"
            "def egg_precompile():\n"
            "    egg_k0.warmup(4, 12, torch.float32, XBLOCK=64, grid=(1,))\n"
            "\n"
            "\n"
            "class ModelNew(torch.nn.Module):\n"
            "    def _egg_forward(self, egg_B, egg_C, x):\n"
            "        scores = torch.empty((egg_B * egg_C * egg_C))\n"
            "        rows = (egg_B * egg_C - 1) + egg_C\n"
            "        egg_k0[((egg_B * egg_C * 32),)](egg_B, egg_C, x, XBLOCK=64)\n");
  // S*S*S is of degree 3 in S: no polynomial of degree 2 in each size fits it at every sample
  const auto cubic = [](int64_t b, int64_t s) {
    return "def forward(self, x):\n    return x[:" + N(b + s * s * s) + "]\n";
  };
  std::vector<BatchSample> cubic_samples;
  for (const std::vector<int64_t>& point : SamplePoints(tops)) {
    cubic_samples.push_back({point, cubic(point[0], point[1])});
  }
  EXPECT_THAT(
      MergeBatchSamples(cubic_samples, tops).problem,
      StartsWith("a size is neither linear nor quadratic in the dynamic sizes (1732 at sizes 4x12, "));
}

}  // namespace
}  // namespace egg::expert
