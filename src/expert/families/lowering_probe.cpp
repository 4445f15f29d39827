#include "expert/families/lowering_probe.h"

#include "expert/codegen/kernel_codegen.h"

namespace egg::expert {

LoweringProbe ProbeLowering(const Graph& graph, const KernelPlan& kernel,
                            const std::map<int, TensorMeta>& memory,
                            const std::map<int, TensorMeta>& layouts) {
  LoweringProbe probe;
  try {
    const KernelSource source = GenerateKernel(graph, kernel, memory, layouts);
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
