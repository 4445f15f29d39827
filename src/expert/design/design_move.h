// Design moves proposed from outside the compiler (the hybrid backend's LLM): one field of one kernel's
// design record, or one plan option, checked against the compiler's legality rules (DesignFits,
// WorthMeasuring) before anything is generated. A refusal is a value: the rule the move breaks, in words the
// LLM can act on.
#pragma once

#include <optional>
#include <string>

#include "common/json.h"
#include "expert/design/design_space.h"

namespace egg::expert {

inline constexpr const char* kPlanTarget = "plan";

struct MoveCheck {
  std::optional<DesignMove> move;  // the incumbent's design with the one field changed
  std::string rule;                // the rule broken, when there is no move
};

// `request`: {"kernel": name or "plan", "field", "value", "description"}; `incumbent` a complete candidate.
MoveCheck CheckDesignMove(const Candidate& incumbent, const Json& request);

// What an LLM may move: every kernel (name, kind, ops, design) and the plan options of `incumbent`.
Json DesignRecordJson(const Candidate& incumbent);

}  // namespace egg::expert
