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

}  // namespace
}  // namespace egg::expert
