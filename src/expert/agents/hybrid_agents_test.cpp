#include "expert/agents/hybrid_agents.h"

#include <gtest/gtest.h>

#include <mutex>

#include "expert/codegen/candidate_file.h"
#include "expert/design/design_space.h"
#include "expert/ir/test_graphs.h"

namespace egg::expert {
namespace {

constexpr const char* kLlmRepair =
    "```json\n{\"diagnosis\": \"rewrote it\"}\n```\n```python\nclass ModelNew: pass\n```\n";

// An LLM that answers every request with one reply and counts the requests.
class ScriptedLlm : public llm::LlmClient {
 public:
  llm::ChatResult Complete(const llm::ChatRequest&) override {
    std::lock_guard lock(mutex_);
    ++calls_;
    llm::ChatResult result;
    result.text = kLlmRepair;
    result.attempts = 1;
    return result;
  }
  llm::Usage Spent() const override { return {}; }
  int64_t Calls() const override {
    std::lock_guard lock(mutex_);
    return calls_;
  }

 private:
  mutable std::mutex mutex_;
  int64_t calls_ = 0;
};

agents::StageContext Context(const std::string& stage, const std::string& source,
                             std::optional<agents::Design> design) {
  agents::StageContext context;
  context.stage = stage;
  context.incumbent_source = source;
  context.incumbent_design = std::move(design);
  return context;
}

class HybridAgentsTest : public ::testing::Test {
 protected:
  HybridAgentsTest()
      : graph_(testing::LoadGraph(testing::Scaled(testing::FixtureJson("level1_23_Softmax"), 64, 65536))),
        backend_(MakeHybridBackend({&graph_, "", "softmax.py"}, llm_, nullptr, {})),
        seed_(GenerateCandidate(graph_, "", "softmax.py", SeedDesign(0, 1e-2).design)) {}

  Graph graph_;
  ScriptedLlm llm_;
  agents::Backend backend_;
  Candidate seed_;
};

TEST_F(HybridAgentsTest, DebugGivesTheCompilersFilesToTheExpertAndOthersToTheLlm) {
  ASSERT_TRUE(seed_.source);
  auto expert =
      backend_.debug->Repair(Context("stage2.tiling", *seed_.source, DesignMessage(seed_.design)),
                             {*seed_.source, DesignMessage(seed_.design), "mismatch", "not allclose"}, 0);
  ASSERT_TRUE(expert.value) << expert.failure;
  EXPECT_EQ(expert.value->author, agents::kAuthorExpert);
  EXPECT_TRUE(expert.value->design);
  EXPECT_EQ(llm_.Calls(), 0);
  // The compiler's file as an LLM edit of it would come, its comment line kept but no record: the LLM's.
  auto llm = backend_.debug->Repair(Context("stage2.tiling", *seed_.source, std::nullopt),
                                    {*seed_.source, std::nullopt, "mismatch", "not allclose"}, 0);
  ASSERT_TRUE(llm.value) << llm.failure;
  EXPECT_EQ(llm_.Calls(), 1);
  EXPECT_EQ(llm.value->source, "class ModelNew: pass\n");
  EXPECT_FALSE(llm.value->design);
}

TEST_F(HybridAgentsTest, AfterAnLlmSourceEditTheExpertMovesFromTheLastDesignRecord) {
  ASSERT_TRUE(seed_.source);
  // No incumbent with a record yet: nothing to move from.
  EXPECT_TRUE(
      backend_.code->ProposeSpace(Context("stage2.tiling", *seed_.source, std::nullopt), nullptr).empty());
  const auto from_seed = backend_.code->ProposeSpace(
      Context("stage2.tiling", *seed_.source, DesignMessage(seed_.design)), nullptr);
  ASSERT_FALSE(from_seed.empty());
  // An accepted LLM edit (no record): the expert's space is the one around the design it replaced.
  const auto after_edit =
      backend_.code->ProposeSpace(Context("stage2.tiling", "class ModelNew: pass", std::nullopt), nullptr);
  ASSERT_EQ(after_edit.size(), from_seed.size());
  for (size_t i = 0; i < after_edit.size(); ++i) {
    EXPECT_EQ(after_edit[i].source, from_seed[i].source);
    EXPECT_EQ(after_edit[i].design, from_seed[i].design);
  }
}

}  // namespace
}  // namespace egg::expert
