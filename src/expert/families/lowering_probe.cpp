#include "expert/families/lowering_probe.h"

#include "expert/design/legality.h"
#include "expert/families/family.h"
#include "expert/kir/analysis.h"

namespace egg::expert {

LoweringProbe ProbeLowering(const Graph& graph, const KernelPlan& kernel,
                            const std::map<int, TensorMeta>& memory,
                            const std::map<int, TensorMeta>& layouts) {
  LoweringProbe probe;
  try {
    RequireLegalDesign(kernel);
    // the family's kernel IR answers: nothing is printed
    const kir::Kernel program = FamilyOf(kernel.kind).LowerProgram(graph, kernel, memory, layouts);
    probe.lowers = true;
    probe.loaded = kir::Reads(program);
    const kir::StagedTiles tiles = kir::StagedTileLoads(program);
    probe.a_tile_loads = tiles.a;
    probe.b_tile_loads = tiles.b;
  } catch (const NotFusable& error) {
    probe.problem = error.what();
  }
  return probe;
}

}  // namespace egg::expert
