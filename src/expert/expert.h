// The expert compiler's one door: everything outside src/expert includes this header and no other of the
// compiler's. Behind it the rooms follow the data (docs/expert.md): ir/ (the captured graph, op classes,
// index algebra, capture through the worker) -> patterns/ (one matcher per kernel family) -> plan/ (fusion)
// -> design/ (the design record, defaults, legality, design spaces and moves) -> codegen/ (Triton text and
// the candidate file), with agents/ playing the three roles over them.
//
// What comes through the door:
// - capture: CaptureGraph (the worker's capture op) or ParseGraph (a saved IR) -> ParsedGraph;
// - compile a design into a candidate: CandidateDesign (the design record, which travels as data in the
//   agents' messages and the store), GenerateCandidate -> Candidate (source, plan, per-kernel reports),
//   DesignFits;
// - seeds: kSeedFamilies, SeedPlan;
// - the backends: MakeExpertBackend, MakeHybridBackend.
#pragma once

#include "expert/agents/expert_agents.h"    // IWYU pragma: export
#include "expert/agents/hybrid_agents.h"    // IWYU pragma: export
#include "expert/codegen/candidate_file.h"  // IWYU pragma: export
#include "expert/design/candidate.h"        // IWYU pragma: export
#include "expert/design/design_record.h"    // IWYU pragma: export
#include "expert/design/design_space.h"     // IWYU pragma: export
#include "expert/design/legality.h"         // IWYU pragma: export
#include "expert/ir/capture.h"              // IWYU pragma: export
#include "expert/ir/graph.h"                // IWYU pragma: export
