// The expert backend for agents/: the same three roles as the LLM backend, played by the compiler and rules.
//   Code    = the candidate generator driven by a design record: seeds are algorithm families, later stages
//             move one design decision at a time (ProposeSpace: a pruned design space, screened by measurement).
//   Profile = rules over `egg profile` metrics and the roofline, emitting the same ProfileReport JSON.
//   Debug   = rules for known failure classes (out of resources, wrong results), then safer designs.
// Deterministic, offline, free. The graph must outlive the backend.
#pragma once

#include <string>

#include "agents/agents.h"
#include "expert/design/design_record.h"
#include "expert/ir/graph.h"

namespace egg::expert {

inline constexpr size_t kStageSpaceLimit = 8;

struct ExpertConfig {
  const Graph* graph = nullptr;
  std::string task_source;
  std::string task_name;
  size_t space_limit = kStageSpaceLimit;
};

agents::Backend MakeExpertBackend(const ExpertConfig& config);

// A design record as an agent message carries it, and back: nullopt when the message has none (LLM-written
// source) or it is not a design record.
agents::Design DesignMessage(const CandidateDesign& design);
std::optional<CandidateDesign> DesignOf(const std::optional<agents::Design>& message);

// The rules of the Profile agent, exposed for tests: a ProfileReport for an `egg profile` JSON document.
agents::ProfileReport AnalyzeProfile(const Json& profile, const std::string& stage);

}  // namespace egg::expert
