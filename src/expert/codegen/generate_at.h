// Inside the codegen room: the candidate file generated from one concrete graph (candidate_file.cpp), and a
// dynamic-batch candidate merged from files generated at several sizes (dynamic_candidate.cpp), which calls
// it.
#pragma once

#include <string>

#include "expert/design/candidate.h"
#include "expert/design/design_record.h"
#include "expert/ir/graph.h"

namespace egg::expert {

// One candidate from one concrete graph. `dynamic`: the file is written in its dynamic-batch form (egg_B
// defined in forward and passed to the guard), with `graph` one sample of the batch (dynamic_batch.h).
Candidate GenerateAt(const Graph& graph, const std::string& task_source, const std::string& task_name,
                     const CandidateDesign& design, const DynamicBatch* dynamic);

// A dynamic-batch candidate: the file generated at sample batches at and above the range's top (every range
// the compiler reasons with then holds for the whole range), the design of the first kept for all, and the
// sizes that change with the batch written as expressions of egg_B (dynamic_batch.h). A one-tile reduction
// over a length that grows with the batch is looped instead, once.
Candidate GenerateDynamic(const Graph& graph, const std::string& task_source, const std::string& task_name,
                          const CandidateDesign& design);

}  // namespace egg::expert
