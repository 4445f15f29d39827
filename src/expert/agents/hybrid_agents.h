// The hybrid backend: the expert compiler's seeds, then in every refinement round the expert's design space
// screened as in the expert backend and, beside it, an LLM Code agent's proposals (a design move the compiler
// checks and realizes, or a source edit), all under the same acceptance rule. Debug: the expert's rules for
// the compiler's files, the LLM for LLM-written ones. When the LLM's budget is spent or it is unavailable,
// the LLM stops and the expert's search goes on. The graph, client and store must outlive the backend.
#pragma once

#include "agents/llm_agents.h"
#include "expert/agents/expert_agents.h"
#include "llm/llm.h"
#include "store/store.h"

namespace egg::expert {

agents::Backend MakeHybridBackend(const ExpertConfig& expert, llm::LlmClient& client, store::Store* store,
                                  const agents::LlmAgentConfig& llm);

}  // namespace egg::expert
