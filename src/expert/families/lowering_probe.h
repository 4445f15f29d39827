// The question the planner and the design rules ask of a kernel's lowering: does it lower, and what does it
// read from memory and stage per K step. The family's kernel IR answers from its analyses (kir/analysis.h):
// nothing is printed. plan/ and design/ include nothing of codegen/.
#pragma once

#include <map>
#include <set>
#include <string>

#include "expert/ir/graph.h"
#include "expert/plan/plan.h"

namespace egg::expert {

struct LoweringProbe {
  bool lowers = false;
  std::string problem;   // why not, when it does not lower
  std::set<int> loaded;  // values read from memory
  int a_tile_loads = 0;  // matrix products: tile-shaped loads of the A and B sides in one K step
  int b_tile_loads = 0;
};

// Lowers `kernel` to the kernel IR and asks it. `memory`: values in memory before it
// runs, with layouts; `layouts`: the layouts of the values it stores.
LoweringProbe ProbeLowering(const Graph& graph, const KernelPlan& kernel,
                            const std::map<int, TensorMeta>& memory,
                            const std::map<int, TensorMeta>& layouts);

}  // namespace egg::expert
