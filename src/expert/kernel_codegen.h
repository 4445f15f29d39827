// Triton source for one planned kernel, from its fusion group, its design record and the kernel templates
// (templates/triton/*.py.mustache). Throws NotFusable when the group cannot be computed as one kernel.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "expert/emitter.h"
#include "expert/plan.h"

namespace egg::expert {

struct KernelSource {
  std::string name;
  std::string code;              // the @triton.jit function
  std::vector<int> pointers;     // values passed as pointer arguments, in order
  std::string grid;              // Python expression of the launch grid
  std::map<std::string, int64_t> constexprs;  // XBLOCK, RBLOCK...
  std::vector<Helper> helpers;
  std::set<int> loaded;    // values read from memory
  std::set<int> computed;  // nodes computed in this kernel
  bool int64_indexing = false;
};

// `memory`: values in memory before this kernel runs (with layouts); `layouts`: the layouts of the values this
// kernel stores (plan.stores). Reductions and pooled or scanned results are computed in registers.
KernelSource GenerateKernel(const Graph& graph, const KernelPlan& kernel, const std::map<int, TensorMeta>& memory,
                            const std::map<int, TensorMeta>& layouts);

// The layout egg gives a value it materializes: contiguous in the value's shape.
TensorMeta DenseLayout(const TensorMeta& meta);

// The index of the anchor of a reduction kernel for row `x` and reduced position `r`.
std::vector<Index> AnchorIndex(const std::vector<int64_t>& shape, const std::vector<int64_t>& reduced,
                               const Index& x, const Index& r);

}  // namespace egg::expert
