#include "expert/families/lowering_probe.h"

#include "expert/codegen/kernel_codegen.h"
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
    const KernelFamily& family = FamilyOf(kernel.kind);
    // a family in the kernel IR is asked its analyses, nothing printed; the others' text is generated
    if (const std::optional<kir::Kernel> program = family.LowerProgram(graph, kernel, memory, layouts)) {
      probe.lowers = true;
      probe.loaded = kir::Reads(*program);
      const kir::StagedTiles tiles = kir::StagedTileLoads(*program);
      probe.a_tile_loads = tiles.a;
      probe.b_tile_loads = tiles.b;
      return probe;
    }
    const KernelSource source = family.Lower(graph, kernel, memory, layouts);
    probe.lowers = true;
    probe.loaded = source.loaded;
    probe.a_tile_loads = source.a_tile_loads;
    probe.b_tile_loads = source.b_tile_loads;
  } catch (const NotFusable& error) {
    probe.problem = error.what();
  }
  return probe;
}

}  // namespace egg::expert
