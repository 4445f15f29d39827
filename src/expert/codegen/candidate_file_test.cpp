// Candidate files: the module a design generates (ModelNew, its guard, its precompile step and the design
// record it shows), seeds as different algorithms, and invalid kernel designs replaced by the defaults.
#include "expert/codegen/candidate_file.h"

#include <gtest/gtest.h>

#include "expert/design/candidate.h"
#include "expert/design/defaults.h"
#include "expert/design/legality.h"
#include "expert/ir/test_graphs.h"
#include "expert/plan/plan.h"

namespace egg::expert {
namespace {

using testing::Count;
using testing::Fixture;
using testing::FixtureJson;
using testing::LoadGraph;
using testing::Scaled;

TEST(CandidateTest, SourceDefinesModelNewAndCarriesItsDesign) {
  const Graph graph = Fixture("level1_23_Softmax");
  CandidateDesign design;
  design.seed = 1;
  const Candidate candidate = GenerateCandidate(graph, "class Model: pass\n", "23_Softmax.py", design);
  ASSERT_TRUE(candidate.source) << candidate.problem;
  const std::string& source = *candidate.source;
  EXPECT_NE(source.find("class ModelNew(Model):"), std::string::npos);
  EXPECT_NE(source.find("def egg_precompile():"), std::string::npos);
  EXPECT_NE(source.find("return super().forward(x)"), std::string::npos);  // the shape guard's fallback
  EXPECT_EQ(Count(source, "@triton.jit\ndef egg_k"), 1U);
  // The file shows its design record to people; the same record regenerates the same file.
  EXPECT_NE(source.find(kDesignMarker + candidate.design.ToJson().dump() + "\n"), std::string::npos);
  EXPECT_EQ(*GenerateCandidate(graph, "class Model: pass\n", "23_Softmax.py", candidate.design).source,
            source);
}

TEST(CandidateTest, SeedsAreDifferentAlgorithms) {
  const Graph graph = LoadGraph(Scaled(FixtureJson("level1_23_Softmax"), 64, 65536));
  std::vector<Algorithm> algorithms;
  for (int seed = 0; seed < 3; ++seed) {
    CandidateDesign design;
    design.seed = seed;
    const Candidate candidate = GenerateCandidate(graph, "", "softmax", design);
    ASSERT_TRUE(candidate.source) << candidate.problem;
    algorithms.push_back(candidate.design.kernels.begin()->second.algorithm);
  }
  EXPECT_EQ(algorithms[0], Algorithm::kOnline);  // one pass: running max with a rescaled sum
  EXPECT_EQ(algorithms[1], Algorithm::kLooped);  // two passes over the row
}

TEST(CandidateTest, InvalidKernelDesignsFallBackToDefaults) {
  const Graph graph = Fixture("level1_23_Softmax");
  const Plan plan = MakePlan(graph, {});
  KernelDesign bad = DefaultDesign(plan.kernels[0], 0);
  bad.xblock = 3;  // not a power of two
  EXPECT_FALSE(DesignFits(plan.kernels[0], bad));
  bad = DefaultDesign(plan.kernels[0], 0);
  bad.algorithm = Algorithm::kPersistent;
  bad.rblock = 16;  // a persistent tile must cover the row
  EXPECT_FALSE(DesignFits(plan.kernels[0], bad));
  CandidateDesign design;
  design.kernels[plan.kernels[0].name] = bad;
  const Candidate candidate = GenerateCandidate(graph, "", "softmax", design);
  ASSERT_TRUE(candidate.source);
  EXPECT_TRUE(DesignFits(plan.kernels[0], candidate.design.kernels.at(plan.kernels[0].name)));
}

// Half products: tl.dot takes the half operands (bf16 through EGG_BF16_DOT, float32 only under the
// interpreter), accumulates in float32; the record says the precision. A type no kernel lowers stays in
// PyTorch with a note.
TEST(CandidateTest, HalfProductsGoToTheTensorCoresInTheirType) {
  const Json bmm = FixtureJson("level1_3_Batched_matrix_multiplication");
  const Candidate bf16 =
      GenerateCandidate(LoadGraph(testing::Retyped(bmm, "float32", "bfloat16")), "", "bmm", {});
  ASSERT_TRUE(bf16.source) << bf16.problem;
  EXPECT_TRUE(bf16.pytorch_ops.empty());
  const std::string& code = *bf16.source;
  EXPECT_EQ(
      Count(code, "EGG_BF16_DOT: tl.constexpr = tl.constexpr(tl.float32 if EGG_INTERPRET else tl.bfloat16)"),
      1U);
  EXPECT_EQ(Count(code, "tl.dot(a.to(EGG_BF16_DOT), b.to(EGG_BF16_DOT)"), 1U);
  EXPECT_EQ(Count(code, "acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)"), 1U);
  EXPECT_EQ(bf16.design.dtype, "bf16");
  EXPECT_EQ(bf16.design.ToJson()["dtype"], "bf16");
  const Candidate fp16 =
      GenerateCandidate(LoadGraph(testing::Retyped(bmm, "float32", "float16")), "", "bmm", {});
  ASSERT_TRUE(fp16.source) << fp16.problem;
  EXPECT_EQ(Count(*fp16.source, "tl.dot(a.to(tl.float16), b.to(tl.float16)"), 1U);
  EXPECT_EQ(Count(*fp16.source, "EGG_BF16_DOT"), 0U);
  const Candidate fp32 = GenerateCandidate(LoadGraph(bmm), "", "bmm", {});
  ASSERT_TRUE(fp32.source);
  EXPECT_EQ(Count(*fp32.source, "tl.dot(a, b,"), 1U) << "float32 operands go to tl.dot as they are";
  EXPECT_FALSE(fp32.design.ToJson().contains("dtype"));
}

}  // namespace
}  // namespace egg::expert
