// The three roles of every stage, as interfaces a backend implements (LLM, expert, hybrid).
//
//   Pipeline ──StageContext──▶ ProfileAgent ──ProfileReport──▶ CodeAgent ──CodeProposal──▶ harness
//       ▲                                                                                    │
//       └───────────── DebugAgent ◀──(source, status, error)── failed candidates ◀──────────┘
//
// An agent returns a value, or a failure (this attempt is lost, the stage goes on), or asks the run to
// stop (the LLM budget is spent, the provider is unavailable or refuses the configuration). Agents never
// throw for model behaviour. Agents are called concurrently for the candidates of a round (Pipeline).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agents/messages.h"

namespace egg::agents {

// What an agent may see: the stage, the task, the incumbent and a compact history (docs/pipeline.md).
struct StageContext {
  std::string stage;
  std::string objective;
  std::string moves;
  std::string task_source;
  std::string incumbent_source;   // empty before the first seed is accepted
  std::optional<Design> incumbent_design;  // the incumbent's design record; none for LLM-written source
  std::string incumbent_summary;  // one-line JSON of its measurements
  std::vector<AttemptSummary> history;
  std::string accepted_decisions;  // finalized decisions of earlier stages, JSON
  double tol = 1e-2;
  std::string precision =
      "fp32";  // fp32, bf16 or fp16: the dtype of the task's inputs, parameters and outputs
  int sm_count = 0;
  int round = 0;
  bool refining_seed = false;  // stage1.seeds: briefly refine the seed given as the incumbent
};

// kLlmConfigError: the API refused a request in a way no later call escapes (key, quota, model, request).
enum class StopReason { kNone, kBudgetExhausted, kLlmUnavailable, kLlmConfigError, kTimeBudgetUsed };
std::string StopReasonName(StopReason reason);

template <typename T>
struct AgentResult {
  std::optional<T> value;
  std::string failure;  // why there is no value
  StopReason stop = StopReason::kNone;
};

class ProfileAgent {
 public:
  virtual ~ProfileAgent() = default;
  virtual AgentResult<ProfileReport> Analyze(const StageContext& context,
                                             const std::string& profile_json) = 0;
};

class CodeAgent {
 public:
  virtual ~CodeAgent() = default;
  // Candidate `index` of `count` for this stage and round; `proposal` is the Profile agent's, if any.
  virtual AgentResult<CodeProposal> Propose(const StageContext& context, const ProfileReport* proposal,
                                            int index, int count) = 0;
  // A pruned design space for this stage and round, to be screened by measurement (the pipeline fully
  // evaluates only the fastest). Empty (the default): the backend proposes one candidate at a time.
  virtual std::vector<CodeProposal> ProposeSpace(const StageContext& context, const ProfileReport* proposal) {
    (void)context;
    (void)proposal;
    return {};
  }
  // True when this backend's one-at-a-time proposals (Propose) are tried beside its design space in every
  // refinement round (hybrid: the expert's space is screened, then the LLM's proposals compete).
  virtual bool ProposesBesideSpace() const { return false; }
};

// A candidate that failed the harness, as the Debug agent sees it.
struct FailedCandidate {
  std::string source;
  // What the source was generated from; none for LLM-written source.
  std::optional<Design> design = std::nullopt;
  std::string status;  // harness::StatusName
  std::string reason;
};

class DebugAgent {
 public:
  virtual ~DebugAgent() = default;
  virtual AgentResult<DebugReport> Repair(const StageContext& context, const FailedCandidate& failed,
                                          int attempt) = 0;
};

struct Backend {
  std::string name;
  std::unique_ptr<ProfileAgent> profile;
  std::unique_ptr<CodeAgent> code;
  std::unique_ptr<DebugAgent> debug;
  std::function<Json()>
      details;  // a backend's own report section (hybrid: the LLM's refused moves); may be empty
};

}  // namespace egg::agents
