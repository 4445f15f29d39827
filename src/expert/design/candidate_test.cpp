// A candidate's report: each kernel's name, kind, ops, design and fusion reasons, the ops left to PyTorch,
// the planner's notes and the complete design record, as the search and `egg compile` read them.
#include "expert/design/candidate.h"

#include <gtest/gtest.h>

#include "expert/codegen/candidate_file.h"
#include "expert/ir/test_graphs.h"

namespace egg::expert {
namespace {

TEST(CandidateReportTest, ReportListsEachKernelWithItsDesignAndReasons) {
  Candidate candidate;
  KernelReport kernel;
  kernel.name = "k0_softmax";
  kernel.kind = "reduction";
  kernel.ops = {"aten.amax.default", "aten.exp.default"};
  kernel.design.algorithm = Algorithm::kOnline;
  kernel.design.xblock = 1;
  kernel.design.rblock = 1024;
  kernel.design.num_warps = 8;
  kernel.reasons = {"same rows", "epilogue"};
  candidate.kernels.push_back(kernel);
  candidate.pytorch_ops = {"aten.convolution.default"};
  candidate.plan.notes = {"a note"};
  candidate.design.seed = 2;
  candidate.design.kernels["k0_softmax"] = kernel.design;

  const Json report = candidate.ReportJson();
  ASSERT_EQ(report["kernels"].size(), 1U);
  const Json& entry = report["kernels"][0];
  EXPECT_EQ(entry["name"], "k0_softmax");
  EXPECT_EQ(entry["kind"], "reduction");
  EXPECT_EQ(entry["ops"], (Json::array({"aten.amax.default", "aten.exp.default"})));
  EXPECT_EQ(entry["design"]["algorithm"], "online");
  EXPECT_EQ(entry["design"]["rblock"], 1024);
  EXPECT_EQ(entry["design"]["num_warps"], 8);
  EXPECT_EQ(KernelDesign::FromJson(entry["design"]), kernel.design) << "the design round-trips";
  EXPECT_EQ(entry["fusion"], (Json::array({"same rows", "epilogue"}))) << "reasons are reported as fusion";
  EXPECT_EQ(report["pytorch_ops"], Json::array({"aten.convolution.default"}));
  EXPECT_EQ(report["planner_notes"], Json::array({"a note"}));
  EXPECT_EQ(report["design"]["seed"], 2);
  EXPECT_EQ(CandidateDesign::FromJson(report["design"]).kernels.at("k0_softmax"), kernel.design);
}

TEST(CandidateReportTest, AnEmptyCandidateStillReportsEveryField) {
  const Json report = Candidate{}.ReportJson();
  for (const char* key : {"kernels", "pytorch_ops", "planner_notes"}) {
    ASSERT_TRUE(report.contains(key)) << key;
    EXPECT_TRUE(report[key].is_array()) << key;
    EXPECT_TRUE(report[key].empty()) << key;
  }
  ASSERT_TRUE(report.contains("design"));
  EXPECT_EQ(report["design"]["seed"], 0);
}

TEST(CandidateReportTest, AGeneratedCandidatesReportFollowsItsPlan) {
  const Graph graph = testing::Fixture("level2_12_Gemm_Multiply_LeakyReLU");
  const Candidate candidate = GenerateCandidate(graph, "", "gemm", CandidateDesign{});
  ASSERT_TRUE(candidate.source) << candidate.problem;
  const Json report = candidate.ReportJson();
  ASSERT_EQ(report["kernels"].size(), candidate.plan.kernels.size());
  for (size_t k = 0; k < candidate.plan.kernels.size(); ++k) {
    const KernelPlan& kernel = candidate.plan.kernels[k];
    const Json& entry = report["kernels"][k];
    EXPECT_EQ(entry["name"], kernel.name);
    EXPECT_EQ(entry["kind"], KernelKindName(kernel.kind));
    EXPECT_FALSE(entry["ops"].empty()) << kernel.name;
    ASSERT_TRUE(report["design"]["kernels"].contains(kernel.name)) << "the record is complete";
    EXPECT_EQ(report["design"]["kernels"][kernel.name], entry["design"]) << kernel.name;
  }
  EXPECT_TRUE(report["pytorch_ops"].empty());
}

}  // namespace
}  // namespace egg::expert
