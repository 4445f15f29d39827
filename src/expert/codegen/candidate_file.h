// A complete candidate file from a captured graph and a design record: the task's own source (so ModelNew
// inherits Model's parameters and their names), the Triton kernels of the plan, and ModelNew.forward calling
// them (and PyTorch for the ops no kernel covers), guarded to the shapes it was specialized for.
#pragma once

#include <string>

#include "expert/design/candidate.h"
#include "expert/ir/graph.h"

namespace egg::expert {

Candidate GenerateCandidate(const Graph& graph, const std::string& task_source, const std::string& task_name,
                            const CandidateDesign& design);
}  // namespace egg::expert
