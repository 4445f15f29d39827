#include "pipeline/proposals.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>

namespace egg::pipeline {
namespace {

// Proposes "c<index>"; earlier indices answer later, so replies arrive out of order.
class SlowCode : public agents::CodeAgent {
 public:
  agents::AgentResult<agents::CodeProposal> Propose(const agents::StageContext& context,
                                                    const agents::ProfileReport*, int index,
                                                    int count) override {
    max_in_flight = std::max(max_in_flight.load(), ++in_flight);
    std::this_thread::sleep_for(std::chrono::milliseconds(10 * (count - index)));
    --in_flight;
    return {agents::CodeProposal{"c" + std::to_string(index) + " " + context.stage, "", ""}, "",
            agents::StopReason::kNone};
  }
  std::atomic<int> in_flight{0};
  std::atomic<int> max_in_flight{0};
};

TEST(ProposalsTest, AskedAtOnceUpToTheLimitAndHandedOutInIndexOrder) {
  SlowCode code;
  int contexts = 0;
  Proposals proposals(
      code, 5, 3,
      [&] {
        ++contexts;
        agents::StageContext context;
        context.stage = "s";
        return context;
      },
      nullptr);
  for (int index = 0; index < proposals.Count(); ++index) {
    EXPECT_EQ(proposals.Get(index).value->source, "c" + std::to_string(index) + " s");
  }
  EXPECT_EQ(code.max_in_flight.load(), 3);
  EXPECT_EQ(contexts, 1);
}

TEST(ProposalsTest, ConcurrencyOneAsksEachWhenTakenWithAFreshContext) {
  SlowCode code;
  int contexts = 0;
  Proposals proposals(
      code, 2, 1,
      [&] {
        agents::StageContext context;
        context.stage = std::to_string(++contexts);
        return context;
      },
      nullptr);
  EXPECT_EQ(proposals.Get(0).value->source, "c0 1");
  EXPECT_EQ(proposals.Get(1).value->source, "c1 2");
  EXPECT_EQ(code.max_in_flight.load(), 1);
}

}  // namespace
}  // namespace egg::pipeline
