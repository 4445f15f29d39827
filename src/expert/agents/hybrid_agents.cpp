#include "expert/agents/hybrid_agents.h"

#include <mutex>

#include "expert/codegen/candidate_file.h"
#include "expert/design/candidate.h"
#include "expert/design/design_move.h"

namespace egg::expert {
namespace {

constexpr const char* kSeedStage = "stage1.seeds";

bool SoftStop(agents::StopReason stop) {
  return stop == agents::StopReason::kBudgetExhausted || stop == agents::StopReason::kLlmUnavailable;
}

// What the hybrid agents share: the compiler, the last design record an incumbent had (an accepted LLM source
// edit has none: the expert goes on from the design it replaced), whether the LLM stopped, and the design
// moves refused. Thread-safe.
class HybridState : public agents::DesignRealizer {
 public:
  explicit HybridState(ExpertConfig config) : config_(std::move(config)) {}

  std::string DesignRecord(const agents::StageContext& context) override {
    std::lock_guard lock(mutex_);
    const auto base = BaseLocked(context.incumbent_design);
    return base ? DesignRecordJson(*base).dump(2) : "none";
  }

  agents::Parsed<agents::CodeProposal> Realize(const agents::StageContext& context,
                                               const Json& request) override {
    std::lock_guard lock(mutex_);
    const auto base = BaseLocked(context.incumbent_design);
    if (!base) {
      return {std::nullopt, "no design record to move from: answer with a source edit"};
    }
    const MoveCheck check = CheckDesignMove(*base, request);
    if (!check.move) {
      refused_.push_back(Json{{"stage", context.stage}, {"move", request}, {"rule", check.rule}});
      return {std::nullopt, "illegal design move: " + check.rule};
    }
    const Candidate realized = Generate(check.move->design);
    if (!realized.source) {
      refused_.push_back(Json{{"stage", context.stage}, {"move", request}, {"rule", realized.problem}});
      return {std::nullopt, "the compiler could not realize the design move: " + realized.problem};
    }
    return {
        agents::CodeProposal{*realized.source, check.move->description, check.move->move, agents::kAuthorLlm,
                             /*untrusted=*/false, DesignMessage(realized.design)},
        ""};
  }

  // The incumbent's design record when it has one, else the last one an incumbent had (none if none yet).
  std::optional<agents::Design> BaseDesign(const std::optional<agents::Design>& incumbent_design) {
    std::lock_guard lock(mutex_);
    const auto base = BaseLocked(incumbent_design);
    return base ? std::optional<agents::Design>(DesignMessage(base->design)) : std::nullopt;
  }

  void StopLlm(const std::string& why) {
    std::lock_guard lock(mutex_);
    llm_stopped_ = llm_stopped_.empty() ? why : llm_stopped_;
  }
  std::string LlmStopped() {
    std::lock_guard lock(mutex_);
    return llm_stopped_;
  }
  Json Details() {
    std::lock_guard lock(mutex_);
    return Json{{"llm_stopped", llm_stopped_.empty() ? Json() : Json(llm_stopped_)},
                {"refused_moves", refused_}};
  }

  std::mutex& ExpertMutex() { return expert_mutex_; }

 private:
  Candidate Generate(const CandidateDesign& design) const {
    return GenerateCandidate(*config_.graph, config_.task_source, config_.task_name, design);
  }

  std::optional<Candidate> BaseLocked(const std::optional<agents::Design>& incumbent_design) {
    if (const auto design = DesignOf(incumbent_design)) {
      Candidate candidate = Generate(*design);
      if (candidate.source) {
        last_design_ = design;
        return candidate;
      }
    }
    if (!last_design_) {
      return std::nullopt;
    }
    return Generate(*last_design_);
  }

  ExpertConfig config_;
  std::mutex mutex_;
  std::mutex expert_mutex_;
  std::optional<CandidateDesign> last_design_;
  std::string llm_stopped_;
  Json refused_ = Json::array();
};

// An LLM result with its budget or availability stop turned into "the LLM is done, the expert goes on".
template <typename T>
agents::AgentResult<T> Softened(agents::AgentResult<T> result, HybridState& state) {
  if (SoftStop(result.stop)) {
    state.StopLlm(agents::StopReasonName(result.stop) + ": " + result.failure);
    result.stop = agents::StopReason::kNone;
  }
  return result;
}

class HybridCode : public agents::CodeAgent {
 public:
  HybridCode(std::shared_ptr<HybridState> state, std::unique_ptr<agents::CodeAgent> expert,
             std::unique_ptr<agents::CodeAgent> llm)
      : state_(std::move(state)), expert_(std::move(expert)), llm_(std::move(llm)) {}

  agents::AgentResult<agents::CodeProposal> Propose(const agents::StageContext& context,
                                                    const agents::ProfileReport* report, int index,
                                                    int count) override {
    if (context.stage == kSeedStage) {
      std::lock_guard lock(state_->ExpertMutex());
      return expert_->Propose(context, report, index, count);
    }
    if (const std::string stopped = state_->LlmStopped(); !stopped.empty()) {
      return {std::nullopt, "the LLM stopped (" + stopped + "); the expert's search goes on",
              agents::StopReason::kNone};
    }
    return Softened(llm_->Propose(context, report, index, count), *state_);
  }

  std::vector<agents::CodeProposal> ProposeSpace(const agents::StageContext& context,
                                                 const agents::ProfileReport* report) override {
    agents::StageContext expert_context = context;
    expert_context.incumbent_design = state_->BaseDesign(context.incumbent_design);
    std::lock_guard lock(state_->ExpertMutex());
    return expert_->ProposeSpace(expert_context, report);
  }

  bool ProposesBesideSpace() const override { return true; }

 private:
  std::shared_ptr<HybridState> state_;
  std::unique_ptr<agents::CodeAgent> expert_;
  std::unique_ptr<agents::CodeAgent> llm_;
};

class HybridDebug : public agents::DebugAgent {
 public:
  HybridDebug(std::shared_ptr<HybridState> state, std::unique_ptr<agents::DebugAgent> expert,
              std::unique_ptr<agents::DebugAgent> llm)
      : state_(std::move(state)), expert_(std::move(expert)), llm_(std::move(llm)) {}

  // A file the compiler generated (it has a design record) gets the expert's rules; an LLM-written one the
  // LLM's.
  agents::AgentResult<agents::DebugReport> Repair(const agents::StageContext& context,
                                                  const agents::FailedCandidate& failed,
                                                  int attempt) override {
    if (failed.design) {
      std::lock_guard lock(state_->ExpertMutex());
      return expert_->Repair(context, failed, attempt);
    }
    if (const std::string stopped = state_->LlmStopped(); !stopped.empty()) {
      return {std::nullopt, "the LLM stopped (" + stopped + "): no repair of its file",
              agents::StopReason::kNone};
    }
    return Softened(llm_->Repair(context, failed, attempt), *state_);
  }

 private:
  std::shared_ptr<HybridState> state_;
  std::unique_ptr<agents::DebugAgent> expert_;
  std::unique_ptr<agents::DebugAgent> llm_;
};

}  // namespace

agents::Backend MakeHybridBackend(const ExpertConfig& expert, llm::LlmClient& client, store::Store* store,
                                  const agents::LlmAgentConfig& llm) {
  auto state = std::make_shared<HybridState>(expert);
  agents::Backend compiler = MakeExpertBackend(expert);
  agents::Backend model = agents::MakeLlmBackend(client, store, llm);
  agents::Backend backend;
  backend.name = "hybrid";
  backend.profile = std::move(compiler.profile);
  backend.code = std::make_unique<HybridCode>(state, std::move(compiler.code),
                                              agents::MakeLlmDesignCodeAgent(client, store, llm, *state));
  backend.debug = std::make_unique<HybridDebug>(state, std::move(compiler.debug), std::move(model.debug));
  backend.details = [state] { return state->Details(); };
  return backend;
}

}  // namespace egg::expert
