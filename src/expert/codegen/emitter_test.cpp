// The emitter's dtype handling: half tensors are storage types (loads upcast to float32, no half constant,
// stores cast back), float32 ones are loaded as they are.
#include "expert/codegen/emitter.h"

#include <gtest/gtest.h>

#include <sstream>

#include "expert/codegen/candidate_file.h"
#include "expert/design/candidate.h"
#include "expert/ir/test_graphs.h"

namespace egg::expert {
namespace {

using testing::Count;
using testing::FixtureJson;
using testing::LoadGraph;
using testing::Retyped;

std::string Kernels(const Graph& graph) {
  const Candidate candidate = GenerateCandidate(graph, "", "task.py", CandidateDesign{});
  EXPECT_TRUE(candidate.source) << candidate.problem;
  const std::string& source = candidate.source ? *candidate.source : std::string();
  const size_t start = source.find("# ---- Triton kernels ----");
  const size_t end = source.find("def egg_precompile");
  return start == std::string::npos || end == std::string::npos ? "" : source.substr(start, end - start);
}

std::vector<std::string> LinesWith(const std::string& text, const std::string& word) {
  std::vector<std::string> lines;
  std::istringstream stream(text);
  for (std::string line; std::getline(stream, line);) {
    if (line.find(word) != std::string::npos) {
      lines.push_back(line);
    }
  }
  return lines;
}

TEST(EmitterDTypeTest, HalfLoadsAreUpcastAndMaskedAfterTheUpcast) {
  for (const char* half : {"bfloat16", "float16"}) {
    const std::string code = Kernels(LoadGraph(Retyped(FixtureJson("level1_23_Softmax"), "float32", half)));
    const auto loads = LinesWith(code, "tl.load(");
    ASSERT_FALSE(loads.empty()) << half;
    for (const std::string& line : loads) {
      EXPECT_NE(line.find(".to(tl.float32)"), std::string::npos) << half << ": " << line;
      EXPECT_EQ(line.find("other="), std::string::npos) << half << ": no half constant: " << line;
    }
    EXPECT_GT(Count(code, "tl.where(mask, tl.load("), 0U) << "masked lanes zeroed after the upcast";
    const std::string triton_type = std::string("tl.") + half;
    for (const std::string& line : LinesWith(code, "tl.store(")) {
      EXPECT_NE(line.find(".to(" + triton_type + ")"), std::string::npos) << half << ": " << line;
    }
    for (const char* word : {"tl.full(", "tl.zeros("}) {
      for (const std::string& line : LinesWith(code, word)) {
        EXPECT_EQ(line.find(triton_type), std::string::npos) << "accumulators in float32: " << line;
      }
    }
  }
}

TEST(EmitterDTypeTest, Float32LoadsKeepTheirOther) {
  const std::string code = Kernels(LoadGraph(FixtureJson("level1_23_Softmax")));
  for (const std::string& line : LinesWith(code, "tl.load(")) {
    EXPECT_NE(line.find("other=0.0"), std::string::npos) << line;
    EXPECT_EQ(line.find(".to(tl.float32)"), std::string::npos) << line;
  }
}

TEST(EmitterDTypeTest, HalfReductionsAccumulateInFloat32) {
  const Graph graph = LoadGraph(Retyped(FixtureJson("level1_40_LayerNorm"), "float32", "bfloat16"));
  const std::string code = Kernels(graph);
  EXPECT_EQ(Count(code, "tl.bfloat16)"), Count(code, "tl.store(")) << "only stores name the half type:\n"
                                                                   << code;
  EXPECT_EQ(GraphPrecision(graph), "bf16");
}

}  // namespace
}  // namespace egg::expert
